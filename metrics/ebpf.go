package metrics

import (
	"errors"
	"log/slog"
	"strconv"

	"github.com/neighwatch/neighwatch/bpf"
	"github.com/neighwatch/neighwatch/monitor/feed"
	"github.com/prometheus/client_golang/prometheus"
)

// TracerSource is what the tracer collector reads of a running tracer,
// which a *bpf.Tracer is.
type TracerSource interface {
	Mode() bpf.TracerMode
	Stats() (bpf.TracerStats, error)
	// Redirects returns nil outside fentry mode.
	Redirects() (bpf.RedirectCounts, error)
	// ProgramRuns are the kernel's run counts of the tracer's programs;
	// ok is false while the kernel is not counting (see
	// bpf.Loader.ProgramRuns).
	ProgramRuns() (runs map[string]uint64, ok bool)
	// Programs are the tracer's programs and whether the kernel took
	// them.
	Programs() []bpf.ProgramStatus
	// StaleCounted is how many STALE entries the tracer's maps count.
	StaleCounted() (uint64, error)
	// MapMemory is the kernel memory of each of the tracer's maps, by
	// name (bpf.Readout.MapMemory).
	MapMemory() (map[string]uint64, error)
}

// FeedSource is what the tracer collector reads of the feed from the
// tracer into the table: *feed.Feed is one. Unmirrored counts, per
// interface, the STALE entries that did not fit in the tracer's maps;
// with the tracer's StaleCounted, every STALE entry it watches.
type FeedSource interface {
	Counters() feed.Counters
	HookState() feed.HookState
	Unmirrored() map[int32]int
}

// RunningTracer returns the tracer that runs now and its feed, or nils
// while none runs (off, disabled, or between a reload's two tracers).
type RunningTracer func() (TracerSource, FeedSource)

// NewTracerCollector exposes the bypass tracer and its feed into the
// table; its maps are read at scrape time.
func NewTracerCollector(running RunningTracer, names func(ifindex int32) string, log *slog.Logger) prometheus.Collector {
	s := newSubsystem("tracer", log)
	var (
		mode         = s.gauge("tracer_mode", "The running tracer mode (1 for the active one): off, xmit or fentry.", "mode")
		mapEntries   = s.gauge("tracer_map_entries", "Entries in the tracer's maps (hits: counted every minute, when idle counters are dropped; mirror: every 5 minutes, or 1,000 times the count's time when that is longer).", "map")
		mapCapacity  = s.gauge("tracer_map_capacity", "Capacity of the tracer's maps.", "map")
		mapBytes     = s.gauge("tracer_map_bytes", "Kernel memory of each of the tracer's maps, as the kernel reports it (memlock); kernels since 5.11 charge it to the agent's memory cgroup, beside the process's RSS.", "map")
		dropped      = s.counter("tracer_dropped_total", "Tracer records lost: hits (map full), mirror updates, ring buffer events.", "kind")
		lookups      = s.counter("tracer_xmit_lookups_total", "Transmitted packets that passed the cheap filters and needed a lookup of their destination in the mirror.")
		routedAsks   = s.counter("tracer_routed_asks_total", "MACs that routed bypass traffic went to, whose STALE entry (the gateway) the transmit hook asked the agent to name; at most once a tracer interval each.")
		redirects    = s.counter("tracer_redirects_total", "fentry mode: redirect helper calls by helper and the state of the neighbour the FIB lookup before them resolved.", "helper", "nexthop")
		attached     = s.gauge("tracer_hooks_attached", "1 while the per-packet hooks (transmit or fentry, source MAC) are attached: only while some entry is stale-long, for --tracer.window of every --tracer.period.")
		attachedFor  = s.counter("tracer_hooks_attached_seconds_total", "Time the per-packet hooks were attached; its rate is the fraction of time they cost anything.")
		runs         = s.counter("tracer_program_runs_total", "Runs of each tracer program, from the kernel's statistics (counted only while the kernel keeps BPF statistics: kernel.bpf_stats_enabled=1 or a BPF_ENABLE_STATS holder).", "program")
		candidates   = s.gauge("tracer_source_candidates", "Stale-long entries whose own packets the source-MAC program watches for another MAC.")
		unmirrored   = s.gauge("tracer_unmirrored_entries", "STALE entries that did not fit in the tracer's maps (their bypass traffic is not counted); retried every minute; the maps grow with the table. With tracer_stale_counted, every STALE entry the tracer watches.", "interface")
		staleCount   = s.gauge("tracer_stale_counted", "STALE entries the tracer's maps hold and count.")
		programs     = s.gauge("tracer_program_loaded", "1 for each tracer program the kernel took, 0 for one it refused (refusal: verifier, permission, no-target, unsupported, attach, disabled); a refused program costs its feature only where no other program serves it (neighwatch_detection_working).", "program", "hook", "refusal")
		feedCounters = s.counted(feed.CounterInfo[:])
	)
	s.update = func(ch chan<- prometheus.Metric) error {
		src, fd := running()
		active := bpf.TracerOff
		if src != nil {
			active = src.Mode()
		}
		for _, m := range []bpf.TracerMode{bpf.TracerOff, bpf.TracerXmit, bpf.TracerFentry} {
			ch <- mode.with(bool01(m == active), string(m))
		}
		if src == nil || fd == nil {
			return nil // no tracer runs
		}
		progs := src.Programs()
		for _, p := range progs {
			ch <- programs.with(bool01(p.Loaded), p.Program, p.Hook, string(p.Refusal))
		}
		um := map[string]int{}
		for idx, n := range fd.Unmirrored() {
			name := names(idx)
			if name == "" {
				name = strconv.Itoa(int(idx))
			}
			um[name] += n
		}
		for name, n := range um {
			ch <- unmirrored.with(float64(n), name)
		}
		var errs []error
		if n, err := src.StaleCounted(); err != nil {
			errs = append(errs, err)
		} else {
			ch <- staleCount.with(float64(n))
		}
		f := fd.Counters()
		feedCounters(ch, f[:])
		h := fd.HookState()
		ch <- attached.with(bool01(h.Attached))
		ch <- attachedFor.with(h.AttachedTime.Seconds())
		ch <- candidates.with(float64(h.Candidates))
		if rs, ok := src.ProgramRuns(); ok {
			for name, n := range rs {
				ch <- runs.with(float64(n), name)
			}
		}
		if st, err := src.Stats(); err != nil {
			errs = append(errs, err)
		} else {
			ch <- mapEntries.with(float64(st.HitEntries), "hits")
			ch <- mapCapacity.with(float64(st.HitCapacity), "hits")
			ch <- mapEntries.with(float64(st.MirrorEntries), "mirror")
			ch <- mapCapacity.with(float64(st.MirrorCapacity), "mirror")
			ch <- dropped.with(float64(st.HitsDropped), "hits")
			ch <- dropped.with(float64(st.MirrorDropped), "mirror")
			ch <- dropped.with(float64(st.EventsDropped), "events")
			ch <- lookups.with(float64(st.XmitLookups))
			ch <- routedAsks.with(float64(st.RoutedAsks))
		}
		if mb, err := src.MapMemory(); err != nil {
			errs = append(errs, err)
		} else {
			for name, b := range mb {
				ch <- mapBytes.with(float64(b), name)
			}
		}
		counts, err := src.Redirects()
		if err != nil {
			errs = append(errs, err)
		}
		for h, c := range counts {
			ch <- redirects.with(float64(c.Other), h.String(), "other")
			ch <- redirects.with(float64(c.Stale), h.String(), "stale")
		}
		return errors.Join(errs...)
	}
	return s
}

// DatapathSource is what the datapath collector reads.
type DatapathSource interface {
	Counts() (map[bpf.Decision]uint64, error)
	// Modes maps the names of the interfaces with the datapath to their mode.
	Modes() map[string]bpf.Mode
}

// NewDatapathCollector exposes the forwarding datapath: its decisions
// (read from its maps at scrape time) and each interface's mode.
func NewDatapathCollector(src DatapathSource, log *slog.Logger) prometheus.Collector {
	s := newSubsystem("datapath", log)
	var (
		decisions = s.counter("datapath_decisions_total", "What the forwarding datapath did with each packet.", "decision")
		mode      = s.gauge("datapath_mode", "The datapath mode attached to an interface (1 for the active one).", "interface", "mode")
	)
	s.update = func(ch chan<- prometheus.Metric) error {
		for name, m := range src.Modes() {
			for _, x := range []bpf.Mode{bpf.ModeLegacy, bpf.ModeNeigh} {
				ch <- mode.with(bool01(x == m), name, string(x))
			}
		}
		counts, err := src.Counts()
		if err != nil {
			return err
		}
		for _, d := range bpf.Decisions() {
			ch <- decisions.with(float64(counts[d]), d.String())
		}
		return nil
	}
	return s
}
