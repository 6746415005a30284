/* Shared by the tracer programs: minimal kernel types for CO-RE, the maps
 * that mirror neighbour states in the kernel, and the hit accounting. */
#pragma once

#include <linux/types.h>
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/neighbour.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_endian.h>

/* Address families live in the C library's sys/socket.h, which the BPF
 * target does not have. */
#define AF_INET 2
#define AF_INET6 10

/* Only the fields used; CO-RE relocates them against the running kernel. */
struct ns_common {
	unsigned int inum;
} __attribute__((preserve_access_index));

struct net {
	struct ns_common ns;
} __attribute__((preserve_access_index));

typedef struct {
	struct net *net;
} possible_net_t;

struct net_device {
	int ifindex;
	possible_net_t nd_net;
} __attribute__((preserve_access_index));

struct neigh_table {
	int family;
	unsigned int key_len;
} __attribute__((preserve_access_index));

struct neighbour {
	struct neigh_table *tbl;
	struct net_device *dev;
	__u8 nud_state;
	unsigned char ha[32];
	__u32 primary_key[0];
} __attribute__((preserve_access_index));

struct sk_buff {
	unsigned char *data;
	__u16 protocol;
	struct net_device *dev;
} __attribute__((preserve_access_index));

struct xdp_rxq_info {
	struct net_device *dev;
} __attribute__((preserve_access_index));

struct xdp_buff {
	void *data;
	struct xdp_rxq_info *rxq;
} __attribute__((preserve_access_index));

/* An entry: interface, family, address (IPv4 in the first 4 bytes). */
struct nkey {
	__u32 ifindex;
	__u8 family;
	__u8 pad[3];
	__u8 addr[16];
};

/* A source-MAC candidate: an entry whose own packets the tracer watches
 * for (STALE, or managed by neighwatch), and what was seen of its address
 * arriving from another MAC than the entry's. The other MAC itself is
 * not kept: the sighting's announcement carries it (SRC_SIGHTING). */
struct cand {
	__u8 on;	/* a candidate (in the mirror's value; the map's are all on) */
	__u8 gone;	/* the kernel deleted the entry: its mirror value stays,
			 * for tr_candidates to delete, while it is a candidate */
	__u8 epoch;	/* the epoch's low byte when the sighting was last announced */
	__u8 own_epoch; /* the same, for its own MAC (SRC_OWN) */
	__u32 packets;	/* packets from the address at another MAC (wraps) */
};

/* 16 bytes: with the kernel's 48-byte element header and the 24-byte key,
 * an element of 88, 96 with the allocator's 8-byte link: the kernel's
 * 96-byte size class, where a 40-byte value took the 128-byte one
 * (BENCHMARKS.md, issue 41). The candidate part is compared with the
 * entry's own MAC, the mirror's. */
struct nval {
	__u8 state;
	__u8 stale_ok; /* STALE, and counted in mac_bloom and stale_on_if */
	__u8 mac[6];
	struct cand c; /* where tr_candidates writes candidates (6.0 on) */
};

/* A candidate in source_candidates (before 6.0): user space writes its
 * MAC, as the mirror's value holds no candidate there. */
struct scand {
	__u8 mac[6];
	__u8 pad[2];
	struct cand c;
};

/* A MAC on an interface, per family. The family matters: a host's IPv6
 * link-local entry may be STALE while its IPv4 entry, same MAC, is fine. */
struct mkey {
	__u32 ifindex;
	__u8 mac[6];
	__u8 family;
	__u8 pad;
};

/* What the transmit hook knows of a MAC bypass traffic was routed to (its
 * destination address had no entry): the STALE entry to blame, the
 * gateway, which user space names from its table when the hook asks
 * (SRC_ROUTED), or that none was STALE. */
enum via_state {
	VIA_ASKED = 0, /* announced; no answer yet (asked again each epoch) */
	VIA_STALE = 1, /* addr is a STALE entry with the MAC: blame it */
	VIA_NONE = 2,  /* no STALE entry had it at epoch (asked again later) */
};

struct via {
	__u8 addr[16];
	__u32 epoch;
	__u8 state;
	__u8 pad[3];
};

/* An answer of VIA_NONE stands this many epochs, unless an entry with the
 * MAC turns STALE first (count_stale drops it). */
#define VIA_NONE_EPOCHS 6

/* A silent transition for user space. */
struct tp_event {
	struct nkey key;
	__u8 from;
	__u8 to;
	__u8 source;
	__u8 pad;
	__u8 mac[6];
	__u8 pad2[2];
};

enum tp_source {
	SRC_UPDATE = 0,
	SRC_EVENT_SEND = 1,
	SRC_TIMER = 2,
	SRC_CREATE = 3,
	SRC_CLEANUP = 4,
	/* Not transitions: what user space must read, as it happens, so
	 * that its work per interval follows what changed. */
	SRC_HIT = 5,	     /* an entry got bypass packets (once per epoch per CPU) */
	SRC_SIGHTING = 6,    /* a candidate's address came from another MAC (once per epoch) */
	SRC_UNMIRRORED = 7,  /* an entry did not fit in the mirror */
	SRC_OWN = 8,	     /* a candidate seen at another MAC sent from its own (once per epoch) */
	SRC_ROUTED = 9,	     /* bypass traffic routed to a MAC: which STALE entry has it? (key: interface, family) */
};

/* Counters in tr_stats. */
enum tr_stat {
	ST_HITS_DROPPED = 0,	/* hit not recorded: the hits map was full */
	ST_MIRROR_DROPPED,	/* entry not mirrored: the mirror was full */
	ST_EVENTS_DROPPED,	/* ring buffer full */
	ST_XMIT_LOOKUPS,	/* IPv4 packets that passed the MAC filter to the mirror lookup */
	ST_XMIT_LOOKUPS6,	/* IPv6 packets that did */
	ST_SOURCE_LOOKUPS,	/* received packets that passed the candidate filter */
	ST_ROUTED_ASKS,		/* MACs of routed bypass traffic user space was asked to name */
	ST_MAX,
};

/* Keep the types in BTF for bpf2go -type (Go decodes with them). */
const struct tp_event *unused_tp_event __attribute__((unused));
const struct cand *unused_cand __attribute__((unused));
const struct scand *unused_scand __attribute__((unused));
const struct via *unused_via __attribute__((unused));
const enum via_state *unused_via_state __attribute__((unused));
const enum tp_source *unused_tp_source __attribute__((unused));
const enum tr_stat *unused_tr_stat __attribute__((unused));

#define WATCH_BITS_WORDS 1024 /* ifindex < 65536 by bitmap, the rest by hash */
#define STALE_BUCKETS 4096
#define MAC_BLOOM_SLOTS 16384
#define SOURCE_BLOOM_SLOTS 16384

/* The network namespace (inode number) whose neighbours are mirrored:
 * ifindexes are only unique inside one. Set at load; 0 means any. */
volatile const __u32 netns_ino = 0;
/* Set at load where the candidates live in the mirror's values (6.0 on):
 * source_candidates then has one slot, always empty, and is not looked at. */
volatile const __u32 cands_in_mirror = 0;

/* Written by user space. */
volatile __u32 watch_all = 0;
/* Bumped by user space every interval: hits and sightings are announced
 * once per epoch. Candidates keep its low byte, which is never 0 (user
 * space skips those epochs), so a new candidate's first sighting is
 * announced at once. */
volatile __u32 epoch = 1;
__u64 watched_bits[WATCH_BITS_WORDS];
/* Per interface bucket: STALE entries mirrored there. Zero means no packet
 * on that interface can hit, and the hook returns before any lookup. */
__u32 stale_on_if[STALE_BUCKETS];
/* A counting filter of STALE (interface, MAC, family) triples: a zero slot
 * proves the packet's destination is no STALE entry without a hash lookup. */
__u32 mac_bloom[MAC_BLOOM_SLOTS];
/* A filter of source-MAC candidates (interface, address): a zero slot
 * proves a received packet's source is no candidate. User space writes it
 * with the candidates. */
__u8 source_bloom[SOURCE_BLOOM_SLOTS];

/* Watched interfaces whose index is past the bitmap. Preallocated: the
 * raw tracepoint on neigh_create (every kernel before 6.18) reads it, and
 * before 6.1 the verifier WARNs (a kernel warning with a call trace, once
 * a boot) on a raw tracepoint program that uses a hash map allocated at
 * run time. 4,096 slots of a few bytes cost about 230 KiB. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, __u8);
} watched_big SEC(".maps");

/* Plain hashes, not LRU: an entry evicted behind the tracer's back would
 * leave its STALE accounting (mac_bloom, stale_on_if) counted forever. When one is full, inserts fail and are counted in tr_stats.
 * User space may set max_entries at load. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 262144);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct nkey);
	__type(value, struct nval);
} neigh_mirror SEC(".maps");

/* A few elements, one for each MAC routed bypass traffic went to: an LRU,
 * as an element evicted costs one more question, never a wrong count. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, struct mkey);
	__type(value, struct via);
} via_macs SEC(".maps");

/* Bypass packets per STALE entry, per CPU; the epoch each CPU last
 * announced it in. The mirror's hooks delete the key when the entry
 * leaves STALE. */
struct hitv {
	__u64 packets;
	__u32 epoch;
	__u32 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, 65536);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct nkey);
	__type(value, struct hitv);
} hits SEC(".maps");

/* Candidates where the kernel cannot take tr_candidates (before 6.0),
 * written entry by entry from user space, which must not rewrite the
 * mirror's values the hooks write. Elsewhere the loader sizes it to one. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct nkey);
	__type(value, struct scand);
} source_candidates SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, ST_MAX);
	__type(key, __u32);
	__type(value, __u64);
} tr_stats SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 20);
} tp_events SEC(".maps");

static __always_inline void stat_inc(__u32 s)
{
	__u64 *v = bpf_map_lookup_elem(&tr_stats, &s);
	if (v)
		*v += 1;
}

static __always_inline int is_watched(__u32 ifindex)
{
	if (watch_all)
		return 1;
	if (ifindex < WATCH_BITS_WORDS * 64) {
		__u32 word = ifindex / 64;
		// Hide the bound from clang so it keeps the mask, which
		// restates the bound for the verifier.
		asm volatile("" : "+r"(word));
		return (watched_bits[word & (WATCH_BITS_WORDS - 1)] >> (ifindex & 63)) & 1;
	}
	return bpf_map_lookup_elem(&watched_big, &ifindex) != NULL;
}

static __always_inline __u32 bloom_slot(__u32 ifindex, const __u8 *mac, __u8 family)
{
	__u64 x = ((__u64)mac[0] << 40) | ((__u64)mac[1] << 32) | ((__u64)mac[2] << 24) |
		  ((__u64)mac[3] << 16) | ((__u64)mac[4] << 8) | mac[5];
	x ^= ((__u64)ifindex << 48) ^ ((__u64)family << 56);
	x *= 0x9E3779B97F4A7C15ULL; /* Fibonacci hashing */
	return (__u32)(x >> 50) & (MAC_BLOOM_SLOTS - 1);
}

/* source_slot hashes (interface, family, address); IPv4 uses the first 4
 * bytes of addr. Go mirrors it in sourceSlot. */
static __always_inline __u32 source_slot(__u32 ifindex, __u8 family, const __u32 *addr)
{
	__u64 x = ((__u64)ifindex << 32) ^ family;
	x ^= addr[0];
	if (family == AF_INET6)
		x ^= ((__u64)addr[1] << 32) ^ addr[2] ^ ((__u64)addr[3] << 16);
	x *= 0x9E3779B97F4A7C15ULL;
	return (__u32)(x >> 50) & (SOURCE_BLOOM_SLOTS - 1);
}

static __always_inline int in_netns(struct net_device *dev)
{
	return netns_ino == 0 || BPF_CORE_READ(dev, nd_net.net, ns.inum) == netns_ino;
}

static __always_inline int mac_eq(const __u8 *a, const __u8 *b)
{
	return a[0] == b[0] && a[1] == b[1] && a[2] == b[2] && a[3] == b[3] && a[4] == b[4] && a[5] == b[5];
}

/* announce tells user space about a key (SRC_HIT, SRC_SIGHTING,
 * SRC_UNMIRRORED). */
static __always_inline void announce(const struct nkey *k, __u8 source, const __u8 *mac)
{
	struct tp_event *ev = bpf_ringbuf_reserve(&tp_events, sizeof(*ev), 0);
	if (!ev) {
		stat_inc(ST_EVENTS_DROPPED);
		return;
	}
	__builtin_memset(ev, 0, sizeof(*ev));
	ev->key = *k;
	ev->source = source;
	if (mac)
		__builtin_memcpy(ev->mac, mac, 6);
	bpf_ringbuf_submit(ev, 0);
}

/* sighted records a packet from candidate c's address (k: the interface
 * it arrived on and its source), whose MAC is own, sent from src: a
 * suspicion when src is not own, announced once per epoch with src. From
 * its own MAC it is news only once the address was seen at another (the
 * suspicion's answer: a host that sends from two MACs), also once per
 * epoch: an address never seen elsewhere costs a lookup and nothing more. */
static __always_inline void sighted(const struct nkey *k, struct cand *c, const __u8 *own, const __u8 *src)
{
	__u8 now = epoch;
	if (mac_eq(own, src)) {
		if (c->packets && c->own_epoch != now) {
			c->own_epoch = now;
			announce(k, SRC_OWN, src);
		}
		return;
	}
	__sync_fetch_and_add(&c->packets, 1);
	if (c->epoch != now) {
		c->epoch = now;
		announce(k, SRC_SIGHTING, src);
	}
}

/* sight finds the candidate of a received packet's source: in the mirror's
 * value, or in source_candidates on kernels without tr_candidates. */
static __always_inline void sight(const struct nkey *k, const __u8 *src)
{
	if (!source_bloom[source_slot(k->ifindex, k->family, (const __u32 *)k->addr)])
		return;
	stat_inc(ST_SOURCE_LOOKUPS);
	struct nval *nv = bpf_map_lookup_elem(&neigh_mirror, k);
	if (nv && nv->c.on) {
		sighted(k, &nv->c, nv->mac, src);
		return;
	}
	if (cands_in_mirror)
		return;
	struct scand *c = bpf_map_lookup_elem(&source_candidates, k);
	if (c)
		sighted(k, &c->c, c->mac, src);
}

static __always_inline void count_hit(struct nkey *k)
{
	struct hitv *v = bpf_map_lookup_elem(&hits, k);
	if (v) {
		v->packets += 1;
		if (v->epoch != epoch) {
			v->epoch = epoch;
			announce(k, SRC_HIT, 0);
		}
		return;
	}
	struct hitv one = {.packets = 1, .epoch = epoch};
	if (bpf_map_update_elem(&hits, k, &one, BPF_NOEXIST)) {
		stat_inc(ST_HITS_DROPPED);
		return;
	}
	announce(k, SRC_HIT, 0);
}
