package remediate

import (
	"context"

	"github.com/neighwatch/neighwatch/table"
)

// StrategyKick sends RTM_NEWNEIGH with NTF_USE: the kernel re-resolves
// the entry with its own timers.
const StrategyKick Strategy = "kick"

// kickInfo: after the probe. It repairs no move: a kick does nothing to
// a REACHABLE entry (and clears its managed flag).
var kickInfo = strategyInfo{name: StrategyKick, rank: 3, strategy: kickStrategy{}}

type kickStrategy struct{}

func (kickStrategy) applicable(*kit, *table.Entry, bool) bool { return true }

func (kickStrategy) act(ctx context.Context, kt *kit, en *table.Entry, a *attempt) (Outcome, error) {
	if err := kt.actor.Kick(en); err != nil {
		return OutcomeFailed, err
	}
	return kt.verify(ctx, en, a, kt.cfg.KernelTimeout), nil // the kernel's timers
}
