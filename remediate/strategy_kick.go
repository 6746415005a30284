package remediate

import (
	"context"

	"github.com/neighwatch/neighwatch/table"
)

// StrategyKick sends RTM_NEWNEIGH with NTF_USE: the kernel re-resolves
// the entry with its own timers.
const StrategyKick Strategy = "kick"

type kickStrategy struct{}

func (kickStrategy) name() Strategy                              { return StrategyKick }
func (kickStrategy) note() string                                { return "" }
func (kickStrategy) inert(*Config, bool) string                  { return "" }
func (kickStrategy) repairs(bool) bool                           { return true }
func (kickStrategy) applicable(*Engine, *table.Entry, bool) bool { return true }

// repairsMove: a kick does nothing to a REACHABLE entry (and clears its
// managed flag).
func (kickStrategy) repairsMove() bool { return false }

func (kickStrategy) act(ctx context.Context, e *Engine, en *table.Entry, a *attempt) (Outcome, error) {
	if err := e.actor.Kick(en); err != nil {
		return OutcomeFailed, err
	}
	return e.verify(ctx, en, a, e.conf().KernelTimeout), nil // the kernel's timers
}
