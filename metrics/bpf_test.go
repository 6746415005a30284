package metrics

import (
	"strings"
	"testing"

	"github.com/neighwatch/neighwatch/bpf"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

type fakeBPF struct{ feed bpf.FeedCounters }

func (f *fakeBPF) TracerMode() string { return "fentry" }
func (f *fakeBPF) TracerStats() (bpf.TracerStats, bool) {
	return bpf.TracerStats{HitEntries: 3, HitCapacity: 65536, MirrorEntries: 10, MirrorCapacity: 262144, HitsDropped: 1}, true
}
func (f *fakeBPF) FeedCounters() *bpf.FeedCounters { return &f.feed }
func (f *fakeBPF) Redirects() ([3][2]uint64, bool) {
	return [3][2]uint64{{5, 2}, {7, 0}, {0, 0}}, true
}
func (f *fakeBPF) DatapathCounts() (map[bpf.Decision]uint64, bool) {
	return map[bpf.Decision]uint64{bpf.Redirect: 9}, true
}
func (f *fakeBPF) DatapathModes() map[string]bpf.Mode {
	return map[string]bpf.Mode{"eth1": bpf.ModeNeigh}
}

func TestBPFCollector(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(NewBPFCollector(&fakeBPF{}))
	want := `
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
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "neighwatch_tracer_mode", "neighwatch_tracer_redirects_total", "neighwatch_datapath_mode"); err != nil {
		t.Fatal(err)
	}
	problems, err := testutil.GatherAndLint(reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
}
