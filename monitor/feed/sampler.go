package feed

import "time"

// sampler decides when the per-packet hooks are attached: never while no
// entry needs watching, else for window out of every period, starting at
// once when the need appears. Something new to watch (an entry that just
// turned stale-long) opens a window early, without waiting for the
// period's: early windows spend a budget that grows by window every
// period and holds at most earlyBurst windows, so the hooks are attached
// at most twice window/period of the time, however often entries turn.
type sampler struct {
	window, period time.Duration
	on             bool
	until          time.Time // the end of the current window
	next           time.Time // the start of the period's next window
	credit         time.Duration
	counted        time.Time // when credit was last grown
}

// earlyBurst is how many early windows the budget holds: a node where a
// few entries turn stale-long close together has each watched at once.
const earlyBurst = 2

// step returns whether the hooks should be attached at now, given whether
// any entry needs watching and whether something new does (fresh), and
// when to ask again at the latest.
func (s *sampler) step(now time.Time, need, fresh bool) (on bool, wake time.Duration) {
	const recheck = time.Second // how soon a new need is noticed
	s.grow(now)
	switch {
	case !need:
		s.on, s.next = false, time.Time{}
		return false, recheck
	case s.window >= s.period:
		s.on = true
		return true, recheck
	case s.on && now.Before(s.until):
		return true, s.until.Sub(now)
	case s.on:
		s.on = false
	}
	switch {
	case !now.Before(s.next):
		s.on, s.until, s.next = true, now.Add(s.window), now.Add(s.period)
		return true, s.window
	case fresh && s.credit >= s.window:
		// An early window; the period's next one stays where it was.
		s.credit -= s.window
		s.on, s.until = true, now.Add(s.window)
		return true, s.window
	}
	return false, min(s.next.Sub(now), recheck)
}

// grow adds to the early windows' budget window for every period since
// it was last grown, up to earlyBurst windows.
func (s *sampler) grow(now time.Time) {
	if s.counted.IsZero() {
		s.counted, s.credit = now, time.Duration(earlyBurst)*s.window
		return
	}
	if s.period > 0 && now.After(s.counted) {
		s.credit += time.Duration(float64(now.Sub(s.counted)) * float64(s.window) / float64(s.period))
		s.credit = min(s.credit, time.Duration(earlyBurst)*s.window)
	}
	s.counted = now
}
