package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/neighwatch/neighwatch/bpf"
	"github.com/neighwatch/neighwatch/metrics"
	"github.com/neighwatch/neighwatch/monitor/feed"
	"github.com/neighwatch/neighwatch/monitor/neightbl"
	"github.com/neighwatch/neighwatch/table"
	"github.com/vishvananda/netns"
)

// tracerPart loads the bypass tracer when it runs, concurrently with the
// mirror's first dump, and then feeds the table from it. Until it is
// loaded, and if it cannot be, the tracer counts as off.
type tracerPart struct {
	mode    bpf.TracerMode
	memlock memlock  // what became of RLIMIT_MEMLOCK, for refusals
	maxMap  int      // --tracer.max-map-entries
	refuse  []string // programs not to load (--debug.refuse-programs)
	table   *table.Table
	synced  <-chan struct{} // closed once the table holds the mirror's first dump
	links   feed.Links
	cfg     feed.Config
	log     *slog.Logger
	ready   chan struct{}

	// nodeEntries counts the entries the kernel holds in every
	// namespace (nil: nodeNeighbours); tests set it.
	nodeEntries func() int

	readyOnce sync.Once

	mu       sync.Mutex
	tracer   *bpf.Tracer
	feed     *feed.Feed
	size     int // the maps' capacity
	disabled error
}

func (t *tracerPart) Ready() <-chan struct{} { return t.ready }

// Disabled says why the tracer does not run, once that is known.
func (t *tracerPart) Disabled() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.disabled
}

func (t *tracerPart) Run(ctx context.Context) error {
	for {
		size := t.loadSize(ctx)
		tr, err := loadTracer(t.mode, t.refuse, size, t.memlock, t.log)
		if err != nil {
			t.mu.Lock()
			t.disabled = err
			t.mu.Unlock()
			<-ctx.Done()
			return nil
		}
		reload, err := t.run(ctx, tr, size)
		tr.Close()
		if !reload || ctx.Err() != nil {
			return err
		}
	}
}

// resizeEvery is how often the tracer checks that its maps still fit what
// the node can hold.
const resizeEvery = 10 * time.Second

// run feeds the table from a loaded tracer until ctx ends, or until the
// table outgrows the maps (it holds more than four fifths of their
// slots): then it returns reload, and Run loads the tracer again with
// larger maps (at least twice as large). Meanwhile what does not fit is
// counted (neighwatch_tracer_unmirrored_entries), never lost silently.
func (t *tracerPart) run(ctx context.Context, tr *bpf.Tracer, size int) (reload bool, err error) {
	f := feed.New(tr, t.table, t.links, t.cfg)
	t.mu.Lock()
	t.tracer, t.feed, t.size = tr, f, size
	t.mu.Unlock()
	defer func() {
		t.mu.Lock()
		t.tracer, t.feed = nil, nil // closed by the caller: report off meanwhile
		t.mu.Unlock()
	}()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-f.Ready():
			t.readyOnce.Do(func() { close(t.ready) })
		case <-ctx.Done():
		}
	}()
	var grown atomic.Bool
	go func() {
		tick := time.NewTicker(resizeEvery)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			if n := t.table.Len(); outgrown(n, size, t.maxMap) {
				t.log.Info("tracer: the table outgrew the tracer's maps; loading it again with larger ones",
					"capacity", size, "entries", n)
				grown.Store(true)
				cancel()
				return
			}
		}
	}()
	err = f.Run(ctx)
	return grown.Load(), err
}

// nodeNeighbours reads the node's neighbour tables: how many entries
// they may hold (the gc_thresh3 of IPv4 and IPv6 together) and how many
// they hold now, in every namespace (0 and 0 when they cannot be read).
func nodeNeighbours() (thresh3, entries int) {
	ps, err := neightbl.NewReader(netns.None()).Read()
	if err != nil {
		return 0, 0
	}
	for _, p := range ps {
		thresh3 += int(p.Thresh3)
		entries += int(p.Entries)
	}
	return thresh3, entries
}

// tracerMapSlots is the capacity the tracer's maps will have once the
// table holds entries entries, or 0 when no tracer will load: for the
// memory plan.
func tracerMapSlots(cfg TracerConfig, c caps, entries int) int {
	if cfg.Mode == bpf.TracerOff || !c.bpf() {
		return 0
	}
	return loadSlots(entries, cfg.MaxMap)
}

// loadSlots is the capacity to load the tracer's maps with for entries
// entries: the entries with a quarter to spare, as a power of two from
// 16,384 (bpf.MapSizeFor), at most maxMap (0: no bound). The kernel sets
// aside a bucket for each slot of a hash map, used or not: slots follow
// the table, not what gc_thresh3 would let it become. Powers of two make
// a growing table reload the tracer at most once per doubling.
func loadSlots(entries, maxMap int) int {
	size := bpf.MapSizeFor(entries + entries/4)
	if maxMap > 0 && size > maxMap {
		size = maxMap
	}
	return size
}

// outgrown reports whether a table of entries no longer fits maps of
// size slots with a quarter to spare, and larger ones may be loaded.
func outgrown(entries, size, maxMap int) bool {
	return loadSlots(entries, maxMap) > size
}

// loadSize is the capacity to load the tracer's maps with now. The
// tracer loads beside the mirror's first dump: when the kernel's count of
// entries, over every namespace, fits the smallest maps, so does the
// table, and the tracer loads at once; otherwise it waits for the dump
// (2 s at a million entries) and sizes the maps for this namespace's.
func (t *tracerPart) loadSize(ctx context.Context) int {
	count := t.nodeEntries
	if count == nil {
		count = func() int {
			_, n := nodeNeighbours()
			return n
		}
	}
	if kernel := count(); t.synced != nil && loadSlots(kernel, t.maxMap) > loadSlots(0, t.maxMap) {
		select {
		case <-t.synced:
		case <-ctx.Done():
		}
	}
	return loadSlots(t.table.Len(), t.maxMap)
}

// reads serves the tracer collector: the running tracer and its feed
// themselves, or nils while none runs.
func (t *tracerPart) reads() (metrics.TracerSource, metrics.FeedSource) {
	tr, f := t.running()
	if tr == nil || f == nil {
		return nil, nil
	}
	return tr, f
}

// running returns the tracer and its feed, or nil while it does not run.
func (t *tracerPart) running() (*bpf.Tracer, *feed.Feed) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.tracer, t.feed
}

// Detail is what /readyz/tracer says after "ready": each feature and how
// it works, or why not.
func (t *tracerPart) Detail() string {
	tr, _ := t.running()
	if tr == nil {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "bypass counting: %s\n", tr.Mode())
	for _, f := range tr.Features() {
		switch {
		case f.Working && f.Why != "":
			fmt.Fprintf(&b, "%s: %s (partly: %s)\n", f.Feature, f.Via, f.Why)
		case f.Working:
			fmt.Fprintf(&b, "%s: %s\n", f.Feature, f.Via)
		default:
			fmt.Fprintf(&b, "%s: off: %s\n", f.Feature, f.Why)
		}
	}
	return b.String()
}

// tracerWanted reports whether the configuration asks for a tracer this
// process may load, saying in one line why not when it may not.
func tracerWanted(mode bpf.TracerMode, c caps, log *slog.Logger) bool {
	switch {
	case mode == bpf.TracerOff:
		log.Info("tracer disabled by --tracer=off: bypass traffic is not counted and source MACs are not watched; stuck needs ARP evidence")
		return false
	case !c.bpf():
		log.Warn("tracer disabled: needs CAP_BPF and CAP_PERFMON (or root); bypass traffic is not counted")
		return false
	}
	return true
}

// loadTracer loads the tracer. It is optional: if it cannot run, the
// agent says why in one line and goes on without. A program the kernel
// refuses costs only its feature, said in one line each.
func loadTracer(mode bpf.TracerMode, refuse []string, size int, ml memlock, log *slog.Logger) (*bpf.Tracer, error) {
	start := time.Now()
	tr, err := bpf.LoadTracer(bpf.TracerOptions{Mode: mode, Refuse: refuse, RefuseWhy: "named in --debug.refuse-programs",
		MirrorSize: size, HitsSize: hitSlots(size), CandidatesSize: size})
	switch {
	case errors.Is(err, bpf.ErrNoBTF):
		log.Warn("tracer disabled: " + err.Error())
		return nil, err
	case err != nil:
		if line, ok := bpfRefusal(err, effectiveCaps(), ml); ok {
			log.Warn("tracer disabled: " + line)
			return nil, errors.New(line)
		}
		log.Warn("tracer disabled: loading it failed", "err", err)
		return nil, err
	}
	logPrograms(tr, log)
	log.Debug("tracer loaded", "took", time.Since(start), "map_capacity", size)
	return tr, nil
}

// logPrograms says, one line each, which programs the kernel refused and
// what that costs: nothing where another program took over, a feature
// where none did.
func logPrograms(tr *bpf.Tracer, log *slog.Logger) {
	working := map[bpf.Feature]bpf.FeatureStatus{}
	for _, f := range tr.Features() {
		working[f.Feature] = f
	}
	for _, p := range tr.Programs() {
		if p.Loaded {
			continue
		}
		f := working[p.Feature]
		if f.Working {
			log.Debug("tracer: program refused, another serves its feature", "program", p.Program, "hook", p.Hook,
				"refusal", p.Refusal, "feature", p.Feature, "via", f.Via, "err", p.Error)
			continue
		}
		log.Debug("tracer: program refused", "program", p.Program, "hook", p.Hook, "refusal", p.Refusal, "err", p.Error)
	}
	for _, f := range tr.Features() {
		switch {
		case f.Working && f.Why != "":
			log.Warn(fmt.Sprintf("tracer: %s detection partly blind: %s", f.Feature, f.Why))
		case !f.Working && f.Feature == bpf.FeatureXDPBypass && tr.Mode() == bpf.TracerXmit:
			log.Info(fmt.Sprintf("tracer: %s not counted: %s", f.Feature, f.Why))
		case !f.Working:
			log.Warn(fmt.Sprintf("tracer: %s detection off: %s", f.Feature, f.Why))
		}
	}
	if fb := tr.Fallback(); fb != nil && tr.Mode() == bpf.TracerXmit {
		log.Warn("fentry tracer unavailable, counting at transmit (xmit mode) instead", "reason", fb.Error())
	}
	seed := "kernel"
	if !tr.SeedsInKernel() {
		seed = "entry-by-entry"
		// One line for the seed's programs the kernel refused, each
		// named, with what they need and the kernel's own words for the
		// first.
		var refused []string
		var first bpf.ProgramStatus
		for _, p := range tr.Programs() {
			if p.Feature == bpf.FeatureSeed && !p.Loaded {
				if len(refused) == 0 {
					first = p
				}
				refused = append(refused, p.Program)
			}
		}
		if len(refused) > 0 {
			log.Info(fmt.Sprintf("tracer: the mirror is seeded entry by entry (seconds at a million entries): the kernel refused %s, which need %s",
				strings.Join(refused, " and "), first.Needs), "refusal", first.Refusal, "err", first.Error)
		}
	}
	log.Info("tracer loaded", "bypass", tr.Mode(), "features", featureSummary(tr.Features()), "seed", seed)
}

// featureSummary is "states=tp_btf created-entries=raw_tp bypass=xmit ...".
func featureSummary(fs []bpf.FeatureStatus) string {
	var parts []string
	for _, f := range fs {
		v := f.Via
		if !f.Working {
			v = "off"
		}
		parts = append(parts, string(f.Feature)+"="+v)
	}
	return strings.Join(parts, " ")
}
