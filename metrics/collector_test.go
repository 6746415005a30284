package metrics

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/neighwatch/neighwatch/bpf"
	"github.com/neighwatch/neighwatch/metrics/connlimit"
	"github.com/neighwatch/neighwatch/monitor/evidence"
	"github.com/neighwatch/neighwatch/monitor/feed"
	"github.com/neighwatch/neighwatch/monitor/mirror"
	"github.com/neighwatch/neighwatch/monitor/neightbl"
	"github.com/neighwatch/neighwatch/remediate"
	"github.com/neighwatch/neighwatch/table"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// Fakes stand in for the parts that need a kernel; the table and the
// remediation engine are the real pure code.

type fakeEvidence struct{}

func (fakeEvidence) Counters() map[int32]evidence.Counters {
	var c evidence.Counters
	c.Packets[evidence.ARPGratuitous] = 1
	c.Mismatches = 1
	return map[int32]evidence.Counters{3: c}
}
func (fakeEvidence) Malformed() uint64 { return 2 }
func (fakeEvidence) HostStats() evidence.HostStats {
	return evidence.HostStats{Hosts: 5, EvictedFull: 2, ListenersRunning: 2, Wanted: 2}
}

type fakeNetlink struct{}

func (fakeNetlink) Counters() mirror.Counters {
	return mirror.Counters{mirror.ResyncENOBUFS: 4, mirror.ErrENOBUFS: 4, mirror.Messages: 10}
}

type fakeKernel struct {
	params []neightbl.Params
	err    error
}

func (f *fakeKernel) Read() ([]neightbl.Params, error) { return f.params, f.err }

type fakeTracer struct{ err error }

func (fakeTracer) Mode() bpf.TracerMode { return bpf.TracerFentry }
func (f fakeTracer) Stats() (bpf.TracerStats, error) {
	return bpf.TracerStats{HitEntries: 3, HitCapacity: 65536, MirrorEntries: 10, MirrorCapacity: 262144, HitsDropped: 1}, f.err
}
func (fakeTracer) Redirects() (bpf.RedirectCounts, error) {
	return bpf.RedirectCounts{
		bpf.HelperRedirect:      {Stale: 2, Other: 5},
		bpf.HelperRedirectNeigh: {Other: 7},
		bpf.HelperRedirectPeer:  {},
	}, nil
}

type fakeFeed struct{}

func (fakeFeed) Counters() feed.Counters   { return feed.Counters{feed.TransitionsApplied: 4} }
func (fakeFeed) HookState() feed.HookState { return feed.HookState{} }
func (fakeFeed) Unmirrored() map[int32]int { return map[int32]int{3: 2} }
func (fakeTracer) Programs() []bpf.ProgramStatus {
	return []bpf.ProgramStatus{
		{Program: "tr_create", Hook: "tp_btf/neigh_create", Feature: bpf.FeatureCreated, Refusal: bpf.RefusedVerifier},
		{Program: "tr_create_raw", Hook: "raw_tp/neigh_create", Feature: bpf.FeatureCreated, Loaded: true},
	}
}

func (fakeTracer) StaleCounted() (uint64, error) { return 5, nil }
func (fakeTracer) MapMemory() (map[string]uint64, error) {
	return map[string]uint64{"hits": 4096, "neigh_mirror": 8192}, nil
}

type fakeDetection struct{}

func (fakeDetection) Detection() []Detection {
	return []Detection{{Interface: "eth0", Feature: "bypass", Working: true}, {Interface: "eth0", Feature: "source-mac", Why: "attach failed"}}
}
func (fakeTracer) ProgramRuns() (map[string]uint64, bool) {
	return map[string]uint64{"tr_xmit": 0, "tr_source": 12}, true
}

type fakeConns struct{}

func (fakeConns) Stats() connlimit.Stats { return connlimit.Stats{Open: 3, RefusedAddr: 7} }

type fakeDatapath struct{}

func (fakeDatapath) Counts() (map[bpf.Decision]uint64, error) {
	return map[bpf.Decision]uint64{bpf.Redirect: 9}, nil
}
func (fakeDatapath) Modes() map[string]bpf.Mode { return map[string]bpf.Mode{"eth1": bpf.ModeNeigh} }

// newTable holds one stuck entry (ARP saw it at another MAC, a probe to
// its own went unanswered) and one reachable entry on eth0.
func newTable(t *testing.T) *table.Table {
	t.Helper()
	tb := table.New(time.Nanosecond, nil) // every STALE entry is stale-long at once
	tb.SetLinkName(3, "eth0")
	mac := net.HardwareAddr{2, 0, 0, 0, 0, 1}
	tb.Apply(table.CauseNetlink,
		table.Update{Ifindex: 3, Family: table.FamilyInet, State: table.StateStale, Addr: netip.MustParseAddr("10.0.0.1"), LLAddr: mac},
		table.Update{Ifindex: 3, Family: table.FamilyInet, State: table.StateReachable, Addr: netip.MustParseAddr("10.0.0.2"), LLAddr: mac},
	)
	time.Sleep(time.Millisecond)
	tb.ObserveMAC(3, netip.MustParseAddr("10.0.0.1"), net.HardwareAddr{2, 0, 0, 0, 0, 2}, time.Now())
	tb.ProbeUnanswered(table.Key{Ifindex: 3, Addr: netip.MustParseAddr("10.0.0.1")}, string(mac), time.Now())
	return tb
}

func kernelParams() []neightbl.Params {
	return []neightbl.Params{{Family: table.FamilyInet, Thresh1: 128, Thresh2: 512, Thresh3: 1024, Entries: 2, TableFulls: 5,
		HasConfig: true, HasStats: true, HasThresholds: true}}
}

// allCollectors is every neighwatch collector, over fakes.
func allCollectors(t *testing.T, tb *table.Table, kernel *fakeKernel, log *slog.Logger) []prometheus.Collector {
	t.Helper()
	eng := remediate.New(remediate.Config{Mode: remediate.ModeDryRun}, tb, nil, nil)
	return []prometheus.Collector{
		NewTableCollector(tb, 10, fakeSegments, log),
		NewEvidenceCollector(fakeEvidence{}, tb.LinkName, log),
		NewNetlinkCollector(fakeNetlink{}, log),
		NewKernelTableCollector(kernel, log),
		NewTracerCollector(func() (TracerSource, FeedSource) { return fakeTracer{}, fakeFeed{} }, tb.LinkName, log),
		NewDatapathCollector(fakeDatapath{}, log),
		NewRemediationCollector(eng, log),
		NewHTTPCollector(map[string]ConnSource{"metrics": fakeConns{}}, log),
		NewConfigCollector(fakeConfig{}, log),
		NewDetectionCollector(fakeDetection{}, log),
	}
}

// fakeSegments puts every neighbour of interface 3 (eth0) on
// 10.0.0.0/24, as monitor/addrs would for an eth0 with 10.0.0.5/24.
func fakeSegments() (func(int32, netip.Addr) string, error) {
	return func(ifindex int32, _ netip.Addr) string {
		if ifindex == 3 {
			return "10.0.0.0/24"
		}
		return ""
	}, nil
}

type fakeConfig struct{}

func (fakeConfig) LastReload() (bool, time.Time) { return true, time.Unix(1700000000, 0) }

func TestCollectors(t *testing.T) {
	tb := newTable(t)
	reg := prometheus.NewPedanticRegistry()
	for _, c := range allCollectors(t, tb, &fakeKernel{params: kernelParams()}, nil) {
		if err := reg.Register(c); err != nil {
			t.Fatal(err)
		}
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
# HELP neighwatch_neighbours_stuck Stale-long entries whose host is not at the entry's MAC: seen at another MAC while the entry's MAC stayed silent, confirmed by an unanswered unicast probe or by silence for the window.
# TYPE neighwatch_neighbours_stuck gauge
neighwatch_neighbours_stuck{family="inet",interface="eth0"} 1
# HELP neighwatch_neighbours_stale_long Entries STALE for at least the stale threshold, whatever their class.
# TYPE neighwatch_neighbours_stale_long gauge
neighwatch_neighbours_stale_long{family="inet",interface="eth0"} 1
# HELP neighwatch_stuck_neighbour_info One series per stuck entry (capped), naming it for alerts; segment is the subnet of the interface that holds the neighbour's address (else its first), which tells apart two hosts with one address and MAC on two segments.
# TYPE neighwatch_stuck_neighbour_info gauge
neighwatch_stuck_neighbour_info{family="inet",interface="eth0",ip="10.0.0.1",lladdr="02:00:00:00:00:01",seen_lladdr="02:00:00:00:00:02",segment="10.0.0.0/24"} 1
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
neighwatch_netlink_resyncs_total{reason="hooks"} 0
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
# HELP neighwatch_tracer_mode The running tracer mode (1 for the active one): off, xmit or fentry.
# TYPE neighwatch_tracer_mode gauge
neighwatch_tracer_mode{mode="fentry"} 1
neighwatch_tracer_mode{mode="off"} 0
neighwatch_tracer_mode{mode="xmit"} 0
# HELP neighwatch_tracer_redirects_total fentry mode: redirect helper calls by helper and the state of the neighbour the FIB lookup before them resolved.
# TYPE neighwatch_tracer_redirects_total counter
neighwatch_tracer_redirects_total{helper="bpf_redirect",nexthop="other"} 5
neighwatch_tracer_redirects_total{helper="bpf_redirect",nexthop="stale"} 2
neighwatch_tracer_redirects_total{helper="bpf_redirect_neigh",nexthop="other"} 7
neighwatch_tracer_redirects_total{helper="bpf_redirect_neigh",nexthop="stale"} 0
neighwatch_tracer_redirects_total{helper="bpf_redirect_peer",nexthop="other"} 0
neighwatch_tracer_redirects_total{helper="bpf_redirect_peer",nexthop="stale"} 0
# HELP neighwatch_datapath_mode The datapath mode attached to an interface (1 for the active one).
# TYPE neighwatch_datapath_mode gauge
neighwatch_datapath_mode{interface="eth1",mode="legacy"} 0
neighwatch_datapath_mode{interface="eth1",mode="neigh"} 1
# HELP neighwatch_remediation_mode The remediation mode in force (1 for the active one).
# TYPE neighwatch_remediation_mode gauge
neighwatch_remediation_mode{mode="dry-run"} 1
neighwatch_remediation_mode{mode="off"} 0
neighwatch_remediation_mode{mode="on"} 0
# HELP neighwatch_scrape_collector_success 1 if the collector fetched everything it reads at scrape time, else 0.
# TYPE neighwatch_scrape_collector_success gauge
neighwatch_scrape_collector_success{collector="config"} 1
neighwatch_scrape_collector_success{collector="datapath"} 1
neighwatch_scrape_collector_success{collector="detection"} 1
neighwatch_scrape_collector_success{collector="evidence"} 1
neighwatch_scrape_collector_success{collector="http"} 1
neighwatch_scrape_collector_success{collector="kernel_table"} 1
neighwatch_scrape_collector_success{collector="netlink"} 1
neighwatch_scrape_collector_success{collector="remediation"} 1
neighwatch_scrape_collector_success{collector="table"} 1
neighwatch_scrape_collector_success{collector="tracer"} 1
# HELP neighwatch_detection_working 1 where a detection feature the configuration asks for works on an interface, 0 where it is blind (the kernel refused its program, it could not attach, or its map is full): NeighwatchDetectionBlind fires on 0. Features: bypass, xdp-bypass, source-mac, created-entries, managed.
# TYPE neighwatch_detection_working gauge
neighwatch_detection_working{feature="bypass",interface="eth0"} 1
neighwatch_detection_working{feature="source-mac",interface="eth0"} 0
# HELP neighwatch_tracer_program_loaded 1 for each tracer program the kernel took, 0 for one it refused (refusal: verifier, permission, no-target, unsupported, attach, disabled); a refused program costs its feature only where no other program serves it (neighwatch_detection_working).
# TYPE neighwatch_tracer_program_loaded gauge
neighwatch_tracer_program_loaded{hook="raw_tp/neigh_create",program="tr_create_raw",refusal=""} 1
neighwatch_tracer_program_loaded{hook="tp_btf/neigh_create",program="tr_create",refusal="verifier"} 0
# HELP neighwatch_tracer_map_bytes Kernel memory of each of the tracer's maps, as the kernel reports it (memlock); kernels since 5.11 charge it to the agent's memory cgroup, beside the process's RSS.
# TYPE neighwatch_tracer_map_bytes gauge
neighwatch_tracer_map_bytes{map="hits"} 4096
neighwatch_tracer_map_bytes{map="neigh_mirror"} 8192
`
	names := []string{"neighwatch_detection_working", "neighwatch_tracer_map_bytes", "neighwatch_tracer_program_loaded", "neighwatch_neighbours", "neighwatch_neighbours_stuck", "neighwatch_neighbours_stale_long",
		"neighwatch_stuck_neighbour_info", "neighwatch_arp_packets_total", "neighwatch_netlink_resyncs_total",
		"neighwatch_neighbour_table_gc_threshold", "neighwatch_neighbour_table_fulls_total", "neighwatch_tracer_mode",
		"neighwatch_tracer_redirects_total", "neighwatch_datapath_mode", "neighwatch_remediation_mode",
		"neighwatch_scrape_collector_success"}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), names...); err != nil {
		t.Fatal(err)
	}
	// Every metric the collectors emit must pass the linter.
	problems, err := testutil.GatherAndLint(reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
}

// TestScrapeFailure: a failed scrape-time fetch shows as success 0 and is
// logged once while it lasts, and once more when it recovers; the other
// collectors are unaffected.
func TestScrapeFailure(t *testing.T) {
	tb := newTable(t)
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	kernel := &fakeKernel{err: errors.New("netlink refused")}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(NewKernelTableCollector(kernel, log), NewTableCollector(tb, 0, nil, log))
	for range 3 {
		if _, err := reg.Gather(); err != nil {
			t.Fatal(err)
		}
	}
	want := `
# HELP neighwatch_scrape_collector_success 1 if the collector fetched everything it reads at scrape time, else 0.
# TYPE neighwatch_scrape_collector_success gauge
neighwatch_scrape_collector_success{collector="kernel_table"} 0
neighwatch_scrape_collector_success{collector="table"} 1
# HELP neighwatch_stuck_neighbour_info_dropped Stuck entries over --metrics.stuck-info-limit, named in no neighwatch_stuck_neighbour_info series now (the same at every scrape).
# TYPE neighwatch_stuck_neighbour_info_dropped gauge
neighwatch_stuck_neighbour_info_dropped 1
`
	// Three gathers above plus the one GatherAndCompare makes: the cap of
	// 0 leaves out the one stuck entry, and the gauge says 1 however
	// often it is scraped (a counter summed over scrapes said 4).
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "neighwatch_scrape_collector_success",
		"neighwatch_stuck_neighbour_info_dropped", "neighwatch_stuck_neighbour_info", "neighwatch_neighbour_table_gc_threshold"); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(logs.String(), "metrics collector failed"); n != 1 {
		t.Errorf("failure logged %d times over 4 scrapes, want once:\n%s", n, logs.String())
	}
	if !strings.Contains(logs.String(), "netlink refused") {
		t.Errorf("the log does not say why:\n%s", logs.String())
	}
	kernel.err, kernel.params = nil, kernelParams()
	if _, err := reg.Gather(); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), "metrics collector recovered") {
		t.Errorf("recovery not logged:\n%s", logs.String())
	}
}

// TestDescribedOnce: every collector describes each of its metrics exactly
// once, and describes everything it collects (a pedantic registry checks
// the latter at gather time).
func TestDescribedOnce(t *testing.T) {
	tb := newTable(t)
	for _, c := range allCollectors(t, tb, &fakeKernel{params: kernelParams()}, nil) {
		ch := make(chan *prometheus.Desc, 100)
		c.Describe(ch)
		close(ch)
		seen := map[string]bool{}
		for d := range ch {
			if seen[d.String()] {
				t.Errorf("described twice: %s", d)
			}
			seen[d.String()] = true
		}
		reg := prometheus.NewPedanticRegistry()
		reg.MustRegister(c)
		if _, err := reg.Gather(); err != nil {
			t.Errorf("gather: %v", err)
		}
	}
}

type ghostEvidence struct{}

func (ghostEvidence) Counters() map[int32]evidence.Counters {
	var a, b evidence.Counters
	a.Packets[evidence.ARPRequest], b.Packets[evidence.ARPRequest] = 2, 3
	return map[int32]evidence.Counters{5: a, 6: b}
}
func (ghostEvidence) Malformed() uint64             { return 0 }
func (ghostEvidence) HostStats() evidence.HostStats { return evidence.HostStats{} }

// TestGhostLinksShareSeries: a link deleted and re-created with the same
// name is two interfaces of one name until the deletion is processed; the
// scrape sums them instead of failing on duplicate series.
func TestGhostLinksShareSeries(t *testing.T) {
	tb := table.New(time.Nanosecond, nil)
	tb.SetLinkName(5, "va")
	tb.SetLinkName(6, "va")
	ip := netip.MustParseAddr("10.9.0.3")
	mac := net.HardwareAddr{2, 0, 0, 0, 0, 1}
	for _, idx := range []int32{5, 6} {
		tb.Apply(table.CauseNetlink, table.Update{Ifindex: idx, Family: table.FamilyInet, Addr: ip, State: table.StateStale, LLAddr: mac})
		tb.ObserveMAC(idx, ip, net.HardwareAddr{2, 0, 0, 0, 0, 2}, time.Now())
		tb.ProbeUnanswered(table.Key{Ifindex: idx, Addr: ip}, string(mac), time.Now())
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(NewTableCollector(tb, 10, nil, slog.New(slog.DiscardHandler)), NewEvidenceCollector(ghostEvidence{}, tb.LinkName, slog.New(slog.DiscardHandler)))
	want := `
# HELP neighwatch_arp_packets_total ARP packets seen by the listeners.
# TYPE neighwatch_arp_packets_total counter
neighwatch_arp_packets_total{interface="va",kind="gratuitous"} 0
neighwatch_arp_packets_total{interface="va",kind="reply"} 0
neighwatch_arp_packets_total{interface="va",kind="request"} 5
# HELP neighwatch_neighbours_stuck Stale-long entries whose host is not at the entry's MAC: seen at another MAC while the entry's MAC stayed silent, confirmed by an unanswered unicast probe or by silence for the window.
# TYPE neighwatch_neighbours_stuck gauge
neighwatch_neighbours_stuck{family="inet",interface="va"} 2
# HELP neighwatch_stuck_neighbour_info One series per stuck entry (capped), naming it for alerts; segment is the subnet of the interface that holds the neighbour's address (else its first), which tells apart two hosts with one address and MAC on two segments.
# TYPE neighwatch_stuck_neighbour_info gauge
neighwatch_stuck_neighbour_info{family="inet",interface="va",ip="10.9.0.3",lladdr="02:00:00:00:00:01",seen_lladdr="02:00:00:00:00:02",segment=""} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "neighwatch_arp_packets_total", "neighwatch_neighbours_stuck", "neighwatch_stuck_neighbour_info"); err != nil {
		t.Fatal(err)
	}
}

// TestStuckInfoSegments: each stuck entry's series carries the segment
// the reader names for its interface and address; the reader runs only
// when an entry is stuck; a reader that fails leaves the segment empty,
// keeps the series, and marks the collector failed.
func TestStuckInfoSegments(t *testing.T) {
	tb := newTable(t)
	calls := 0
	var fail error
	reader := func() (func(int32, netip.Addr) string, error) {
		calls++
		if fail != nil {
			return nil, fail
		}
		return func(ifindex int32, a netip.Addr) string { return fmt.Sprintf("seg-%d-%s", ifindex, a) }, nil
	}
	c := NewTableCollector(tb, 10, reader, nil)
	scrape := func() (segment string, success float64) {
		reg := prometheus.NewPedanticRegistry()
		reg.MustRegister(c)
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			switch mf.GetName() {
			case "neighwatch_stuck_neighbour_info":
				for _, lp := range mf.GetMetric()[0].GetLabel() {
					if lp.GetName() == "segment" {
						segment = lp.GetValue()
					}
				}
			case "neighwatch_scrape_collector_success":
				success = mf.GetMetric()[0].GetGauge().GetValue()
			}
		}
		return segment, success
	}
	if seg, ok := scrape(); seg != "seg-3-10.0.0.1" || ok != 1 || calls != 1 {
		t.Errorf("segment %q, success %v, reader called %d times; want seg-3-10.0.0.1, 1, once", seg, ok, calls)
	}
	fail = errors.New("netlink: no buffer space")
	if seg, ok := scrape(); seg != "" || ok != 0 {
		t.Errorf("with the reader failing: segment %q, success %v; want the series with an empty segment, and success 0", seg, ok)
	}
	empty := table.New(time.Minute, nil)
	before := calls
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(NewTableCollector(empty, 10, reader, nil))
	if _, err := reg.Gather(); err != nil || calls != before {
		t.Errorf("with no stuck entry the reader ran %d times (%v); want none", calls-before, err)
	}
}
