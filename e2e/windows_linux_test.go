package e2e

import (
	"slices"
	"sync"
	"testing"
	"time"
)

// windowPoll is how often an agentWindows reads the agent's gauge: the
// uncertainty of each window's ends as it sees them.
const windowPoll = 500 * time.Millisecond

// spanLog turns readings of whether the agent's per-packet hooks are
// attached into spans: a span from the first reading that found them to
// the first that did not. Safe for concurrent use.
type spanLog struct {
	mu    sync.Mutex
	spans []span // the last one still open while its off is zero
	reads int
}

// agentWindows follows an agent's per-packet hook windows as the agent
// itself has them: its neighwatch_tracer_hooks_attached gauge, read
// every windowPoll. In an emulated guest a window opens and closes
// seconds late (attaching a tracing program patches the kernel's text,
// which emulation makes slow: 10 to 17 s for a 1 s window, seen in 7.3's
// guest), so what a scenario there asks of the agent is counted in its
// windows, not in seconds.
type agentWindows struct {
	spanLog
	a    *agentProc
	quit chan struct{}
	done chan struct{}
	once sync.Once
}

// followWindows starts following a's windows until the test ends (or
// stop).
func followWindows(t *testing.T, a *agentProc) *agentWindows {
	t.Helper()
	w := &agentWindows{a: a, quit: make(chan struct{}), done: make(chan struct{})}
	go w.run()
	t.Cleanup(w.stop)
	return w
}

func (w *agentWindows) run() {
	defer close(w.done)
	tick := time.NewTicker(windowPoll)
	defer tick.Stop()
	for {
		code, body, err := w.a.ns.HTTPGet("http://" + metricsAddr + "/metrics")
		if err == nil && code == 200 {
			w.note(metricValue(body, "neighwatch_tracer_hooks_attached") == "1", time.Now())
		}
		select {
		case <-w.quit:
			return
		case <-tick.C:
		}
	}
}

// note records one reading.
func (w *spanLog) note(on bool, at time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.reads++
	open := len(w.spans) > 0 && w.spans[len(w.spans)-1].off.IsZero()
	switch {
	case on && !open:
		w.spans = append(w.spans, span{on: at})
	case !on && open:
		w.spans[len(w.spans)-1].off = at
	}
}

// closed returns the spans, one still open ended at at.
func (w *spanLog) closed(at time.Time) []span {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := slices.Clone(w.spans)
	if n := len(out); n > 0 && out[n-1].off.IsZero() {
		out[n-1].off = at
	}
	return out
}

func (w *agentWindows) stop() {
	w.once.Do(func() { close(w.quit) })
	<-w.done
}

// openedAfter lists when the windows that opened after from opened.
func (w *spanLog) openedAfter(from time.Time) []time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []time.Time
	for _, s := range w.spans {
		if s.on.After(from) {
			out = append(out, s.on)
		}
	}
	return out
}

// within reports whether at fell inside a window, a poll's width in
// from both its ends (a window still open counts up to its last
// reading), so that a frame it counts was surely seen by the hooks.
func (w *spanLog) within(at time.Time) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, s := range w.spans {
		off := s.off
		if off.IsZero() {
			off = time.Now()
		}
		if at.After(s.on.Add(windowPoll)) && at.Before(off.Add(-windowPoll)) {
			return true
		}
	}
	return false
}

// count says how many windows were seen in how many readings.
func (w *spanLog) count() (windows, reads int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.spans), w.reads
}
