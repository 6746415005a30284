package feed

import (
	"sync/atomic"
	"time"
)

// Counters count what the feed did, at one moment.
type Counters struct {
	Transitions       uint64 // silent transitions applied to the table
	TransitionsStale  uint64 // silent transitions netlink had already overtaken
	TransitionsBroken uint64 // ring buffer records that did not decode
	HitsUnknown       uint64 // bypass packets for entries the table does not hold
	SourcePackets     uint64 // packets from a candidate's address at another MAC
	Candidates        int    // stale-long entries watched for source-MAC evidence
	Created           uint64 // creations seen by the tracepoints, looked up
	// Attached says whether the per-packet hooks are attached now, and
	// AttachedTime for how long in all.
	Attached     bool
	AttachedTime time.Duration
}

type counters struct {
	transitions, transitionsStale, transitionsBroken atomic.Uint64
	hitsUnknown, sourcePackets, created              atomic.Uint64
	candidates                                       atomic.Int64
}

func (c *counters) snapshot() Counters {
	return Counters{
		Transitions: c.transitions.Load(), TransitionsStale: c.transitionsStale.Load(),
		TransitionsBroken: c.transitionsBroken.Load(), HitsUnknown: c.hitsUnknown.Load(),
		SourcePackets: c.sourcePackets.Load(), Candidates: int(c.candidates.Load()), Created: c.created.Load(),
	}
}
