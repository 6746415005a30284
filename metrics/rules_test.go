package metrics

import (
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/neighwatch/neighwatch/table"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// The tests in this file pin the table's series at their edges: each
// kills a mutant that the other tests let live (make mutation,
// docs/mutants.md).

// TestManagedSeriesOnlyNonZero: one series per owner and state that has
// managed entries, none for the others.
func TestManagedSeriesOnlyNonZero(t *testing.T) {
	tb := table.New(time.Minute, nil)
	tb.SetLinkName(3, "eth0")
	tb.Apply(table.CauseNetlink, table.Update{Ifindex: 3, Family: table.FamilyInet, Addr: netip.MustParseAddr("10.0.0.1"), State: table.StateReachable,
		LLAddr: net.HardwareAddr{2, 0, 0, 0, 0, 1}, FlagsExt: table.FlagExtManaged, Protocol: table.ProtocolNeighwatch})
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(NewTableCollector(tb, 10, nil, slog.New(slog.DiscardHandler)))
	want := `
# HELP neighwatch_managed_neighbours Managed entries (the kernel re-validates them itself) by owner: neighwatch (its manage strategy) or other; only non-zero series.
# TYPE neighwatch_managed_neighbours gauge
neighwatch_managed_neighbours{family="inet",interface="eth0",owner="neighwatch",state="reachable"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "neighwatch_managed_neighbours"); err != nil {
		t.Error(err)
	}
}

// TestStuckInfoDropped: stuck entries past the cap are counted, not
// named.
func TestStuckInfoDropped(t *testing.T) {
	tb := table.New(time.Nanosecond, nil)
	tb.SetLinkName(3, "eth0")
	mac := net.HardwareAddr{2, 0, 0, 0, 0, 1}
	for i := range 3 {
		ip := netip.AddrFrom4([4]byte{10, 0, 0, byte(i + 1)})
		tb.Apply(table.CauseNetlink, table.Update{Ifindex: 3, Family: table.FamilyInet, Addr: ip, State: table.StateStale, LLAddr: mac})
		tb.ProbeUnanswered(table.Key{Ifindex: 3, Addr: ip}, string(mac), time.Now())
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(NewTableCollector(tb, 1, nil, slog.New(slog.DiscardHandler)))
	if n, err := testutil.GatherAndCount(reg, "neighwatch_stuck_neighbour_info"); err != nil || n != 1 {
		t.Errorf("%d info series (%v), want 1", n, err)
	}
	want := `
# HELP neighwatch_stuck_neighbour_info_dropped Stuck entries over --metrics.stuck-info-limit, named in no neighwatch_stuck_neighbour_info series now (the same at every scrape).
# TYPE neighwatch_stuck_neighbour_info_dropped gauge
neighwatch_stuck_neighbour_info_dropped 2
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "neighwatch_stuck_neighbour_info_dropped"); err != nil {
		t.Error(err)
	}
}

// TestByNameKeepsTheOldestStale: two links of one name (a deleted one
// and its successor) report the older STALE age of the two, in either
// order.
func TestByNameKeepsTheOldestStale(t *testing.T) {
	stale := func(idx int32, age time.Duration) table.InterfaceStats {
		is := table.InterfaceStats{Ifindex: idx, Name: "va"}
		is.Families[0].HasStale, is.Families[0].OldestStale = true, age
		return is
	}
	for _, in := range [][]table.InterfaceStats{{stale(5, time.Hour), stale(6, time.Minute)}, {stale(6, time.Minute), stale(5, time.Hour)}} {
		out := byName(in)
		if len(out) != 1 || out[0].Families[0].OldestStale != time.Hour {
			t.Errorf("merged %+v", out)
		}
	}
}
