//go:build ignore

// The xmit tracer: an in-kernel mirror of neighbour states kept by the
// neighbour tracepoints, and a transmit hook that counts packets sent to a
// STALE entry's MAC. Traffic that goes through the neighbour subsystem
// (neigh_resolve_output) moves a STALE entry to DELAY before the packet is
// transmitted, so only traffic that bypassed it (bpf_redirect() datapaths)
// can be seen leaving towards a STALE entry: no false positives by design.

#include "tracer.h"
#include <linux/pkt_cls.h>
#include <asm/errno.h>

// count_stale counts a STALE entry in the per-interface buckets and the
// MAC filter. An answer that no STALE entry had its MAC (via_macs) is
// dropped: this one has it, and the next routed packet asks again.
static __always_inline int count_stale(const struct nkey *k, const __u8 *mac)
{
	struct mkey mk = {.ifindex = k->ifindex, .family = k->family};
	__builtin_memcpy(mk.mac, mac, 6);
	struct via *v = bpf_map_lookup_elem(&via_macs, &mk);
	if (v && v->state != VIA_STALE)
		bpf_map_delete_elem(&via_macs, &mk);
	__sync_fetch_and_add(&mac_bloom[bloom_slot(k->ifindex, mac, k->family)], 1);
	__sync_fetch_and_add(&stale_on_if[k->ifindex % STALE_BUCKETS], 1);
	return 1;
}

// uncount_stale undoes count_stale. An answer naming the entry stays: the
// transmit hook checks it against the mirror before it blames anyone.
static __always_inline void uncount_stale(const struct nkey *k, const __u8 *mac)
{
	__u32 slot = bloom_slot(k->ifindex, mac, k->family);
	if (mac_bloom[slot])
		__sync_fetch_and_add(&mac_bloom[slot], -1);
	__sync_fetch_and_add(&stale_on_if[k->ifindex % STALE_BUCKETS], -1);
}

// Seeding: user space writes a batch of table entries into seed_batch
// (mapped into its memory), runs tr_seed once (BPF_PROG_RUN), and reads
// each entry's result back. tr_candidates takes the source-MAC candidates
// the same way. Each entry takes the same path as one a
// tracepoint reports, without a syscall: one batch of SEED_BATCH costs
// one syscall instead of two or more per entry.
#define SEED_BATCH 1024

enum seed_result {
	SEED_INSERTED = 1,   /* mirrored, and if STALE, counted */
	SEED_EXISTS = 2,     /* a tracepoint mirrored it first: its entry stays */
	SEED_UNMIRRORED = 3, /* the mirror is full */
	SEED_UNCOUNTED = 4,  /* mirrored, but STALE without a MAC */
};

struct seed_entry {
	struct nkey key;
	__u8 mac[6];
	__u8 state;
	__u8 has_mac; /* mac holds an Ethernet address */
	__u8 result;  /* enum seed_result or cand_result, written back */
	__u8 pad[7];
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, SEED_BATCH);
	__type(key, __u32);
	__type(value, struct seed_entry);
} seed_batch SEC(".maps");

struct seed_args {
	__u32 n; /* entries in seed_batch */
};

const enum seed_result *unused_seed_result __attribute__((unused));

// errno_is tests a map helper's error by its low 32 bits only: before 6.4
// the verifier calls the map's own update and delete directly, and those
// returned int, so a negative error reaches the program zero-extended
// (on 6.1, -EEXIST reads 4294967279).
static __always_inline int errno_is(long err, int e)
{
	return (__s32)err == -e;
}

static long seed_one(__u32 i, void *unused)
{
	struct seed_entry *e = bpf_map_lookup_elem(&seed_batch, &i);
	if (!e)
		return 1;
	struct nkey k = e->key;
	struct nval nv = {.state = e->state};
	__builtin_memcpy(nv.mac, e->mac, 6);
	if (nv.state == NUD_STALE && e->has_mac)
		nv.stale_ok = count_stale(&k, nv.mac);
	long err = bpf_map_update_elem(&neigh_mirror, &k, &nv, BPF_NOEXIST);
	if (err) {
		if (nv.stale_ok)
			uncount_stale(&k, nv.mac);
		e->result = errno_is(err, EEXIST) ? SEED_EXISTS : SEED_UNMIRRORED;
		return 0;
	}
	e->result = nv.state == NUD_STALE && !nv.stale_ok ? SEED_UNCOUNTED : SEED_INSERTED;
	return 0;
}

enum cand_result {
	CAND_ADDED = 1,   /* a new candidate */
	CAND_KEPT = 2,    /* already a candidate: what was seen of it stays */
	CAND_CHANGED = 3, /* the same, now with this MAC (one by one, before 6.0) */
	CAND_FULL = 4,    /* not watched: the map is full */
	CAND_REMOVED = 5, /* has_mac 0: no longer a candidate */
	CAND_ABSENT = 6,  /* has_mac 0, and it was none */
	CAND_FAILED = 7,  /* has_mac 0, and the kernel refused the delete */
};

const enum cand_result *unused_cand_result __attribute__((unused));

// cand_one makes entry i of the batch a candidate, in the mirror's value,
// or no longer one. Only this program and sighted() write a value's
// candidate part, and only in place: the hooks keep it as it is.
static long cand_one(__u32 i, void *unused)
{
	struct seed_entry *e = bpf_map_lookup_elem(&seed_batch, &i);
	if (!e)
		return 1;
	struct nkey k = e->key;
	struct nval *nv = bpf_map_lookup_elem(&neigh_mirror, &k);
	if (!e->has_mac) {
		if (!nv || !nv->c.on) {
			e->result = CAND_ABSENT;
			return 0;
		}
		// An entry the kernel deleted stays while it is a candidate
		// (track), so that this is where it goes.
		if (nv->c.gone) {
			long err = bpf_map_delete_elem(&neigh_mirror, &k);
			e->result = !err || errno_is(err, ENOENT) ? CAND_REMOVED : CAND_FAILED;
			return 0;
		}
		__builtin_memset(&nv->c, 0, sizeof(nv->c));
		e->result = CAND_REMOVED;
		return 0;
	}
	if (!nv) {
		e->result = CAND_FULL; // not mirrored: the mirror is full
		return 0;
	}
	// The candidate's MAC is the entry's own, which the hooks keep
	// current: one already watched stays as it is, whatever MAC user
	// space last knew.
	if (nv->c.on) {
		e->result = CAND_KEPT;
		return 0;
	}
	e->result = CAND_ADDED;
	__u8 gone = nv->c.gone;
	__builtin_memset(&nv->c, 0, sizeof(nv->c));
	nv->c.on = 1;
	nv->c.gone = gone;
	return 0;
}

// each_in_batch calls fn for the first n entries of seed_batch, n no more
// than the batch holds. Inlined, fn is a constant for the verifier.
static __always_inline int each_in_batch(struct seed_args *args, void *fn)
{
	__u32 n = args->n;
	if (n > SEED_BATCH)
		n = SEED_BATCH;
	bpf_loop(n, fn, NULL, 0);
	return 0;
}

// tr_candidates adds, changes or removes the source-MAC candidates of
// the first n entries of seed_batch, as tr_seed seeds them.
SEC("syscall")
int tr_candidates(struct seed_args *args) { return each_in_batch(args, cand_one); }

// tr_seed inserts the first n entries of seed_batch. A syscall program
// (5.14) that loops with bpf_loop (5.17) over maps allocated on demand,
// which sleepable programs may use from 6.0: older kernels refuse it, and
// user space seeds entry by entry instead.
SEC("syscall")
int tr_seed(struct seed_args *args) { return each_in_batch(args, seed_one); }

static __always_inline void track(struct neighbour *n, __u8 source, int dead)
{
	struct nkey k = {};
	struct nval nv = {};
	unsigned int key_len;

	struct net_device *dev = BPF_CORE_READ(n, dev);
	k.ifindex = BPF_CORE_READ(dev, ifindex);
	if (!is_watched(k.ifindex) || !in_netns(dev))
		return;
	k.family = BPF_CORE_READ(n, tbl, family);
	key_len = BPF_CORE_READ(n, tbl, key_len);
	if (k.family == AF_INET && key_len == 4)
		bpf_core_read(k.addr, 4, &n->primary_key);
	else if (k.family == AF_INET6 && key_len == 16)
		bpf_core_read(k.addr, 16, &n->primary_key);
	else
		return;
	nv.state = dead ? 0 : BPF_CORE_READ(n, nud_state);
	bpf_core_read(nv.mac, 6, &n->ha);

	struct nval *old = bpf_map_lookup_elem(&neigh_mirror, &k);
	__u8 from = 0;
	int was_counted = 0;
	__u8 old_mac[6] = {};
	if (old) {
		from = old->state;
		// Unchanged, unless a STALE entry the maps could not count:
		// every change is another try.
		if (!dead && old->state == nv.state && mac_eq(old->mac, nv.mac) && (nv.state != NUD_STALE || old->stale_ok))
			return;
		was_counted = old->stale_ok;
		__builtin_memcpy(old_mac, old->mac, 6);
	} else if (dead) {
		return;
	}
	if (was_counted)
		uncount_stale(&k, old_mac);
	// The mirror remembers whether a STALE entry was counted in the
	// filters (stale_ok), so whatever was counted is uncounted exactly
	// once.
	if (!dead && nv.state == NUD_STALE)
		nv.stale_ok = count_stale(&k, nv.mac);
	if (old) {
		// In place: the candidate part is tr_candidates' and sighted()'s,
		// and a new value would lose what they write meanwhile. A
		// deleted candidate stays, state 0, until tr_candidates drops it.
		if (dead && !old->c.on) {
			bpf_map_delete_elem(&neigh_mirror, &k);
		} else {
			old->state = nv.state;
			__builtin_memcpy(old->mac, nv.mac, 6);
			old->stale_ok = nv.stale_ok;
			old->c.gone = dead;
		}
	} else if (bpf_map_update_elem(&neigh_mirror, &k, &nv, BPF_ANY)) {
		stat_inc(ST_MIRROR_DROPPED);
		if (nv.stale_ok)
			uncount_stale(&k, nv.mac);
		announce(&k, SRC_UNMIRRORED, nv.mac);
		return;
	}
	if (!dead && nv.state == NUD_STALE && !nv.stale_ok)
		announce(&k, SRC_UNMIRRORED, nv.mac);
	// Its bypass counters belong to one STALE period.
	if (from == NUD_STALE && (dead || nv.state != NUD_STALE))
		bpf_map_delete_elem(&hits, &k);

	// Netlink reports every other change; these it never does.
	int silent = (source == SRC_EVENT_SEND && from != nv.state) ||
		     (source == SRC_TIMER && nv.state == NUD_DELAY && from != NUD_DELAY);
	if (!silent)
		return;
	struct tp_event *ev = bpf_ringbuf_reserve(&tp_events, sizeof(*ev), 0);
	if (!ev) {
		stat_inc(ST_EVENTS_DROPPED);
		return;
	}
	ev->key = k;
	ev->from = from;
	ev->to = nv.state;
	ev->source = source;
	__builtin_memcpy(ev->mac, nv.mac, 6);
	bpf_ringbuf_submit(ev, 0);
}

// Each neighbour hook comes twice: as tp_btf, which the loader tries
// first, and as a raw tracepoint, whose arguments are plain 64-bit values
// (every read goes through bpf_probe_read_kernel), for kernels whose
// verifier refuses the tp_btf one. The loader keeps whichever loads.
#define NEIGH_HOOK(name, tp, source, dead)                                  \
	SEC("tp_btf/" #tp)                                                  \
	int BPF_PROG(name, struct neighbour *n, int err)                    \
	{                                                                   \
		track(n, source, dead);                                     \
		return 0;                                                   \
	}                                                                   \
	SEC("raw_tp/" #tp)                                                  \
	int BPF_PROG(name##_raw, struct neighbour *n, int err)              \
	{                                                                   \
		track(n, source, dead);                                     \
		return 0;                                                   \
	}

NEIGH_HOOK(tr_update_done, neigh_update_done, SRC_UPDATE, 0)
NEIGH_HOOK(tr_event_send_done, neigh_event_send_done, SRC_EVENT_SEND, 0)
NEIGH_HOOK(tr_timer_handler, neigh_timer_handler, SRC_TIMER, 0)
NEIGH_HOOK(tr_cleanup, neigh_cleanup_and_release, SRC_CLEANUP, 1)

// neigh_create fires in ___neigh_create() right after the allocation,
// before the entry has its device, address or state (and n may be NULL),
// so the key comes from the arguments. The entry's state is not known
// yet: this only tells user space to look the entry up, since netlink
// never announces some entries (IPv6 multicast, NOARP). The mirror learns
// the entry from its first update.
static __always_inline void created(struct neigh_table *tbl, struct net_device *dev, const void *pkey, void *n)
{
	struct nkey k = {};
	k.ifindex = BPF_CORE_READ(dev, ifindex);
	if (!n || !is_watched(k.ifindex) || !in_netns(dev))
		return;
	k.family = BPF_CORE_READ(tbl, family);
	unsigned int key_len = BPF_CORE_READ(tbl, key_len);
	if (k.family == AF_INET && key_len == 4)
		bpf_probe_read_kernel(k.addr, 4, pkey);
	else if (k.family == AF_INET6 && key_len == 16)
		bpf_probe_read_kernel(k.addr, 16, pkey);
	else
		return;
	struct tp_event *ev = bpf_ringbuf_reserve(&tp_events, sizeof(*ev), 0);
	if (!ev) {
		stat_inc(ST_EVENTS_DROPPED);
		return;
	}
	__builtin_memset(ev, 0, sizeof(*ev));
	ev->key = k;
	ev->source = SRC_CREATE;
	bpf_ringbuf_submit(ev, 0);
}

// Before 6.18 the verifier refuses a tp_btf program that reads the
// `const void *pkey` argument ("arg2 type UNKNOWN is not a struct"); the
// raw tracepoint takes it on every kernel.
SEC("tp_btf/neigh_create")
int BPF_PROG(tr_create, struct neigh_table *tbl, struct net_device *dev, const void *pkey, struct neighbour *n, _Bool exempt_from_gc)
{
	created(tbl, dev, pkey, n);
	return 0;
}

SEC("raw_tp/neigh_create")
int BPF_PROG(tr_create_raw, struct neigh_table *tbl, struct net_device *dev, const void *pkey, struct neighbour *n, _Bool exempt_from_gc)
{
	created(tbl, dev, pkey, n);
	return 0;
}

// routed blames bypass traffic whose destination address has no entry of
// its own (k holds the interface, family and that address) and went to
// mac: a gateway's. The STALE entry with that MAC is named by user space
// from its table, asked once an epoch (SRC_ROUTED), and checked against
// the mirror at each packet: an entry that left STALE, or changed MAC,
// is blamed for nothing, and the question is asked again.
static __always_inline void routed(struct nkey *k, const __u8 *mac)
{
	struct mkey mk = {.ifindex = k->ifindex, .family = k->family};
	__builtin_memcpy(mk.mac, mac, ETH_ALEN);
	__builtin_memset(k->addr, 0, sizeof(k->addr));
	struct via *v = bpf_map_lookup_elem(&via_macs, &mk);
	if (!v) {
		struct via ask = {.epoch = epoch, .state = VIA_ASKED};
		if (!bpf_map_update_elem(&via_macs, &mk, &ask, BPF_NOEXIST)) {
			stat_inc(ST_ROUTED_ASKS);
			announce(k, SRC_ROUTED, mac);
		}
		return;
	}
	if (v->state == VIA_STALE) {
		__builtin_memcpy(k->addr, v->addr, 16);
		struct nval *nv = bpf_map_lookup_elem(&neigh_mirror, k);
		if (nv && nv->state == NUD_STALE && mac_eq(nv->mac, mac)) {
			count_hit(k);
			return;
		}
		__builtin_memset(k->addr, 0, sizeof(k->addr));
		v->state = VIA_ASKED;
		v->epoch = epoch;
	} else if (v->state == VIA_ASKED ? v->epoch != epoch : epoch - v->epoch >= VIA_NONE_EPOCHS) {
		v->state = VIA_ASKED;
		v->epoch = epoch;
	} else {
		return;
	}
	stat_inc(ST_ROUTED_ASKS);
	announce(k, SRC_ROUTED, mac);
}

// net_dev_start_xmit rather than net_dev_queue: it fires in xmit_one()
// right before the driver's ndo_start_xmit, once per packet actually handed
// to the device (after the qdisc, so nothing it dropped is counted), it is
// reached by bpf_redirect() to egress as well as by the stack, and it gives
// the egress device as an argument. skb->data points at the Ethernet header
// there.
//
// Per packet, cheapest first: is the interface watched (a bit in a global
// array), does its bucket hold any STALE entry (a global counter), is the
// device in our namespace (two plain loads), then read the Ethernet header
// and ask the counting filter whether (interface, MAC, family) may be
// STALE; only then read the destination address and look it up in the
// mirror. xmit_filter exists to measure what each filter buys
// (BENCHMARKS.md): 3 = all (the default), 2 = no MAC filter, 1 = watched
// check only, 0 = none (the naive hook).
volatile const __u32 xmit_filter = 3;

SEC("tp_btf/net_dev_start_xmit")
int BPF_PROG(tr_xmit, const struct sk_buff *skb, const struct net_device *dev)
{
	// Direct loads: tp_btf arguments are typed pointers the verifier lets
	// us read, no helper call on the hot path.
	__u32 ifindex = dev->ifindex;
	if (xmit_filter >= 1 && !is_watched(ifindex))
		return 0;
	if (xmit_filter >= 2 && stale_on_if[ifindex % STALE_BUCKETS] == 0)
		return 0;
	if (netns_ino && dev->nd_net.net->ns.inum != netns_ino)
		return 0;
	unsigned char *data = skb->data;
	struct ethhdr eth;
	if (bpf_probe_read_kernel(&eth, sizeof(eth), data))
		return 0;
	struct nkey k = {.ifindex = ifindex};
	if (eth.h_proto == bpf_htons(ETH_P_IP))
		k.family = AF_INET;
	else if (eth.h_proto == bpf_htons(ETH_P_IPV6))
		k.family = AF_INET6;
	else
		return 0;
	if (xmit_filter >= 3 && mac_bloom[bloom_slot(ifindex, eth.h_dest, k.family)] == 0)
		return 0;
	stat_inc(k.family == AF_INET ? ST_XMIT_LOOKUPS : ST_XMIT_LOOKUPS6);

	// On-link traffic: the destination IP is the neighbour, and it counts
	// only if that entry is STALE at this MAC. Routed traffic (no entry
	// for the destination): the MAC is the gateway's.
	if (k.family == AF_INET)
		bpf_probe_read_kernel(k.addr, 4, data + sizeof(struct ethhdr) + offsetof(struct iphdr, daddr));
	else
		bpf_probe_read_kernel(k.addr, 16, data + sizeof(struct ethhdr) + offsetof(struct ipv6hdr, daddr));
	struct nval *nv = bpf_map_lookup_elem(&neigh_mirror, &k);
	if (nv && !nv->c.gone) {
		if (nv->state == NUD_STALE && mac_eq(nv->mac, eth.h_dest))
			count_hit(&k);
		return 0;
	}
	routed(&k, eth.h_dest);
	return 0;
}

// Source-MAC evidence, on tcx ingress of the interfaces with candidates
// (stale-long entries): a packet whose source address is a candidate's and
// whose Ethernet source is not the candidate's MAC came from the host at
// another MAC. In the failure neighwatch exists for, the moved host keeps
// sending, so this proves the move passively. A packet from any other
// address costs one test of source_bloom after the headers are parsed.
SEC("tc")
int tr_source(struct __sk_buff *skb)
{
	void *data = (void *)(long)skb->data;
	void *data_end = (void *)(long)skb->data_end;
	struct ethhdr *eth = data;
	if ((void *)(eth + 1) > data_end)
		return TC_ACT_UNSPEC;
	struct nkey k = {.ifindex = skb->ifindex};
	if (eth->h_proto == bpf_htons(ETH_P_IP)) {
		struct iphdr *iph = (void *)(eth + 1);
		if ((void *)(iph + 1) > data_end)
			return TC_ACT_UNSPEC;
		k.family = AF_INET;
		__builtin_memcpy(k.addr, &iph->saddr, 4);
	} else if (eth->h_proto == bpf_htons(ETH_P_IPV6)) {
		struct ipv6hdr *ip6h = (void *)(eth + 1);
		if ((void *)(ip6h + 1) > data_end)
			return TC_ACT_UNSPEC;
		k.family = AF_INET6;
		__builtin_memcpy(k.addr, &ip6h->saddr, 16);
	} else {
		return TC_ACT_UNSPEC;
	}
	sight(&k, eth->h_source);
	return TC_ACT_UNSPEC; // on to the next program, or the stack
}

char __license[] SEC("license") = "GPL";
