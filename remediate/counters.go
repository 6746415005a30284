package remediate

import (
	"sync"
	"sync/atomic"
)

// Stats are the engine's counters at one moment.
type Stats struct {
	// Actions counts actions by strategy and verified outcome.
	Actions                     map[Strategy]map[Outcome]uint64
	RateLimited, Dropped, Swaps uint64
	// Skipped counts, by reason, the candidates the last sweep left alone.
	Skipped map[SkipReason]int
	// Fix is the detection-to-fix histogram: cumulative counts by upper
	// bound (FixBuckets), the sum of the observations and their count.
	FixBuckets map[float64]uint64
	FixSum     float64
	FixCount   uint64
	// Recovery: managed entries, from the first doubt about their MAC to
	// REACHABLE at a new one (same buckets).
	RecoveryBuckets map[float64]uint64
	RecoverySum     float64
	RecoveryCount   uint64
	Queue           int
	// Managed entries: how many neighwatch manages, how many the cap
	// refused, releases by reason.
	Managed       int
	ManageRefused uint64
	Releases      map[ReleaseReason]uint64
	// Confirmations counts confirmations of suspicions by outcome.
	Confirmations map[ConfirmOutcome]uint64
	// MoveChecks counts the checks of moved entries' old MACs by outcome;
	// MovesWaiting is how many wait for a worker (movequeue.go).
	MoveChecks   map[MoveOutcome]uint64
	MovesWaiting int
	// Floods are the move checks' drops and oldest wait by interface
	// (its name), for each interface an entry moved on.
	Floods map[string]Flood
}

// FixBuckets are the upper bounds of the detection-to-fix histogram.
var FixBuckets = []float64{0.5, 1, 2, 5, 10, 30, 60, 120, 300, 600}

// numOutcomes is the size of Outcomes(); TestCounterSizes keeps it true.
const numOutcomes = 9

// counters is the live form of Stats.
type counters struct {
	actions     [][numOutcomes]atomic.Uint64 // by strategyIdx (one per registered strategy), outcomeIdx
	rateLimited atomic.Uint64                // actions that waited for a token
	dropped     atomic.Uint64                // candidates not queued: queue full
	swaps       atomic.Uint64
	// manageRefused counts entries the manage cap turned away.
	manageRefused atomic.Uint64
	confirms      [3]atomic.Uint64 // by ConfirmOutcomes()
	moves         [4]atomic.Uint64 // by MoveOutcomes()

	mu       sync.Mutex
	releases map[ReleaseReason]uint64
	skipped  [numSkipReasons]int
	fix      histogram // detection to fix
	rec      histogram // managed entries' recovery after a move
}

// histogram counts observations cumulatively by FixBuckets; the caller
// holds counters.mu.
type histogram struct {
	counts []uint64
	sum    float64
	n      uint64
}

func (h *histogram) observe(seconds float64) {
	if h.counts == nil {
		h.counts = make([]uint64, len(FixBuckets))
	}
	for i, b := range FixBuckets {
		if seconds <= b {
			h.counts[i]++
		}
	}
	h.sum += seconds
	h.n++
}

// snapshot returns the counts by upper bound (every bound present), the
// sum and the count.
func (h *histogram) snapshot() (map[float64]uint64, float64, uint64) {
	out := make(map[float64]uint64, len(FixBuckets))
	for i, b := range FixBuckets {
		out[b] = 0
		if h.counts != nil {
			out[b] = h.counts[i]
		}
	}
	return out, h.sum, h.n
}

func strategyIdx(s Strategy) int {
	for i, x := range Strategies() {
		if x == s {
			return i
		}
	}
	return 0
}

func outcomeIdx(o Outcome) int {
	for i, x := range Outcomes() {
		if x == o {
			return i
		}
	}
	return 0
}

func (c *counters) action(s Strategy, o Outcome) { c.actions[strategyIdx(s)][outcomeIdx(o)].Add(1) }

func (c *counters) confirmed(o ConfirmOutcome) {
	for i, x := range ConfirmOutcomes() {
		if x == o {
			c.confirms[i].Add(1)
		}
	}
}

func (c *counters) moveChecked(o MoveOutcome) {
	for i, x := range MoveOutcomes() {
		if x == o {
			c.moves[i].Add(1)
		}
	}
}

func (c *counters) released(reason ReleaseReason) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.releases == nil {
		c.releases = make(map[ReleaseReason]uint64)
	}
	c.releases[reason]++
}

func (c *counters) setSkipped(n *[numSkipReasons]int) {
	c.mu.Lock()
	c.skipped = *n
	c.mu.Unlock()
}

func (c *counters) observeRecovery(seconds float64) {
	c.mu.Lock()
	c.rec.observe(seconds)
	c.mu.Unlock()
}

func (c *counters) observeFix(seconds float64) {
	c.mu.Lock()
	c.fix.observe(seconds)
	c.mu.Unlock()
}

func (c *counters) stats() Stats {
	s := Stats{
		Actions:     make(map[Strategy]map[Outcome]uint64, len(Strategies())),
		RateLimited: c.rateLimited.Load(), Dropped: c.dropped.Load(), Swaps: c.swaps.Load(),
	}
	for _, st := range Strategies() {
		m := make(map[Outcome]uint64, len(Outcomes()))
		for _, o := range Outcomes() {
			m[o] = c.actions[strategyIdx(st)][outcomeIdx(o)].Load()
		}
		s.Actions[st] = m
	}
	s.ManageRefused = c.manageRefused.Load()
	s.Confirmations = make(map[ConfirmOutcome]uint64, len(c.confirms))
	for i, o := range ConfirmOutcomes() {
		s.Confirmations[o] = c.confirms[i].Load()
	}
	s.MoveChecks = make(map[MoveOutcome]uint64, len(c.moves))
	for i, o := range MoveOutcomes() {
		s.MoveChecks[o] = c.moves[i].Load()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	s.Releases = make(map[ReleaseReason]uint64, len(ReleaseReasons()))
	for _, r := range ReleaseReasons() {
		s.Releases[r] = c.releases[r]
	}
	s.Skipped = make(map[SkipReason]int, len(c.skipped))
	for r, n := range c.skipped {
		if n > 0 {
			s.Skipped[SkipReason(r)] = n
		}
	}
	s.FixBuckets, s.FixSum, s.FixCount = c.fix.snapshot()
	s.RecoveryBuckets, s.RecoverySum, s.RecoveryCount = c.rec.snapshot()
	return s
}
