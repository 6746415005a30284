//go:build ignore

// Programs for the forwarding benchmark (BENCHMARKS.md): an XDP program
// that passes every frame, run with BPF_F_TEST_XDP_LIVE_FRAMES to inject
// frames into a veth's receive path, and a tcx program that drops the
// benchmark's UDP frames (destination port 9) where they come out, so the
// far side's stack does not add its cost.

#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <linux/in.h>
#include <linux/udp.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

// Live frames live in recycled pages: whatever the stack changed last time
// (TTL, checksum, MACs) is still there on the next run. Restore the
// headers from a template before passing the frame on.
#define TMPL_LEN 42 /* Ethernet + IPv4 + UDP */
__u8 tmpl[TMPL_LEN];

SEC("xdp")
int xdp_pass(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	if (data + TMPL_LEN <= end)
		__builtin_memcpy(data, tmpl, TMPL_LEN);
	return XDP_PASS;
}

__u64 dropped = 0;

SEC("tc")
int tc_drop_bench(struct __sk_buff *skb)
{
	void *data = (void *)(long)skb->data;
	void *end = (void *)(long)skb->data_end;
	struct ethhdr *eth = data;
	struct iphdr *iph = (void *)(eth + 1);
	struct udphdr *udp = (void *)(iph + 1);
	if ((void *)(udp + 1) > end || eth->h_proto != bpf_htons(ETH_P_IP) || iph->protocol != IPPROTO_UDP)
		return TC_ACT_OK;
	if (udp->dest != bpf_htons(9))
		return TC_ACT_OK;
	__sync_fetch_and_add(&dropped, 1);
	return TC_ACT_SHOT;
}

char __license[] SEC("license") = "Dual MIT/GPL";

// Empty programs on the transmit tracepoint: the fixed cost of any hook
// there, the floor under the tracer's cost.
SEC("tp_btf/net_dev_start_xmit")
int empty_tp_btf(void *ctx)
{
	return 0;
}

SEC("raw_tp/net_dev_start_xmit")
int empty_raw_tp(void *ctx)
{
	return 0;
}

// An empty tcx egress program (TCX_NEXT = TC_ACT_UNSPEC): the floor of
// counting at the egress hook instead of the transmit tracepoint.
SEC("tc")
int empty_tcx_egress(struct __sk_buff *skb)
{
	return TC_ACT_UNSPEC;
}
