package remediate

import (
	"net/netip"
	"testing"
	"time"

	"github.com/neighwatch/neighwatch/table"
)

// BenchmarkSweep measures one sweep over 100,000 stale-long entries in
// scope (all-stale), all of them already queued or backed off: the steady
// cost remediation adds to a large table every second.
func BenchmarkSweep(b *testing.B) {
	tb := table.New(time.Nanosecond, nil)
	tb.SetLinkName(3, "eth0")
	for i := 0; i < 100_000; i++ {
		ip := netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)})
		tb.Apply(table.CauseNetlink, table.Update{Ifindex: 3, Family: table.FamilyInet, Addr: ip, State: table.StateStale, LLAddr: macOld})
	}
	cfg := fastConfig(ModeOn, StrategyProbe)
	cfg.Scope = ScopeAllStale
	cfg.QueueSize = 200_000 // never full: every sweep walks the whole table
	e := New(cfg, tb, &fakeActor{t: tb, answerAt: -1}, nil)
	e.sweep() // queues everything
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		e.sweep()
	}
}
