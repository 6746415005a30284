package remediate

import (
	"context"
	"fmt"
	"time"

	"github.com/neighwatch/neighwatch/table"
)

// StrategyProbe sends an ARP request or Neighbor Solicitation: unicast
// to the entry's MAC first, as the kernel probes a STALE entry that
// carries traffic, then broadcast (or solicited-node multicast).
const StrategyProbe Strategy = "probe"

type probeStrategy struct{}

func (probeStrategy) name() Strategy                              { return StrategyProbe }
func (probeStrategy) note() string                                { return "" }
func (probeStrategy) inert(*Config, bool) string                  { return "" }
func (probeStrategy) repairs(bool) bool                           { return true }
func (probeStrategy) repairsMove() bool                           { return true }
func (probeStrategy) applicable(*Engine, *table.Entry, bool) bool { return true }

func (p probeStrategy) act(ctx context.Context, e *Engine, en *table.Entry, a *attempt) (Outcome, error) {
	if a.claim != nil {
		return p.disputed(ctx, e, en, a)
	}
	// Unicast first; the broadcast one only if no answer came.
	if _, err := e.actor.Probe(ctx, en, 0, 0); err != nil {
		return OutcomeFailed, err
	}
	if o, done := e.await(ctx, a.ch, en.Key, a.oldMAC, a.needMove, e.conf().ProbeGap, false); done {
		return o, nil
	}
	if _, err := e.actor.Probe(ctx, en, 1, 0); err != nil {
		return OutcomeFailed, err
	}
	o := e.verify(ctx, en, a, e.conf().VerifyTimeout)
	if o != OutcomeFixed && ctx.Err() == nil {
		// Nobody answered at the entry's MAC: evidence that the host is
		// not there (the table keeps it while the entry keeps that MAC).
		e.table.ProbeUnanswered(en.Key, a.oldMAC, time.Now())
	}
	return o, nil
}

// disputed probes an entry whose MAC evidence disputes. An answer from
// that MAC proves nothing: a spoofer whose MAC the kernel took answers
// for the IP too. So the probe goes to everyone (broadcast), and an
// answer from the entry's MAC while another MAC claims the IP is a
// conflict, never a repair: the table records it and keeps the entry
// stuck.
func (probeStrategy) disputed(ctx context.Context, e *Engine, en *table.Entry, a *attempt) (Outcome, error) {
	listen := e.conf().VerifyTimeout
	if en.Owner() == table.OwnerNeighwatch {
		// The kernel ignores answers for a managed entry, so the host's
		// traffic waits for the repoint after the listen: a short one
		// (the evidence watcher still hears a second MAC that answers
		// later, as a conflict).
		listen = min(listen, e.conf().ProbeGap)
	}
	answered, err := e.actor.Probe(ctx, en, 1, listen)
	if err != nil {
		return OutcomeFailed, err
	}
	e.log.Debug("broadcast probe answered", "interface", e.table.LinkName(en.Ifindex), "ip", en.Addr, "claimed", a.claim.String(), "answers", fmt.Sprint(answered))
	if o, ok := e.judgeAnswers(en, answered); ok {
		return o, nil
	}
	// The entry's MAC did not answer, so only a new MAC repairs it: the
	// kernel may still confirm it at the old one (a DELAY entry confirmed
	// within delay_first_probe_time turns REACHABLE without a probe), and
	// that is neither a repair nor a spoofer.
	a.needMove = true
	if len(answered) == 1 && en.Owner() == table.OwnerNeighwatch {
		// The kernel does not take an ARP or NDP answer with a new
		// address for a managed entry (it follows only its own
		// re-validation): give it the proven address.
		if err := e.repoint(en, answered[0]); err != nil {
			return OutcomeFailed, err
		}
		return e.verify(ctx, en, a, e.conf().VerifyTimeout), nil
	}
	// Another MAC answered alone (the kernel took it), or nobody did.
	return e.verify(ctx, en, a, e.conf().ProbeGap), nil
}
