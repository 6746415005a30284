package feed

import (
	"net"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/neighwatch/neighwatch/bpf"
	"github.com/neighwatch/neighwatch/table"
)

// TestHitsCountAfreshEachStalePeriod: within a STALE period the new
// packets are the counter's growth; in a new period (the entry left STALE
// and came back) the counter started from zero, so all of it is new, more
// or fewer than the last period's.
func TestHitsCountAfreshEachStalePeriod(t *testing.T) {
	var l lastHit
	steps := []struct {
		total uint64
		since int64
		want  uint64
	}{
		{10, 1, 10}, // the first read of a period
		{14, 1, 4},  // growth within it
		{14, 1, 0},  // no traffic since
		{20, 2, 20}, // a new period that already passed the last one's total
		{3, 3, 3},   // a new period below it
		{5, 3, 2},
	}
	for i, s := range steps {
		var got uint64
		got, l = l.counted(s.total, s.since, 0)
		if got != s.want {
			t.Errorf("read %d (total %d, period %d): %d new packets, want %d", i, s.total, s.since, got, s.want)
		}
	}
}

// TestIdleHitsDropped: a sweep drops the counters last read before the
// sweep before it and keeps those read since; a counter no read claims
// is dropped at the second sweep that finds it so, and one announced
// since the last read never.
func TestIdleHitsDropped(t *testing.T) {
	key := func(i byte) bpf.HitKey {
		return bpf.HitKey{Ifindex: 2, Addr: netip.AddrFrom4([4]byte{192, 0, 2, i})}
	}
	fresh, idle, orphan, pending := key(1), key(2), key(3), key(4)
	keys := []bpf.HitKey{fresh, idle, orphan, pending}
	// Sweep 3 is under way: fresh was read after sweep 2 (in the period
	// that ends now), idle after sweep 1 and not since (a whole period
	// without a packet).
	last := map[bpf.HitKey]lastHit{fresh: {sweep: 2}, idle: {sweep: 1}}
	pendingSet := map[bpf.HitKey]struct{}{pending: {}}
	orphans := map[bpf.HitKey]struct{}{}
	got := idleHits(keys, last, pendingSet, orphans, 3)
	if !slices.Equal(got, []bpf.HitKey{idle}) {
		t.Errorf("sweep 3 dropped %v, want only %v", got, idle)
	}
	if _, ok := orphans[orphan]; !ok || len(orphans) != 1 {
		t.Errorf("orphans after sweep 3 %v, want only %v", orphans, orphan)
	}
	// Sweep 4, nothing read since: fresh is idle now, the orphan still
	// unclaimed, pending still announced and unread.
	got = idleHits([]bpf.HitKey{fresh, orphan, pending}, last, pendingSet, orphans, 4)
	if want := []bpf.HitKey{fresh, orphan}; !slices.Equal(got, want) {
		t.Errorf("sweep 4 dropped %v, want %v", got, want)
	}
	// An orphan read meanwhile is claimed, not dropped.
	orphans = map[bpf.HitKey]struct{}{orphan: {}}
	last[orphan] = lastHit{sweep: 4}
	if got := idleHits([]bpf.HitKey{orphan}, last, nil, orphans, 5); len(got) != 0 {
		t.Errorf("a claimed orphan dropped: %v", got)
	}
}

// TestOwnMACInTheSameInterval: a host whose entry's MAC and another MAC
// both sent within one interval is heard, not a suspect; the other MAC
// becomes one of the host's. The control: the other MAC alone makes it
// a suspect.
func TestOwnMACInTheSameInterval(t *testing.T) {
	own, other := net.HardwareAddr{2, 0, 0, 0, 0, 1}, net.HardwareAddr{2, 0, 0, 0, 0, 2}
	for _, both := range []bool{true, false} {
		tb := table.New(time.Minute, nil)
		hk := bpf.HitKey{Ifindex: 3, Addr: netip.MustParseAddr("10.0.0.7")}
		tk := table.Key{Ifindex: 3, Addr: hk.Addr}
		tb.Apply(table.CauseNetlink, table.Update{Ifindex: 3, Family: table.FamilyInet, Addr: hk.Addr, State: table.StateStale, LLAddr: own})
		ownSeen := map[bpf.HitKey]net.HardwareAddr{}
		if both {
			ownSeen[hk] = own
		}
		heard := observeSources(tb, map[bpf.HitKey]bpf.Sighting{hk: {MAC: other, Packets: 4}}, ownSeen, time.Now())
		e, _ := tb.Lookup(tk)
		if both && (e.Suspect() || !e.MultiMAC() || heard != 1) {
			t.Errorf("both MACs in one interval: suspect %v, multi-MAC %v, %d heard; want heard, the other MAC the host's", e.Suspect(), e.MultiMAC(), heard)
		}
		if !both && !e.Suspect() {
			t.Error("the other MAC alone: no suspicion")
		}
	}
}
