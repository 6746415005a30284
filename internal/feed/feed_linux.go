package feed

import (
	"context"
	"log/slog"
	"runtime/debug"
	"slices"
	"time"

	"github.com/neighwatch/neighwatch/bpf"
	"github.com/neighwatch/neighwatch/internal/table"
	"golang.org/x/sync/errgroup"
)

// Links is what the feed needs of the netlink mirror: when the table is
// loaded, and which interfaces are watched.
type Links interface {
	Ready() <-chan struct{}
	Interfaces() map[int32]string
}

// Feed runs a loaded tracer against the table.
type Feed struct {
	tracer   *bpf.Tracer
	table    *table.Table
	links    Links
	interval time.Duration
	log      *slog.Logger
	c        counters
	ready    chan struct{}
}

// New returns a feed from tr to t that turns hit counts into evidence
// every interval.
func New(tr *bpf.Tracer, t *table.Table, links Links, interval time.Duration, log *slog.Logger) *Feed {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Feed{tracer: tr, table: t, links: links, interval: interval, log: log, ready: make(chan struct{})}
}

// Ready is closed once the tracer's mirror is seeded and its events are
// read: from then on bypass traffic reaches the table.
func (f *Feed) Ready() <-chan struct{} { return f.ready }

// Counters returns the feed's counters.
func (f *Feed) Counters() Counters { return f.c.snapshot() }

// Run feeds the table until ctx ends. It waits for the table to be loaded
// first, since the tracer's mirror is seeded from it.
func (f *Feed) Run(ctx context.Context) error {
	select {
	case <-f.links.Ready():
	case <-ctx.Done():
		return nil
	}
	var watched []int
	syncWatched := func() {
		var idx []int
		for i := range f.links.Interfaces() {
			idx = append(idx, int(i))
		}
		slices.Sort(idx)
		if slices.Equal(idx, watched) {
			return
		}
		if err := f.tracer.SetWatched(idx, false); err != nil {
			f.log.Warn("tracer: updating watched interfaces failed", "err", err)
			return
		}
		watched = idx
	}
	syncWatched()
	n, err := f.seed()
	if err != nil {
		f.log.Warn("tracer: seeding the in-kernel mirror failed; entries are mirrored from their next change", "err", err)
	}
	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		return f.tracer.ReadTransitions(ctx, f.applyTransition, func(error) { f.c.transitionsBroken.Add(1) })
	})
	close(f.ready)
	f.log.Info("tracer running", "mode", f.tracer.Mode(), "seeded", n, "interfaces", len(watched))
	g.Go(func() error {
		last := make(map[bpf.HitKey]uint64)
		tick := time.NewTicker(f.interval)
		defer tick.Stop()
		lastSizes := time.Now() // the first count a minute in, not during start-up
		for {
			select {
			case <-ctx.Done():
				return nil
			case <-tick.C:
			}
			syncWatched()
			if time.Since(lastSizes) >= time.Minute {
				f.tracer.RefreshMirrorSize()
				lastSizes = time.Now()
			}
			f.applyHits(last)
		}
	})
	return g.Wait()
}

// seed fills the tracer's mirror from the table entry by entry, so a
// table of 100,000 entries is never copied whole.
func (f *Feed) seed() (int, error) {
	// Seeding makes short-lived garbage per entry; collect it more often
	// than usual meanwhile so the heap does not double for it, and give
	// the memory back afterwards.
	gc := debug.SetGCPercent(25)
	defer func() {
		debug.SetGCPercent(gc)
		debug.FreeOSMemory()
	}()
	batch := make([]bpf.SeedEntry, 0, 1024)
	n := 0
	flush := func() error {
		k, err := f.tracer.Seed(batch)
		n += k
		batch = batch[:0]
		return err
	}
	for _, k := range f.table.Keys() {
		e, ok := f.table.Lookup(k)
		if !ok {
			continue
		}
		batch = append(batch, bpf.SeedEntry{Ifindex: int(e.Ifindex), Addr: e.Addr, State: uint8(e.State), MAC: e.HardwareAddr()})
		if len(batch) == cap(batch) {
			if err := flush(); err != nil {
				return n, err
			}
		}
	}
	return n, flush()
}

func (f *Feed) applyTransition(tr bpf.SilentTransition) {
	k := table.Key{Ifindex: int32(tr.Key.Ifindex), Addr: tr.Key.Addr}
	if f.table.ApplyTracepoint(k, table.State(tr.From), table.State(tr.To), time.Now()) {
		f.c.transitions.Add(1)
	} else {
		f.c.transitionsStale.Add(1)
	}
}

// applyHits adds the hits counted since the last call (last holds the
// previous totals) to the table as bypass evidence.
func (f *Feed) applyHits(last map[bpf.HitKey]uint64) {
	hits, err := f.tracer.Hits()
	if err != nil {
		f.log.Warn("tracer: reading hits failed", "err", err)
		return
	}
	now := time.Now()
	for k, v := range hits {
		d := v - last[k]
		if v < last[k] { // LRU evicted and re-created the key
			d = v
		}
		last[k] = v
		if d == 0 {
			continue
		}
		if f.table.AddBypass(table.Key{Ifindex: int32(k.Ifindex), Addr: k.Addr}, d, now) {
			f.c.hitsApplied.Add(d)
		} else {
			f.c.hitsUnknown.Add(d)
		}
	}
	for k := range last {
		if _, ok := hits[k]; !ok {
			delete(last, k)
		}
	}
}
