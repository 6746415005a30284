package metrics

import (
	"github.com/neighwatch/neighwatch/bpf"
	"github.com/prometheus/client_golang/prometheus"
)

// BPFSource is what the eBPF collector reads; the agent provides it.
type BPFSource interface {
	// TracerMode is "off", "xmit" or "fentry".
	TracerMode() string
	TracerStats() (bpf.TracerStats, bool)
	// Redirects are the fentry tracer's counts by helper and next-hop
	// state; ok is false in other modes.
	Redirects() (counts [3][2]uint64, ok bool)
	FeedCounters() *bpf.FeedCounters
	DatapathCounts() (map[bpf.Decision]uint64, bool)
	// DatapathModes maps interface names to their datapath mode.
	DatapathModes() map[string]bpf.Mode
}

// BPFCollector exposes the tracer and the datapath.
type BPFCollector struct {
	src                                    BPFSource
	mode, mapEntries, mapCapacity, dropped *prometheus.Desc
	lookups, transitions, hitsUnknown      *prometheus.Desc
	decisions, dpMode, redirects           *prometheus.Desc
}

// NewBPFCollector returns the collector.
func NewBPFCollector(src BPFSource) *BPFCollector {
	return &BPFCollector{
		src:         src,
		mode:        desc("tracer_mode", "The running tracer mode (1 for the active one): off, xmit or fentry.", "mode"),
		mapEntries:  desc("tracer_map_entries", "Entries in the tracer's maps (hits: every tracer interval; mirror: every minute).", "map"),
		mapCapacity: desc("tracer_map_capacity", "Capacity of the tracer's maps.", "map"),
		dropped:     desc("tracer_dropped_total", "Tracer records lost: hits (map full), mirror updates, ring buffer events.", "kind"),
		lookups:     desc("tracer_xmit_lookups_total", "Transmitted packets that passed the cheap filters and needed a STALE-MAC lookup."),
		transitions: desc("tracer_transitions_total", "Silent transitions from the tracepoints: applied to the table, or already overtaken by netlink.", "result"),
		hitsUnknown: desc("tracer_hits_unattributed_total", "Bypass packets counted for entries the table does not hold."),
		decisions:   desc("datapath_decisions_total", "What the forwarding datapath did with each packet.", "decision"),
		redirects:   desc("tracer_redirects_total", "fentry mode: redirect helper calls by helper and the state of the neighbour the FIB lookup before them resolved.", "helper", "nexthop"),
		dpMode:      desc("datapath_mode", "The datapath mode attached to an interface (1 for the active one).", "interface", "mode"),
	}
}

// Describe implements prometheus.Collector.
func (c *BPFCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.mode, c.mapEntries, c.mapCapacity, c.dropped, c.lookups, c.transitions, c.hitsUnknown, c.decisions, c.dpMode, c.redirects} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *BPFCollector) Collect(ch chan<- prometheus.Metric) {
	active := c.src.TracerMode()
	for _, m := range []string{"off", "xmit", "fentry"} {
		v := 0.0
		if m == active {
			v = 1
		}
		ch <- gauge(c.mode, v, m)
	}
	if st, ok := c.src.TracerStats(); ok {
		ch <- gauge(c.mapEntries, float64(st.HitEntries), "hits")
		ch <- gauge(c.mapCapacity, float64(st.HitCapacity), "hits")
		ch <- gauge(c.mapEntries, float64(st.MirrorEntries), "mirror")
		ch <- gauge(c.mapCapacity, float64(st.MirrorCapacity), "mirror")
		ch <- counter(c.dropped, float64(st.HitsDropped), "hits")
		ch <- counter(c.dropped, float64(st.MirrorDropped), "mirror")
		ch <- counter(c.dropped, float64(st.EventsDropped), "events")
		ch <- counter(c.lookups, float64(st.XmitLookups))
		f := c.src.FeedCounters()
		ch <- counter(c.transitions, float64(f.Transitions.Load()), "applied")
		ch <- counter(c.transitions, float64(f.TransitionsStale.Load()), "overtaken")
		ch <- counter(c.hitsUnknown, float64(f.HitsUnknown.Load()))
	}
	if counts, ok := c.src.Redirects(); ok {
		for h, name := range bpf.RedirectHelpers {
			ch <- counter(c.redirects, float64(counts[h][0]), name, "other")
			ch <- counter(c.redirects, float64(counts[h][1]), name, "stale")
		}
	}
	if counts, ok := c.src.DatapathCounts(); ok {
		for _, d := range bpf.Decisions() {
			ch <- counter(c.decisions, float64(counts[d]), d.String())
		}
		for name, mode := range c.src.DatapathModes() {
			for _, m := range []bpf.Mode{bpf.ModeLegacy, bpf.ModeNeigh} {
				v := 0.0
				if m == mode {
					v = 1
				}
				ch <- gauge(c.dpMode, v, name, string(m))
			}
		}
	}
}
