package bpf

import (
	"context"
	"errors"
	"log/slog"
	"runtime/debug"
	"slices"
	"sync/atomic"
	"time"

	"github.com/cilium/ebpf/ringbuf"
	"github.com/neighwatch/neighwatch/monitor"
)

// seedFrom seeds the mirror from the table entry by entry, so a table of
// 100,000 entries is never copied whole.
func (t *Tracer) seedFrom(tb *monitor.Table) (int, error) {
	keys := tb.Keys()
	batch := make([]SeedEntry, 0, 1024)
	n := 0
	flush := func() error {
		k, err := t.Seed(batch)
		n += k
		batch = batch[:0]
		return err
	}
	for _, k := range keys {
		e, ok := tb.Lookup(k)
		if !ok {
			continue
		}
		batch = append(batch, SeedEntry{Ifindex: int(e.Ifindex), Addr: e.Addr, State: uint8(e.State), MAC: []byte(e.LLAddr)})
		if len(batch) == cap(batch) {
			if err := flush(); err != nil {
				return n, err
			}
		}
	}
	return n, flush()
}

// FeedCounters count what the feed did.
type FeedCounters struct {
	Transitions       atomic.Uint64 // silent transitions applied to the table
	TransitionsStale  atomic.Uint64 // silent transitions already overtaken by netlink
	HitsUnknown       atomic.Uint64 // hits for entries the table does not hold
	HitsApplied       atomic.Uint64
	TransitionsBroken atomic.Uint64 // undecodable ring buffer records
}

// Feed connects the tracer to a monitor until ctx ends: it follows the
// monitor's watched interfaces, seeds the in-kernel mirror from the table,
// applies silent transitions to the table (cause tracepoint), and turns
// hit counts into bypass evidence every interval.
func (t *Tracer) Feed(ctx context.Context, m *monitor.Monitor, interval time.Duration, c *FeedCounters, log *slog.Logger) error {
	select {
	case <-m.Ready():
	case <-ctx.Done():
		return nil
	}
	var watched []int
	syncWatched := func() {
		var idx []int
		for i := range m.Interfaces() {
			idx = append(idx, int(i))
		}
		slices.Sort(idx)
		if slices.Equal(idx, watched) {
			return
		}
		if err := t.SetWatched(idx, false); err != nil {
			log.Warn("tracer: updating watched interfaces failed", "err", err)
			return
		}
		watched = idx
	}
	syncWatched()
	// Seeding makes short-lived garbage per entry; collect it more often
	// than usual meanwhile so the heap does not double for it.
	gc := debug.SetGCPercent(25)
	n, err := t.seedFrom(m.Table())
	debug.SetGCPercent(gc)
	if err != nil {
		log.Warn("tracer: seeding the in-kernel mirror failed; entries are mirrored from their next change", "err", err)
	}
	// Seeding a large table allocates for a moment; give it back.
	debug.FreeOSMemory()
	log.Info("tracer running", "mode", t.Mode, "seeded", n, "interfaces", len(watched))

	go func() {
		<-ctx.Done()
		t.rd.Close()
	}()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			tr, err := t.ReadTransition()
			if err != nil {
				if errors.Is(err, ringbuf.ErrClosed) {
					return
				}
				c.TransitionsBroken.Add(1)
				continue
			}
			k := monitor.Key{Ifindex: int32(tr.Key.Ifindex), Addr: tr.Key.Addr}
			if m.Table().ApplyTracepoint(k, monitor.State(tr.From), monitor.State(tr.To), time.Now()) {
				c.Transitions.Add(1)
			} else {
				c.TransitionsStale.Add(1)
			}
		}
	}()

	last := make(map[HitKey]uint64)
	tick := time.NewTicker(interval)
	defer tick.Stop()
	lastSizes := time.Now() // the first count a minute in, not during start-up
	for {
		select {
		case <-ctx.Done():
			<-done
			return nil
		case <-tick.C:
		}
		syncWatched()
		if time.Since(lastSizes) >= time.Minute {
			t.refreshMirrorSize()
			lastSizes = time.Now()
		}
		hits, err := t.Hits()
		if err != nil {
			log.Warn("tracer: reading hits failed", "err", err)
			continue
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
			if m.Table().AddBypass(monitor.Key{Ifindex: int32(k.Ifindex), Addr: k.Addr}, d, now) {
				c.HitsApplied.Add(d)
			} else {
				c.HitsUnknown.Add(d)
			}
		}
		for k := range last {
			if _, ok := hits[k]; !ok {
				delete(last, k)
			}
		}
	}
}
