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

// probeInfo: the first repair where nothing prevents; an answer from a
// new MAC repairs a move.
var probeInfo = strategyInfo{name: StrategyProbe, rank: 2, repairsMove: true, strategy: probeStrategy{}}

type probeStrategy struct{}

func (probeStrategy) applicable(*kit, *table.Entry, bool) bool { return true }

func (p probeStrategy) act(ctx context.Context, kt *kit, en *table.Entry, a *attempt) (Outcome, error) {
	if a.claim != nil {
		return p.disputed(ctx, kt, en, a)
	}
	// Unicast first; the broadcast one only if no answer came.
	if _, err := kt.actor.Probe(ctx, en, 0, 0); err != nil {
		return OutcomeFailed, err
	}
	if o, done := kt.await(ctx, a.ch, en.Key, a.oldMAC, a.needMove, kt.cfg.ProbeGap, false); done {
		return o, nil
	}
	if _, err := kt.actor.Probe(ctx, en, 1, 0); err != nil {
		return OutcomeFailed, err
	}
	o := kt.verify(ctx, en, a, kt.cfg.VerifyTimeout)
	if o != OutcomeFixed && ctx.Err() == nil {
		// Nobody answered at the entry's MAC: evidence that the host is
		// not there (the table keeps it while the entry keeps that MAC).
		kt.table.ProbeUnanswered(en.Key, a.oldMAC, time.Now())
	}
	return o, nil
}

// disputed probes an entry whose MAC evidence disputes. An answer from
// that MAC proves nothing: a spoofer whose MAC the kernel took answers
// for the IP too. So the probe goes to everyone (broadcast), and an
// answer from the entry's MAC while another MAC claims the IP is a
// conflict, never a repair: the table records it and keeps the entry
// stuck.
func (probeStrategy) disputed(ctx context.Context, kt *kit, en *table.Entry, a *attempt) (Outcome, error) {
	listen := kt.cfg.VerifyTimeout
	if en.Owner() == table.OwnerNeighwatch {
		// The kernel ignores answers for a managed entry, so the host's
		// traffic waits for the repoint after the listen: a short one
		// (the evidence watcher still hears a second MAC that answers
		// later, as a conflict).
		listen = min(listen, kt.cfg.ProbeGap)
	}
	answered, err := kt.actor.Probe(ctx, en, 1, listen)
	if err != nil {
		return OutcomeFailed, err
	}
	kt.log.Debug("broadcast probe answered", "interface", kt.table.LinkName(en.Ifindex), "ip", en.Addr, "claimed", a.claim.String(), "answers", fmt.Sprint(answered))
	if o, ok := kt.judgeAnswers(en, answered); ok {
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
		if err := kt.repoint(en, answered[0]); err != nil {
			return OutcomeFailed, err
		}
		return kt.verify(ctx, en, a, kt.cfg.VerifyTimeout), nil
	}
	// Another MAC answered alone (the kernel took it), or nobody did.
	return kt.verify(ctx, en, a, kt.cfg.ProbeGap), nil
}
