package remediate

import (
	"context"

	"github.com/neighwatch/neighwatch/table"
)

// StrategyKick sends RTM_NEWNEIGH with NTF_USE: the kernel re-resolves
// the entry with its own timers.
const StrategyKick Strategy = "kick"

type kickStrategy struct{}

func (kickStrategy) name() Strategy                           { return StrategyKick }
func (kickStrategy) note() string                             { return "" }
func (kickStrategy) rank(bool, bool) (int, bool)              { return 3, true }
func (kickStrategy) inert(*Config, bool) (string, bool)       { return "", false }
func (kickStrategy) prevents() bool                           { return false }
func (kickStrategy) repairs(bool) bool                        { return true }
func (kickStrategy) feature(*Config) (string, bool, string)   { return "", false, "" }
func (kickStrategy) applicable(*kit, *table.Entry, bool) bool { return true }

// repairsMove: a kick does nothing to a REACHABLE entry (and clears its
// managed flag).
func (kickStrategy) repairsMove() bool { return false }

func (kickStrategy) act(ctx context.Context, k *kit, en *table.Entry, a *attempt) (Outcome, error) {
	if err := k.actor.Kick(en); err != nil {
		return OutcomeFailed, err
	}
	return k.verify(ctx, en, a, k.cfg.KernelTimeout), nil // the kernel's timers
}
