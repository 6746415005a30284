//go:build ignore

// The neighwatch forwarding datapath: a tcx ingress program that forwards
// IPv4 and IPv6 with bpf_fib_lookup(), in two variants that differ only in
// how the packet leaves:
//
//   legacy: on BPF_FIB_LKUP_RET_SUCCESS write the FIB's MACs and call
//           bpf_redirect(). The neighbour subsystem never sees the packet,
//           so a STALE entry is never re-validated (the failure neighwatch
//           exists for). NO_NEIGH falls back to bpf_redirect_neigh().
//   neigh:  look up with BPF_FIB_LOOKUP_SKIP_NEIGH where the kernel has it
//           and always leave through bpf_redirect_neigh(), which goes
//           through neigh_output() like stack traffic: STALE -> DELAY ->
//           PROBE -> REACHABLE as the kernel intends.
//
// Anything the program should not forward goes to the stack (TC_ACT_OK).
// Every decision is counted in dp_decisions.

#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

// Not in the uapi headers: address families come from the C library's
// sys/socket.h, the fragment bits from the kernel's include/net/ip.h.
#define AF_INET 2
#define AF_INET6 10
#define IP_MF 0x2000
#define IP_OFFSET 0x1fff

// Decisions, counted in dp_decisions; Go takes them from the generated
// datapathDpDecision constants.
enum dp_decision {
	DP_PASS_NOT_IP = 0,	// not IPv4/IPv6 or truncated headers
	DP_PASS_TTL,		// TTL or hop limit would expire
	DP_PASS_FRAGMENT,	// IPv4 fragment: the stack reassembles or forwards
	DP_PASS_LOCAL,		// FIB says not forwarded (local or not a forwarding case)
	DP_PASS_FIB_OTHER,	// blackhole, unreachable, prohibit, frag needed, ...
	DP_REDIRECT,		// legacy: MACs written, bpf_redirect()
	DP_REDIRECT_NEIGH,	// neigh: bpf_redirect_neigh()
	DP_REDIRECT_NEIGH_NO_NEIGH, // legacy: NO_NEIGH, fell back to bpf_redirect_neigh()
	DP_REDIRECT_FAILED,	// the redirect helper refused
	DP_MAX,
};

// Keeps the enum in BTF for bpf2go -type: Go names the counters with it.
const enum dp_decision *unused_dp_decision __attribute__((unused));

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, DP_MAX);
	__type(key, __u32);
	__type(value, __u64);
} dp_decisions SEC(".maps");

// Set by the loader after probing: BPF_FIB_LOOKUP_SKIP_NEIGH, or 0 on
// kernels that refuse the flag (before 6.5).
volatile const __u32 neigh_lookup_flags = 0;

// The egress interface each ingress interface last redirected to with
// bpf_redirect(), by ingress ifindex (the whole of it: on a node whose
// ifindexes passed 1024 a modulo would alias two interfaces). Written only
// when it changes. Remediation reads it to know which datapath feeds a
// stuck entry's interface. Only interfaces the datapath is attached to
// write here, so a small map holds them all.
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, __u32);
	__type(value, __u32);
} last_egress SEC(".maps");

static __always_inline void count(__u32 d)
{
	__u64 *v = bpf_map_lookup_elem(&dp_decisions, &d);
	if (v)
		*v += 1;
}

// The IPv4 TTL decrement with an incremental checksum update (RFC 1624),
// as the kernel's ip_decrease_ttl() does it.
static __always_inline void ipv4_dec_ttl(struct iphdr *iph)
{
	__u32 check = (__u32)iph->check;
	check += (__u32)bpf_htons(0x0100);
	iph->check = (__sum16)(check + (check >= 0xFFFF));
	iph->ttl--;
}

static __always_inline int forward(struct __sk_buff *skb, const int neigh_mode)
{
	void *data = (void *)(long)skb->data;
	void *data_end = (void *)(long)skb->data_end;
	struct ethhdr *eth = data;
	struct bpf_fib_lookup fib = {};
	struct iphdr *iph = NULL;
	struct ipv6hdr *ip6h = NULL;

	if ((void *)(eth + 1) > data_end) {
		count(DP_PASS_NOT_IP);
		return TC_ACT_OK;
	}
	if (eth->h_proto == bpf_htons(ETH_P_IP)) {
		iph = (void *)(eth + 1);
		if ((void *)(iph + 1) > data_end || iph->ihl < 5) {
			count(DP_PASS_NOT_IP);
			return TC_ACT_OK;
		}
		if (iph->frag_off & bpf_htons(IP_MF | IP_OFFSET)) {
			count(DP_PASS_FRAGMENT);
			return TC_ACT_OK;
		}
		if (iph->ttl <= 1) {
			count(DP_PASS_TTL);
			return TC_ACT_OK;
		}
		fib.family = AF_INET;
		fib.tos = iph->tos;
		fib.l4_protocol = iph->protocol;
		fib.tot_len = bpf_ntohs(iph->tot_len);
		fib.ipv4_src = iph->saddr;
		fib.ipv4_dst = iph->daddr;
	} else if (eth->h_proto == bpf_htons(ETH_P_IPV6)) {
		ip6h = (void *)(eth + 1);
		if ((void *)(ip6h + 1) > data_end) {
			count(DP_PASS_NOT_IP);
			return TC_ACT_OK;
		}
		if (ip6h->hop_limit <= 1) {
			count(DP_PASS_TTL);
			return TC_ACT_OK;
		}
		fib.family = AF_INET6;
		fib.flowinfo = *(__be32 *)ip6h & bpf_htonl(0x0FFFFFFF);
		fib.l4_protocol = ip6h->nexthdr;
		fib.tot_len = bpf_ntohs(ip6h->payload_len);
		__builtin_memcpy(fib.ipv6_src, &ip6h->saddr, sizeof(fib.ipv6_src));
		__builtin_memcpy(fib.ipv6_dst, &ip6h->daddr, sizeof(fib.ipv6_dst));
	} else {
		count(DP_PASS_NOT_IP);
		return TC_ACT_OK;
	}
	fib.ifindex = skb->ingress_ifindex;

	long ret = bpf_fib_lookup(skb, &fib, sizeof(fib), neigh_mode ? neigh_lookup_flags : 0);
	switch (ret) {
	case BPF_FIB_LKUP_RET_SUCCESS:
	case BPF_FIB_LKUP_RET_NO_NEIGH:
		break;
	case BPF_FIB_LKUP_RET_NOT_FWDED:
		count(DP_PASS_LOCAL);
		return TC_ACT_OK;
	default:
		count(DP_PASS_FIB_OTHER);
		return TC_ACT_OK;
	}

	// Header pointers are still valid: bpf_fib_lookup does not move data.
	if (iph)
		ipv4_dec_ttl(iph);
	else if (ip6h)
		ip6h->hop_limit--;

	if (!neigh_mode && ret == BPF_FIB_LKUP_RET_SUCCESS) {
		__builtin_memcpy(eth->h_dest, fib.dmac, ETH_ALEN);
		__builtin_memcpy(eth->h_source, fib.smac, ETH_ALEN);
		ret = bpf_redirect(fib.ifindex, 0);
		if (ret != TC_ACT_REDIRECT) {
			count(DP_REDIRECT_FAILED);
			return TC_ACT_SHOT;
		}
		__u32 in = skb->ingress_ifindex, out = fib.ifindex;
		__u32 *le = bpf_map_lookup_elem(&last_egress, &in);
		if (!le)
			bpf_map_update_elem(&last_egress, &in, &out, BPF_ANY);
		else if (*le != out)
			*le = out;
		count(DP_REDIRECT);
		return TC_ACT_REDIRECT;
	}

	// After the lookup, ipv4_dst/ipv6_dst hold the next hop (the gateway
	// for routed destinations).
	struct bpf_redir_neigh nh = {};
	if (fib.family == AF_INET) {
		nh.nh_family = AF_INET;
		nh.ipv4_nh = fib.ipv4_dst;
	} else {
		nh.nh_family = AF_INET6;
		__builtin_memcpy(nh.ipv6_nh, fib.ipv6_dst, sizeof(nh.ipv6_nh));
	}
	ret = bpf_redirect_neigh(fib.ifindex, &nh, sizeof(nh), 0);
	if (ret != TC_ACT_REDIRECT) {
		count(DP_REDIRECT_FAILED);
		return TC_ACT_SHOT;
	}
	count(neigh_mode ? DP_REDIRECT_NEIGH : DP_REDIRECT_NEIGH_NO_NEIGH);
	return TC_ACT_REDIRECT;
}

SEC("tc")
int dp_legacy(struct __sk_buff *skb)
{
	return forward(skb, 0);
}

SEC("tc")
int dp_neigh(struct __sk_buff *skb)
{
	return forward(skb, 1);
}

// probe_skip_neigh returns what bpf_fib_lookup() answers to
// BPF_FIB_LOOKUP_SKIP_NEIGH: -EINVAL on kernels that do not know the flag.
SEC("tc")
int probe_skip_neigh(struct __sk_buff *skb)
{
	struct bpf_fib_lookup fib = {};
	fib.family = AF_INET;
	fib.ifindex = 1;
	fib.ipv4_dst = bpf_htonl(0x7f000001);
	return bpf_fib_lookup(skb, &fib, sizeof(fib), BPF_FIB_LOOKUP_SKIP_NEIGH);
}

char __license[] SEC("license") = "Dual MIT/GPL";
