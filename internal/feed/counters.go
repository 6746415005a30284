package feed

import "sync/atomic"

// Counters count what the feed did, at one moment.
type Counters struct {
	Transitions       uint64 // silent transitions applied to the table
	TransitionsStale  uint64 // silent transitions netlink had already overtaken
	TransitionsBroken uint64 // ring buffer records that did not decode
	HitsApplied       uint64 // bypass packets added to entries of the table
	HitsUnknown       uint64 // bypass packets for entries the table does not hold
}

type counters struct {
	transitions, transitionsStale, transitionsBroken atomic.Uint64
	hitsApplied, hitsUnknown                         atomic.Uint64
}

func (c *counters) snapshot() Counters {
	return Counters{
		Transitions: c.transitions.Load(), TransitionsStale: c.transitionsStale.Load(),
		TransitionsBroken: c.transitionsBroken.Load(),
		HitsApplied:       c.hitsApplied.Load(), HitsUnknown: c.hitsUnknown.Load(),
	}
}
