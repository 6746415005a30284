// Package count declares a part's counters once. A part (the mirror, the
// feed) names each counter as a constant and says, in one table beside
// the constants, the metric family it is exported in and its label value
// there; it counts where the thing happens (Set.Add), and the metrics
// collector declares the families and exports a snapshot from that same
// table. A new counter is its constant, its row and its count.
package count

import "sync/atomic"

// Family is a metric family some counters are exported in: its name (the
// collector's namespace added), its help, and the label that tells its
// counters apart ("" for a family of one counter).
type Family struct {
	Name, Help, Label string
}

// Export says how one counter is exported: its family (nil for a counter
// only tests read) and its label value there.
type Export struct {
	Family *Family
	Value  string
}

// Set is the live form of a part's counters, indexed by its constants.
type Set[K ~int] struct {
	c []atomic.Uint64
}

// NewSet makes a set of n counters.
func NewSet[K ~int](n K) *Set[K] {
	return &Set[K]{c: make([]atomic.Uint64, n)}
}

// Add counts d more of k.
func (s *Set[K]) Add(k K, d uint64) { s.c[k].Add(d) }

// Snapshot copies every counter into dst, which has one place for each.
func (s *Set[K]) Snapshot(dst []uint64) {
	for i := range s.c {
		dst[i] = s.c[i].Load()
	}
}

// Of returns k's counter itself, for a part that hands one counter to a
// helper of its own (a rate limiter counting its waits) rather than the
// whole set.
func (s *Set[K]) Of(k K) *atomic.Uint64 { return &s.c[k] }
