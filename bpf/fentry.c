//go:build ignore

// The fentry tracer: exact attribution where the kernel lets fentry/fexit
// programs load. fexit on the FIB lookup helpers remembers, per CPU, which
// neighbour the last successful lookup resolved to and its state; fentry on
// the redirect helpers then knows which helper sent the packet on. A
// bpf_redirect() after a lookup that resolved to a STALE entry is a bypass
// hit. Maps are shared with the xmit tracer's mirror (the loader replaces
// them), so the neighbour tracepoints keep the states.
//
// Many kernels refuse these programs (EPERM with lockdown, no
// CONFIG_FUNCTION_TRACER, or an LSM); the loader then falls back to the
// xmit tracer.

#include "tracer.h"

// fe_redirects counts redirect helper calls by helper and by the state of
// the neighbour the FIB lookup before them resolved: slot
// helper * NH_MAX + nexthop.
enum fe_helper {
	H_REDIRECT = 0,		// bpf_redirect() in TC
	H_REDIRECT_NEIGH,	// bpf_redirect_neigh()
	H_REDIRECT_PEER,	// bpf_redirect_peer()
	H_XDP_REDIRECT,		// bpf_redirect() in XDP: bpf_xdp_redirect
	H_XDP_REDIRECT_MAP,	// bpf_redirect_map() in XDP to a devmap
	H_MAX,
};
enum fe_nexthop { NH_OTHER = 0, NH_STALE, NH_MAX };

// Keep the enums in BTF for bpf2go -type.
const enum fe_helper *unused_fe_helper __attribute__((unused));
const enum fe_nexthop *unused_fe_nexthop __attribute__((unused));

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, H_MAX * NH_MAX);
	__type(key, __u32);
	__type(value, __u64);
} fe_redirects SEC(".maps");

struct last_fib {
	struct nkey key;
	__u8 stale;
	__u8 valid;
	__u8 pad[2];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct last_fib);
} fe_last SEC(".maps");

// after_fib records what a FIB lookup resolved to, when it ran in the
// mirrored namespace (dev is the device the packet arrived on): ifindexes
// and addresses repeat across namespaces.
static __always_inline void after_fib(struct net_device *dev, __u64 params, long ret)
{
	__u32 zero = 0;
	struct last_fib *lf = bpf_map_lookup_elem(&fe_last, &zero);
	if (!lf)
		return;
	lf->valid = 0;
	if (ret != 0) // BPF_FIB_LKUP_RET_SUCCESS
		return;
	if (!dev || !in_netns(dev))
		return;
	// The lookup has written its answer into the caller's struct
	// bpf_fib_lookup: ifindex is the egress interface and ipv4_dst /
	// ipv6_dst the next hop.
	struct bpf_fib_lookup p;
	if (bpf_probe_read_kernel(&p, sizeof(p), (void *)params))
		return;
	struct nkey k = {.ifindex = p.ifindex, .family = p.family};
	if (p.family == AF_INET)
		__builtin_memcpy(k.addr, &p.ipv4_dst, sizeof(p.ipv4_dst));
	else
		__builtin_memcpy(k.addr, p.ipv6_dst, sizeof(p.ipv6_dst));
	struct nval *nv = bpf_map_lookup_elem(&neigh_mirror, &k);
	lf->key = k;
	lf->stale = nv && nv->state == NUD_STALE;
	lf->valid = 1;
}

static __always_inline void on_redirect(__u32 helper)
{
	__u32 zero = 0;
	struct last_fib *lf = bpf_map_lookup_elem(&fe_last, &zero);
	__u32 idx = helper * NH_MAX + NH_OTHER;
	if (lf && lf->valid && lf->stale) {
		idx = helper * NH_MAX + NH_STALE;
		// bpf_redirect_neigh and bpf_redirect_peer hand the packet to
		// the neighbour subsystem or another namespace: no bypass.
		if (helper == H_REDIRECT || helper == H_XDP_REDIRECT || helper == H_XDP_REDIRECT_MAP)
			count_hit(&lf->key);
	}
	if (lf)
		lf->valid = 0;
	__u64 *v = bpf_map_lookup_elem(&fe_redirects, &idx);
	if (v)
		*v += 1;
}

SEC("fexit/bpf_skb_fib_lookup")
int BPF_PROG(fe_skb_fib, __u64 skb, __u64 params, __u64 plen, __u64 flags, __u64 a5, long ret)
{
	after_fib(BPF_CORE_READ((struct sk_buff *)skb, dev), params, ret);
	return 0;
}

// xdp_source looks at the frame an XDP forwarder asked the FIB about: its
// source address (as the forwarder filled in the lookup) and its Ethernet
// source. A frame the forwarder redirects never reaches tc ingress, where
// tr_source would see it, so for a host whose own packets an XDP program
// forwards this is where source-MAC evidence comes from.
static __always_inline void xdp_source(struct xdp_buff *xdp, struct net_device *dev, __u64 params)
{
	if (!dev || !in_netns(dev))
		return;
	struct bpf_fib_lookup p;
	if (bpf_probe_read_kernel(&p, sizeof(p), (void *)params))
		return;
	struct nkey k = {.ifindex = BPF_CORE_READ(dev, ifindex), .family = p.family};
	if (p.family == AF_INET)
		__builtin_memcpy(k.addr, &p.ipv4_src, sizeof(p.ipv4_src));
	else if (p.family == AF_INET6)
		__builtin_memcpy(k.addr, p.ipv6_src, sizeof(p.ipv6_src));
	else
		return;
	struct ethhdr eth;
	if (bpf_probe_read_kernel(&eth, sizeof(eth), BPF_CORE_READ(xdp, data)))
		return;
	sight(&k, eth.h_source);
}

SEC("fexit/bpf_xdp_fib_lookup")
int BPF_PROG(fe_xdp_fib, __u64 xdp, __u64 params, __u64 plen, __u64 flags, __u64 a5, long ret)
{
	struct net_device *dev = BPF_CORE_READ((struct xdp_buff *)xdp, rxq, dev);
	xdp_source((struct xdp_buff *)xdp, dev, params);
	after_fib(dev, params, ret);
	return 0;
}

SEC("fentry/bpf_redirect")
int BPF_PROG(fe_redirect, __u64 ifindex, __u64 flags)
{
	on_redirect(H_REDIRECT);
	return 0;
}

SEC("fentry/bpf_redirect_neigh")
int BPF_PROG(fe_redirect_neigh, __u64 ifindex, __u64 params)
{
	on_redirect(H_REDIRECT_NEIGH);
	return 0;
}

SEC("fentry/bpf_redirect_peer")
int BPF_PROG(fe_redirect_peer, __u64 ifindex, __u64 flags)
{
	on_redirect(H_REDIRECT_PEER);
	return 0;
}

// XDP. bpf_redirect() in an XDP program is bpf_xdp_redirect().
SEC("fentry/bpf_xdp_redirect")
int BPF_PROG(fe_xdp_redirect, __u64 ifindex, __u64 flags)
{
	on_redirect(H_XDP_REDIRECT);
	return 0;
}

// bpf_redirect_map(): from 5.13 the JIT calls the map's map_redirect
// operation directly, so the helper function never runs; the devmap ones
// are dev_map_redirect and dev_hash_map_redirect. Before that the helper
// is bpf_xdp_redirect_map. The loader attaches whichever the kernel has.
SEC("fentry/dev_map_redirect")
int BPF_PROG(fe_dev_map_redirect)
{
	on_redirect(H_XDP_REDIRECT_MAP);
	return 0;
}

SEC("fentry/dev_hash_map_redirect")
int BPF_PROG(fe_dev_hash_map_redirect)
{
	on_redirect(H_XDP_REDIRECT_MAP);
	return 0;
}

SEC("fentry/bpf_xdp_redirect_map")
int BPF_PROG(fe_xdp_redirect_map)
{
	on_redirect(H_XDP_REDIRECT_MAP);
	return 0;
}

char __license[] SEC("license") = "GPL";
