package feed

import (
	"net"
	"net/netip"
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
		got, l = l.counted(s.total, s.since)
		if got != s.want {
			t.Errorf("read %d (total %d, period %d): %d new packets, want %d", i, s.total, s.since, got, s.want)
		}
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
		tb.Kernel().Apply(table.CauseNetlink, table.Update{Ifindex: 3, Family: table.FamilyInet, Addr: hk.Addr, State: table.StateStale, LLAddr: own})
		ownSeen := map[bpf.HitKey]net.HardwareAddr{}
		if both {
			ownSeen[hk] = own
		}
		heard := observeSources(SinkOf(tb), map[bpf.HitKey]bpf.Sighting{hk: {MAC: other, Packets: 4}}, ownSeen, time.Now())
		e, _ := tb.Reader().Lookup(tk)
		if both && (e.Suspect() || !e.MultiMAC() || heard != 1) {
			t.Errorf("both MACs in one interval: suspect %v, multi-MAC %v, %d heard; want heard, the other MAC the host's", e.Suspect(), e.MultiMAC(), heard)
		}
		if !both && !e.Suspect() {
			t.Error("the other MAC alone: no suspicion")
		}
	}
}
