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

func (probeStrategy) name() Strategy                           { return StrategyProbe }
func (probeStrategy) note() string                             { return "" }
func (probeStrategy) rank(bool, bool) (int, bool)              { return 2, true }
func (probeStrategy) inert(*Config, bool) (string, bool)       { return "", false }
func (probeStrategy) prevents() bool                           { return false }
func (probeStrategy) repairs(bool) bool                        { return true }
func (probeStrategy) repairsMove() bool                        { return true }
func (probeStrategy) feature(*Config) (string, bool, string)   { return "", false, "" }
func (probeStrategy) applicable(*kit, *table.Entry, bool) bool { return true }

func (p probeStrategy) act(ctx context.Context, k *kit, en *table.Entry, a *attempt) (Outcome, error) {
	if a.claim != nil {
		return p.disputed(ctx, k, en, a)
	}
	// Unicast first; the broadcast one only if no answer came.
	if _, err := k.actor.Probe(ctx, en, 0, 0); err != nil {
		return OutcomeFailed, err
	}
	if o, done := k.await(ctx, a.ch, en.Key, a.oldMAC, a.needMove, k.cfg.ProbeGap, false); done {
		return o, nil
	}
	if _, err := k.actor.Probe(ctx, en, 1, 0); err != nil {
		return OutcomeFailed, err
	}
	o := k.verify(ctx, en, a, k.cfg.VerifyTimeout)
	if o != OutcomeFixed && ctx.Err() == nil {
		// Nobody answered at the entry's MAC: evidence that the host is
		// not there (the table keeps it while the entry keeps that MAC).
		k.table.ProbeUnanswered(en.Key, a.oldMAC, time.Now())
	}
	return o, nil
}

// disputed probes an entry whose MAC evidence disputes. An answer from
// that MAC proves nothing: a spoofer whose MAC the kernel took answers
// for the IP too. So the probe goes to everyone (broadcast), and an
// answer from the entry's MAC while another MAC claims the IP is a
// conflict, never a repair: the table records it and keeps the entry
// stuck.
func (probeStrategy) disputed(ctx context.Context, k *kit, en *table.Entry, a *attempt) (Outcome, error) {
	listen := k.cfg.VerifyTimeout
	if en.Owner() == table.OwnerNeighwatch {
		// The kernel ignores answers for a managed entry, so the host's
		// traffic waits for the repoint after the listen: a short one
		// (the evidence watcher still hears a second MAC that answers
		// later, as a conflict).
		listen = min(listen, k.cfg.ProbeGap)
	}
	answered, err := k.actor.Probe(ctx, en, 1, listen)
	if err != nil {
		return OutcomeFailed, err
	}
	k.log.Debug("broadcast probe answered", "interface", k.table.LinkName(en.Ifindex), "ip", en.Addr, "claimed", a.claim.String(), "answers", fmt.Sprint(answered))
	if o, ok := k.judgeAnswers(en, answered); ok {
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
		if err := k.repoint(en, answered[0]); err != nil {
			return OutcomeFailed, err
		}
		return k.verify(ctx, en, a, k.cfg.VerifyTimeout), nil
	}
	// Another MAC answered alone (the kernel took it), or nobody did.
	return k.verify(ctx, en, a, k.cfg.ProbeGap), nil
}
