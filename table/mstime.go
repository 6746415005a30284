package table

import (
	"math"
	"time"
)

// A record keeps its times other than since as int32 milliseconds from
// the store's epoch: 12 bytes where Unix nanoseconds took 24, at a
// million entries 12 MB. The kernel's own are coarser (jiffies, 4 ms at
// HZ=250). The range is ±24.8 days around the epoch; the epoch moves
// forward (rebase) before now leaves the range, and a time older than
// the range reads as the oldest the range holds.

// msNone is the millisecond time of a zero (unknown) time.
const msNone = math.MinInt32

const (
	// msRebaseAfter: when now is this far past the epoch, the epoch moves
	// to msRebaseTo before now.
	msRebaseAfter = 12 * 24 * time.Hour
	msRebaseTo    = 24 * time.Hour
)

// ms converts Unix ns to the store's millisecond time, rounding up: a
// time kept as "when the lladdr changed" never reads as earlier than it
// was, so evidence from before a change never counts as after it.
func (s *store) ms(ns int64) int32 {
	if ns == 0 {
		return msNone
	}
	if s.epoch == 0 {
		s.epoch = ns
	}
	d := ns - s.epoch
	if d > int64(msRebaseAfter) {
		s.rebase(ns - int64(msRebaseTo))
		d = ns - s.epoch
	}
	m := d / int64(time.Millisecond) // toward zero: up for d < 0
	if d%int64(time.Millisecond) > 0 {
		m++
	}
	return clampMS(m)
}

// ns converts the store's millisecond time back to Unix ns.
func (s *store) ns(m int32) int64 {
	if m == msNone {
		return 0
	}
	return s.epoch + int64(m)*int64(time.Millisecond)
}

func clampMS(m int64) int32 {
	switch {
	case m <= msNone:
		return msNone + 1
	case m > math.MaxInt32:
		return math.MaxInt32
	}
	return int32(m)
}

// rebase moves the epoch forward to epoch and shifts every record's
// millisecond times back by as much: a walk of the slabs, once in
// msRebaseAfter-msRebaseTo (11 days), under the table's lock.
func (s *store) rebase(epoch int64) {
	shift := (epoch - s.epoch) / int64(time.Millisecond)
	s.epoch += shift * int64(time.Millisecond)
	move := func(m *int32) {
		if *m != msNone {
			*m = clampMS(int64(*m) - shift)
		}
	}
	s.each(func(_ uint32, r *rec) bool {
		move(&r.confirm)
		move(&r.used)
		move(&r.llSince)
		return true
	})
}
