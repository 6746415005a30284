package feed

import "time"

// sampler decides when the per-packet hooks are attached: never while no
// entry needs watching, else for window out of every period, starting at
// once when the need appears.
type sampler struct {
	window, period time.Duration
	on             bool
	until          time.Time // the end of the current window
	next           time.Time // the start of the next window
}

// step returns whether the hooks should be attached at now, given whether
// any entry needs watching, and when to ask again at the latest.
func (s *sampler) step(now time.Time, need bool) (on bool, wake time.Duration) {
	const recheck = time.Second // how soon a new need is noticed
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
	case !now.Before(s.next):
		s.on, s.until, s.next = true, now.Add(s.window), now.Add(s.period)
		return true, s.window
	}
	return false, min(s.next.Sub(now), recheck)
}
