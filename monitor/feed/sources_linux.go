package feed

import (
	"maps"
	"net"
	"time"

	"github.com/neighwatch/neighwatch/bpf"
	"github.com/neighwatch/neighwatch/table"
)

// The decisions of a tracer interval, apart from the reads that feed
// them, so their rules are table-tested without a kernel.

// lastHit is an entry's bypass counter total at the last read, in the
// STALE period that began at since, and the hit sweep it was read in.
type lastHit struct {
	packets uint64
	since   int64
	sweep   uint32
}

// counted returns how many of total, the bypass counter of an entry
// whose STALE period began at since, read after sweep sweeps, are new
// since l, and what to keep for the next read. The programs start an
// entry's counter from zero in each STALE period: a total of a new
// period is all new, whatever the last period's reached.
func (l lastHit) counted(total uint64, since int64, sweep uint32) (uint64, lastHit) {
	if l.since != since || total < l.packets {
		l = lastHit{since: since}
	}
	return total - l.packets, lastHit{packets: total, since: since, sweep: sweep}
}

// idleHits returns which of the kernel's bypass counters (keys) the
// sweep numbered sweep drops: those last read before the sweep before
// it (no packet for a whole sweep's period: a read follows every
// announced packet), and those no read claims (an announcement lost to
// a full ring buffer) that no read claimed at the sweep before either.
// A counter announced since the last read (pending) is never dropped.
// orphans is left holding this sweep's unclaimed counters.
func idleHits(keys []bpf.HitKey, last map[bpf.HitKey]lastHit, pending, orphans map[bpf.HitKey]struct{}, sweep uint32) []bpf.HitKey {
	var drop []bpf.HitKey
	was := maps.Clone(orphans)
	clear(orphans)
	for _, hk := range keys {
		if _, ok := pending[hk]; ok {
			continue
		}
		l, read := last[hk]
		switch {
		case read && l.sweep+1 < sweep:
			drop = append(drop, hk)
		case read:
		default:
			if _, ok := was[hk]; ok {
				drop = append(drop, hk)
			} else {
				orphans[hk] = struct{}{}
			}
		}
	}
	return drop
}

// observeSources hands the table what one interval saw of the
// candidates' own packets: first the sightings at other MACs, then the
// entries' own MACs heard. A host seen at both within one interval sends
// from both (a bond's slaves, ARP flux), whichever came first: heard
// last, its own MAC explains the other, and it is no suspect. It returns
// how many own MACs the table took.
func observeSources(t Evidence, sights map[bpf.HitKey]bpf.Sighting, own map[bpf.HitKey]net.HardwareAddr, now time.Time) (heard uint64) {
	for hk, s := range sights {
		t.ObserveSourceMAC(keyOf(hk), s.MAC, s.Packets, now)
	}
	for hk, mac := range own {
		if t.Heard(keyOf(hk), mac, now) {
			heard++
		}
	}
	return heard
}

// keyOf is the table's key of the entry a tracer key names.
func keyOf(hk bpf.HitKey) table.Key { return table.Key{Ifindex: int32(hk.Ifindex), Addr: hk.Addr} }
