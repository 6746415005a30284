package remediate

import (
	"sync"
	"sync/atomic"

	"github.com/neighwatch/neighwatch/internal/count"
)

// Counter is one thing the engine counts with no label but its outcome.
// Each is declared once: here, and in CounterInfo beside it, the metric
// it is exported as and its label value there; the engine counts where it
// happens (c.n.Add, or confirmed and moveChecked by outcome), and the
// remediation collector exports every row of CounterInfo. The actions by
// strategy and outcome, the releases and the two histograms are below.
type Counter int

// The engine's counters.
const (
	RateLimited             Counter = iota // actions that waited for the global or per-interface rate limit
	QueueFull                              // candidates not queued: the queue was full
	Swaps                                  // datapath swaps made
	ManageRefused                          // entries the manage cap turned away
	ConfirmationsAnswered                  // a suspect entry's MAC answered: a host with two MACs
	ConfirmationsUnanswered                // it did not: stuck
	ConfirmationsFailed                    // a confirmation not sent
	MoveChecksAnswered                     // a moved entry's old MAC answered: a conflict
	MoveChecksUnanswered                   // it did not: the host moved
	MoveChecksFailed                       // a move check not sent
	MoveChecksDropped                      // a move check dropped for want of room

	NumCounters
)

// The families the engine's counters are exported in.
var (
	FamilyRateLimited   = count.Family{Name: "remediation_rate_limited_total", Help: "Actions that waited for the global or per-interface rate limit."}
	FamilyQueueFull     = count.Family{Name: "remediation_dropped_total", Help: "Candidates not queued because the queue was full."}
	FamilySwaps         = count.Family{Name: "datapath_swaps_total", Help: "Datapath swaps from legacy to neigh made by remediation."}
	FamilyManageRefused = count.Family{Name: "manage_refused_total", Help: "Entries the manage strategy left to the next strategy because --manage.max was reached."}
	FamilyConfirmations = count.Family{Name: "remediation_confirmations_total", Help: "Confirmations of suspicions (a host seen at another MAC): unicast probes to the entry's own MAC, in dry-run too, by outcome: answered (a host with two MACs), unanswered (stuck), failed (not sent).", Label: "outcome"}
	FamilyMoveChecks    = count.Family{Name: "remediation_move_checks_total", Help: "Checks of an entry the kernel pointed at another MAC: unicast probes to its old MAC, in dry-run too, by outcome: answered (the old MAC still holds the address: a spoofer or a duplicate, the entry a conflict), unanswered (the host moved), failed (not sent), dropped (not checked: the queue was full of checks of as much at stake or more, during a flood of moves).", Label: "outcome"}
)

// CounterInfo says how each counter is exported.
var CounterInfo = [NumCounters]count.Export{
	RateLimited:             {Family: &FamilyRateLimited},
	QueueFull:               {Family: &FamilyQueueFull},
	Swaps:                   {Family: &FamilySwaps},
	ManageRefused:           {Family: &FamilyManageRefused},
	ConfirmationsAnswered:   {Family: &FamilyConfirmations, Value: string(ConfirmAnswered)},
	ConfirmationsUnanswered: {Family: &FamilyConfirmations, Value: string(ConfirmUnanswered)},
	ConfirmationsFailed:     {Family: &FamilyConfirmations, Value: string(ConfirmFailed)},
	MoveChecksAnswered:      {Family: &FamilyMoveChecks, Value: string(MoveAnswered)},
	MoveChecksUnanswered:    {Family: &FamilyMoveChecks, Value: string(MoveUnanswered)},
	MoveChecksFailed:        {Family: &FamilyMoveChecks, Value: string(MoveFailed)},
	MoveChecksDropped:       {Family: &FamilyMoveChecks, Value: string(MoveDropped)},
}

// Counters are the engine's counters at one moment, by Counter.
type Counters [NumCounters]uint64

// newCounterSet makes the live counters of CounterInfo.
func newCounterSet() *count.Set[Counter] { return count.NewSet(NumCounters) }

// counterOf returns the counter of family f whose label value is v.
func counterOf(f *count.Family, v string) (Counter, bool) {
	for k, e := range CounterInfo {
		if e.Family == f && e.Value == v {
			return Counter(k), true
		}
	}
	return 0, false
}

// Stats are the engine's counters at one moment.
type Stats struct {
	// Counts are the counters of CounterInfo.
	Counts Counters
	// Actions counts actions by strategy and verified outcome.
	Actions map[Strategy]map[Outcome]uint64
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
	// Managed entries: how many neighwatch manages, and releases by
	// reason.
	Managed  int
	Releases map[ReleaseReason]uint64
	// MovesWaiting is how many move checks wait for a worker
	// (movequeue.go).
	MovesWaiting int
	// Floods are the move checks' drops and oldest wait by interface
	// (its name), for each interface an entry moved on.
	Floods map[string]Flood
}

// Confirmed returns how many confirmations ended in o.
func (s Stats) Confirmed(o ConfirmOutcome) uint64 {
	k, _ := counterOf(&FamilyConfirmations, string(o))
	return s.Counts[k]
}

// MoveChecked returns how many move checks ended in o.
func (s Stats) MoveChecked(o MoveOutcome) uint64 {
	k, _ := counterOf(&FamilyMoveChecks, string(o))
	return s.Counts[k]
}

// FixBuckets are the upper bounds of the detection-to-fix histogram.
var FixBuckets = []float64{0.5, 1, 2, 5, 10, 30, 60, 120, 300, 600}

// numOutcomes is the size of Outcomes(); TestCounterSizes keeps it true.
const numOutcomes = 9

// counters is the live form of Stats.
type counters struct {
	n       *count.Set[Counter]
	actions [][numOutcomes]atomic.Uint64 // by strategyIdx (one per registered strategy), outcomeIdx

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
	if k, ok := counterOf(&FamilyConfirmations, string(o)); ok {
		c.n.Add(k, 1)
	}
}

func (c *counters) moveChecked(o MoveOutcome) {
	if k, ok := counterOf(&FamilyMoveChecks, string(o)); ok {
		c.n.Add(k, 1)
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
	s := Stats{Actions: make(map[Strategy]map[Outcome]uint64, len(Strategies()))}
	c.n.Snapshot(s.Counts[:])
	for _, st := range Strategies() {
		m := make(map[Outcome]uint64, len(Outcomes()))
		for _, o := range Outcomes() {
			m[o] = c.actions[strategyIdx(st)][outcomeIdx(o)].Load()
		}
		s.Actions[st] = m
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
