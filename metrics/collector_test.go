package metrics

import (
	"errors"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/neighwatch/neighwatch/monitor"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// fakeSource serves a real table (pure logic) plus fixed counters.
type fakeSource struct {
	t        *monitor.Table
	counters monitor.Counters
	arp      map[int32]*monitor.ARPCounters
	params   []monitor.TableParams
	err      error
}

func (f *fakeSource) Stats(n int) monitor.Stats                   { return f.t.Stats(n) }
func (f *fakeSource) Counters() *monitor.Counters                 { return &f.counters }
func (f *fakeSource) ARPCounters() map[int32]*monitor.ARPCounters { return f.arp }
func (f *fakeSource) ARPMalformed() uint64                        { return 2 }
func (f *fakeSource) EventsDropped() uint64                       { return 3 }
func (f *fakeSource) TableParams() ([]monitor.TableParams, error) { return f.params, f.err }

func newFake(t *testing.T) *fakeSource {
	t.Helper()
	tb := monitor.NewTable(time.Nanosecond, nil) // every STALE entry is stale-long at once
	tb.SetLinkName(3, "eth0")
	mac := net.HardwareAddr{2, 0, 0, 0, 0, 1}
	moved := net.HardwareAddr{2, 0, 0, 0, 0, 2}
	tb.Apply(monitor.CauseNetlink,
		monitor.Update{Ifindex: 3, Family: 2, State: monitor.StateStale, Addr: netip.MustParseAddr("10.0.0.1"), LLAddr: mac},
		monitor.Update{Ifindex: 3, Family: 2, State: monitor.StateReachable, Addr: netip.MustParseAddr("10.0.0.2"), LLAddr: mac},
	)
	time.Sleep(time.Millisecond)
	tb.ObserveARP(3, netip.MustParseAddr("10.0.0.1"), moved, time.Now())
	ac := &monitor.ARPCounters{}
	ac.Packets[monitor.ARPGratuitous].Add(1)
	ac.Mismatches.Add(1)
	f := &fakeSource{t: tb, arp: map[int32]*monitor.ARPCounters{3: ac}, params: []monitor.TableParams{{
		Family: monitor.FamilyInet, Thresh1: 128, Thresh2: 512, Thresh3: 1024, Entries: 2, TableFulls: 5, HasConfig: true, HasStats: true, HasThresholds: true,
	}}}
	f.counters.ResyncENOBUFS.Add(4)
	f.counters.ErrENOBUFS.Add(4)
	f.counters.Messages.Add(10)
	return f
}

func TestCollector(t *testing.T) {
	f := newFake(t)
	c := NewCollector(f, 10, nil)
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(c); err != nil {
		t.Fatal(err)
	}
	want := `
# HELP neighwatch_neighbours Neighbour entries by interface, family and NUD state.
# TYPE neighwatch_neighbours gauge
neighwatch_neighbours{family="inet",interface="eth0",state="delay"} 0
neighwatch_neighbours{family="inet",interface="eth0",state="failed"} 0
neighwatch_neighbours{family="inet",interface="eth0",state="incomplete"} 0
neighwatch_neighbours{family="inet",interface="eth0",state="noarp"} 0
neighwatch_neighbours{family="inet",interface="eth0",state="none"} 0
neighwatch_neighbours{family="inet",interface="eth0",state="permanent"} 0
neighwatch_neighbours{family="inet",interface="eth0",state="probe"} 0
neighwatch_neighbours{family="inet",interface="eth0",state="reachable"} 1
neighwatch_neighbours{family="inet",interface="eth0",state="stale"} 1
# HELP neighwatch_neighbours_stuck Stale-long entries with evidence that traffic still uses them or that the host moved.
# TYPE neighwatch_neighbours_stuck gauge
neighwatch_neighbours_stuck{family="inet",interface="eth0"} 1
# HELP neighwatch_neighbours_stale_long Entries STALE for at least the stale threshold.
# TYPE neighwatch_neighbours_stale_long gauge
neighwatch_neighbours_stale_long{family="inet",interface="eth0"} 1
# HELP neighwatch_stuck_neighbour_info One series per stuck entry (capped), naming it for alerts.
# TYPE neighwatch_stuck_neighbour_info gauge
neighwatch_stuck_neighbour_info{family="inet",interface="eth0",ip="10.0.0.1",lladdr="02:00:00:00:00:01",seen_lladdr="02:00:00:00:00:02"} 1
# HELP neighwatch_arp_packets_total ARP packets seen by the listeners.
# TYPE neighwatch_arp_packets_total counter
neighwatch_arp_packets_total{interface="eth0",kind="gratuitous"} 1
neighwatch_arp_packets_total{interface="eth0",kind="reply"} 0
neighwatch_arp_packets_total{interface="eth0",kind="request"} 0
# HELP neighwatch_netlink_resyncs_total Full dumps that reconciled the table, by reason.
# TYPE neighwatch_netlink_resyncs_total counter
neighwatch_netlink_resyncs_total{reason="dump_interrupted"} 0
neighwatch_netlink_resyncs_total{reason="enobufs"} 4
neighwatch_netlink_resyncs_total{reason="error"} 0
neighwatch_netlink_resyncs_total{reason="link"} 0
neighwatch_netlink_resyncs_total{reason="periodic"} 0
# HELP neighwatch_neighbour_table_gc_threshold Kernel neighbour table GC thresholds (host-wide).
# TYPE neighwatch_neighbour_table_gc_threshold gauge
neighwatch_neighbour_table_gc_threshold{family="inet",threshold="1"} 128
neighwatch_neighbour_table_gc_threshold{family="inet",threshold="2"} 512
neighwatch_neighbour_table_gc_threshold{family="inet",threshold="3"} 1024
# HELP neighwatch_neighbour_table_fulls_total Times the kernel neighbour table was full ("neighbor table overflow").
# TYPE neighwatch_neighbour_table_fulls_total counter
neighwatch_neighbour_table_fulls_total{family="inet"} 5
# HELP neighwatch_events_dropped_total Events lost by slow subscribers; the table itself loses none.
# TYPE neighwatch_events_dropped_total counter
neighwatch_events_dropped_total 3
`
	names := []string{"neighwatch_neighbours", "neighwatch_neighbours_stuck", "neighwatch_neighbours_stale_long",
		"neighwatch_stuck_neighbour_info", "neighwatch_arp_packets_total", "neighwatch_netlink_resyncs_total",
		"neighwatch_neighbour_table_gc_threshold", "neighwatch_neighbour_table_fulls_total", "neighwatch_events_dropped_total"}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), names...); err != nil {
		t.Fatal(err)
	}
	// Every metric the collector emits must pass the linter.
	problems, err := testutil.GatherAndLint(reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
}

func TestCollectorCapAndParamsError(t *testing.T) {
	f := newFake(t)
	f.err = errors.New("netlink refused")
	f.params = nil
	c := NewCollector(f, 0, nil)
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	for range 2 {
		if _, err := reg.Gather(); err != nil {
			t.Fatal(err)
		}
	}
	want := `
# HELP neighwatch_stuck_neighbour_info_dropped_total Stuck-entry info series left out because of the cap, summed over scrapes.
# TYPE neighwatch_stuck_neighbour_info_dropped_total counter
neighwatch_stuck_neighbour_info_dropped_total 3
`
	// Two gathers above plus the one GatherAndCompare makes.
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "neighwatch_stuck_neighbour_info_dropped_total", "neighwatch_stuck_neighbour_info", "neighwatch_neighbour_table_gc_threshold"); err != nil {
		t.Fatal(err)
	}
}
