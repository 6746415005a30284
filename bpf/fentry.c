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

// Helpers counted in fe_redirects, by next-hop state class.
enum { H_REDIRECT = 0, H_REDIRECT_NEIGH, H_REDIRECT_PEER, H_MAX };
enum { C_OTHER = 0, C_STALE, C_MAX };

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, H_MAX * C_MAX);
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

// struct bpf_fib_lookup as the uapi lays it out, the fields used.
struct fib_params {
	__u8 family;
	__u8 l4_protocol;
	__be16 sport;
	__be16 dport;
	__u16 tot_len;
	__u32 ifindex;
	__u32 flowinfo_or_tos;
	__u32 src[4];
	__u32 dst[4];
};

static __always_inline void after_fib(__u64 params, long ret)
{
	__u32 zero = 0;
	struct last_fib *lf = bpf_map_lookup_elem(&fe_last, &zero);
	if (!lf)
		return;
	lf->valid = 0;
	if (ret != 0) // BPF_FIB_LKUP_RET_SUCCESS
		return;
	struct fib_params p;
	if (bpf_probe_read_kernel(&p, sizeof(p), (void *)params))
		return;
	struct nkey k = {.ifindex = p.ifindex, .family = p.family};
	if (p.family == AF_INET)
		__builtin_memcpy(k.addr, &p.dst[0], 4);
	else
		__builtin_memcpy(k.addr, p.dst, 16);
	struct nval *nv = bpf_map_lookup_elem(&neigh_mirror, &k);
	lf->key = k;
	lf->stale = nv && nv->state == NUD_STALE;
	lf->valid = 1;
}

static __always_inline void on_redirect(__u32 helper)
{
	__u32 zero = 0;
	struct last_fib *lf = bpf_map_lookup_elem(&fe_last, &zero);
	__u32 idx = helper * C_MAX + C_OTHER;
	if (lf && lf->valid && lf->stale) {
		idx = helper * C_MAX + C_STALE;
		if (helper == H_REDIRECT)
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
	after_fib(params, ret);
	return 0;
}

SEC("fexit/bpf_xdp_fib_lookup")
int BPF_PROG(fe_xdp_fib, __u64 xdp, __u64 params, __u64 plen, __u64 flags, __u64 a5, long ret)
{
	after_fib(params, ret);
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

char __license[] SEC("license") = "GPL";
