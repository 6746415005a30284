package remediate

import (
	"context"

	"github.com/neighwatch/neighwatch/table"
)

// StrategySwap moves the datapath that feeds the entry's interface from
// legacy (bpf_redirect) to neigh (bpf_redirect_neigh), which lets the
// kernel resolve the neighbour.
const StrategySwap Strategy = "swap"

type swapStrategy struct{}

func (swapStrategy) name() Strategy { return StrategySwap }
func (swapStrategy) note() string   { return "first with --datapath.mode=auto" }

// rank: first where the datapath can swap (the agent runs with
// --datapath.mode=auto); not a default otherwise.
func (swapStrategy) rank(_, swapPossible bool) (int, bool) { return 0, swapPossible }

func (swapStrategy) inert(_ *Config, swapPossible bool) (string, bool) {
	if !swapPossible {
		return "it needs a datapath that may swap (the agent's auto datapath mode)", false
	}
	return "", false
}

func (swapStrategy) prevents() bool                         { return false }
func (swapStrategy) repairs(swapPossible bool) bool         { return swapPossible }
func (swapStrategy) feature(*Config) (string, bool, string) { return "", false, "" }

// repairsMove: a swap changes how packets reach the entry, not its MAC.
func (swapStrategy) repairsMove() bool { return false }

// applicable: the entry gets bypass traffic, and some datapath that
// feeds its interface can swap.
func (swapStrategy) applicable(k *kit, en *table.Entry, _ bool) bool {
	return k.swapper != nil && en.Observed().BypassInState > 0 && k.swapper.CanSwap(en.Ifindex)
}

func (swapStrategy) act(ctx context.Context, k *kit, en *table.Entry, a *attempt) (Outcome, error) {
	if err := k.swapper.Swap(en.Ifindex); err != nil {
		return OutcomeFailed, err
	}
	k.swaps.Add(1)
	return k.verify(ctx, en, a, k.cfg.KernelTimeout), nil // the kernel's timers
}
