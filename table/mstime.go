package table

import (
	"math"
	"time"
)

// A record keeps its times as int32s from the store's epoch: 16 bytes
// where Unix nanoseconds took 32, at a million entries 16 MB. Most are
// milliseconds (the kernel's own are coarser: jiffies, 4 ms at HZ=250),
// with a range of ±24.8 days around the epoch. The state's start (since)
// is in hundredths of a second, ±248 days: states last long (a STALE or
// PERMANENT entry may keep its state for months), and their age is read
// against thresholds of seconds. The epoch moves forward (rebase) before
// now leaves the milliseconds' range, and a time older than its range
// reads as the oldest the range holds.

// A timebase converts between Unix ns and the records' times, and keeps
// their epoch.
type timebase struct {
	// epoch is the Unix ns that the records' times count from (0 until
	// the first is converted).
	epoch int64
	// shift moves every time kept back by a number of hundredths, when
	// the epoch moves forward by as much.
	shift func(hundredths int64)
}

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
func (s *timebase) ms(ns int64) int32 { return s.units(ns, int64(time.Millisecond)) }

// cs converts Unix ns to the store's time in hundredths of a second,
// rounding down: a state's age never reads as less than it is (so never
// as negative), at most 10 ms more.
func (s *timebase) cs(ns int64) int32 {
	m := s.units(ns, int64(10*time.Millisecond))
	if m != msNone && m != msNone+1 && s.csNS(m) > ns {
		m--
	}
	return m
}

// units converts Unix ns to units of unit ns from the epoch, rounding up;
// msNone for 0. The first time sets the epoch; one past its range moves
// it (times are at most now).
func (s *timebase) units(ns, unit int64) int32 {
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
	m := d / unit // toward zero: up for d < 0
	if d%unit > 0 {
		m++
	}
	return clampMS(m)
}

// csNS converts the store's time in hundredths of a second back to Unix
// ns.
func (s *timebase) csNS(c int32) int64 {
	if c == msNone {
		return 0
	}
	return s.epoch + int64(c)*int64(10*time.Millisecond)
}

// ns converts the store's millisecond time back to Unix ns.
func (s *timebase) ns(m int32) int64 {
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

// rebase moves the epoch forward to about epoch (a whole number of
// hundredths) and has every time kept shifted back by as much: a walk of
// the store's slabs, once in msRebaseAfter-msRebaseTo (11 days), under
// the table's lock.
func (s *timebase) rebase(epoch int64) {
	shift := (epoch - s.epoch) / int64(10*time.Millisecond) // in hundredths
	s.epoch += shift * int64(10*time.Millisecond)
	if s.shift != nil {
		s.shift(shift)
	}
}

// shiftTimes moves every record's times back by shift hundredths: the
// clock's epoch moved forward by as much.
func (s *store) shiftTimes(shift int64) {
	move := func(m *int32, shift int64) {
		if *m != msNone {
			*m = clampMS(int64(*m) - shift)
		}
	}
	s.each(func(_ uint32, r *rec) bool {
		move(&r.since, shift)
		move(&r.confirm, 10*shift)
		move(&r.used, 10*shift)
		move(&r.llSince, 10*shift)
		return true
	})
}
