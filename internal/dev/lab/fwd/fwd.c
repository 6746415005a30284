//go:build ignore

// Minimal forwarders for lab tests, written apart from neighwatch's own
// datapath (bpf/datapath.c) so that tests do not only check the project
// against itself. Both do what an eBPF datapath like Cilium's did before
// bpf_redirect_neigh(): look the destination up in the FIB and, if the
// kernel has a valid neighbour, write the MACs and redirect. Anything else
// goes to the stack.

#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#define AF_INET 2
#define AF_INET6 10

// lookup fills fib from the packet at data and asks the FIB; it returns
// the verdict and decrements the TTL when the packet is to be forwarded.
static __always_inline long lookup(void *ctx, void *data, void *data_end, __u32 ifindex, struct bpf_fib_lookup *fib)
{
	struct ethhdr *eth = data;
	if ((void *)(eth + 1) > data_end)
		return -1;
	if (eth->h_proto == bpf_htons(ETH_P_IP)) {
		struct iphdr *ip = (void *)(eth + 1);
		if ((void *)(ip + 1) > data_end || ip->ttl <= 1)
			return -1;
		fib->family = AF_INET;
		fib->tos = ip->tos;
		fib->l4_protocol = ip->protocol;
		fib->tot_len = bpf_ntohs(ip->tot_len);
		fib->ipv4_src = ip->saddr;
		fib->ipv4_dst = ip->daddr;
		fib->ifindex = ifindex;
		long ret = bpf_fib_lookup(ctx, fib, sizeof(*fib), 0);
		if (ret == BPF_FIB_LKUP_RET_SUCCESS) {
			__u32 sum = ip->check + bpf_htons(0x0100);
			ip->check = (__u16)(sum + (sum >= 0xffff));
			ip->ttl--;
		}
		return ret;
	}
	if (eth->h_proto == bpf_htons(ETH_P_IPV6)) {
		struct ipv6hdr *ip6 = (void *)(eth + 1);
		if ((void *)(ip6 + 1) > data_end || ip6->hop_limit <= 1)
			return -1;
		fib->family = AF_INET6;
		fib->l4_protocol = ip6->nexthdr;
		fib->tot_len = bpf_ntohs(ip6->payload_len);
		__builtin_memcpy(fib->ipv6_src, &ip6->saddr, 16);
		__builtin_memcpy(fib->ipv6_dst, &ip6->daddr, 16);
		fib->ifindex = ifindex;
		long ret = bpf_fib_lookup(ctx, fib, sizeof(*fib), 0);
		if (ret == BPF_FIB_LKUP_RET_SUCCESS)
			ip6->hop_limit--;
		return ret;
	}
	return -1;
}

SEC("tc")
int fwd_tc(struct __sk_buff *skb)
{
	void *data = (void *)(long)skb->data;
	void *data_end = (void *)(long)skb->data_end;
	struct bpf_fib_lookup fib = {};
	if (lookup(skb, data, data_end, skb->ingress_ifindex, &fib) != BPF_FIB_LKUP_RET_SUCCESS)
		return TC_ACT_OK;
	struct ethhdr *eth = data;
	__builtin_memcpy(eth->h_dest, fib.dmac, ETH_ALEN);
	__builtin_memcpy(eth->h_source, fib.smac, ETH_ALEN);
	return bpf_redirect(fib.ifindex, 0);
}

SEC("xdp")
int fwd_xdp(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct bpf_fib_lookup fib = {};
	if (lookup(ctx, data, data_end, ctx->ingress_ifindex, &fib) != BPF_FIB_LKUP_RET_SUCCESS)
		return XDP_PASS;
	struct ethhdr *eth = data;
	__builtin_memcpy(eth->h_dest, fib.dmac, ETH_ALEN);
	__builtin_memcpy(eth->h_source, fib.smac, ETH_ALEN);
	return bpf_redirect(fib.ifindex, 0);
}

// The same with bpf_redirect_map() to a devmap that maps each egress
// ifindex to itself (the loader fills it).
struct {
	__uint(type, BPF_MAP_TYPE_DEVMAP);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, __u32);
} tx_ports SEC(".maps");

SEC("xdp")
int fwd_xdp_map(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct bpf_fib_lookup fib = {};
	if (lookup(ctx, data, data_end, ctx->ingress_ifindex, &fib) != BPF_FIB_LKUP_RET_SUCCESS)
		return XDP_PASS;
	struct ethhdr *eth = data;
	__builtin_memcpy(eth->h_dest, fib.dmac, ETH_ALEN);
	__builtin_memcpy(eth->h_source, fib.smac, ETH_ALEN);
	return bpf_redirect_map(&tx_ports, fib.ifindex, 0);
}

// Hands every IP packet to the peer of peer_ifindex (a veth whose other
// end is in another namespace) with bpf_redirect_peer(), no FIB lookup:
// the way pod datapaths enter a pod's namespace.
volatile const __u32 peer_ifindex = 0;

SEC("tc")
int fwd_peer(struct __sk_buff *skb)
{
	if (skb->protocol != bpf_htons(ETH_P_IP) && skb->protocol != bpf_htons(ETH_P_IPV6))
		return TC_ACT_OK;
	return bpf_redirect_peer(peer_ifindex, 0);
}

char __license[] SEC("license") = "GPL";
