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

func (swapStrategy) inert(_ *Config, swapPossible bool) string {
	if !swapPossible {
		return "it needs --datapath.mode=auto"
	}
	return ""
}

func (swapStrategy) repairs(swapPossible bool) bool { return swapPossible }

// repairsMove: a swap changes how packets reach the entry, not its MAC.
func (swapStrategy) repairsMove() bool { return false }

// applicable: the entry gets bypass traffic, and some datapath that
// feeds its interface can swap.
func (swapStrategy) applicable(e *Engine, en *table.Entry, _ bool) bool {
	return e.swapper != nil && en.Observed().BypassInState > 0 && e.swapper.CanSwap(en.Ifindex)
}

func (swapStrategy) act(ctx context.Context, e *Engine, en *table.Entry, a *attempt) (Outcome, error) {
	if err := e.swapper.Swap(en.Ifindex); err != nil {
		return OutcomeFailed, err
	}
	e.c.swaps.Add(1)
	return e.verify(ctx, en, a, e.conf().KernelTimeout), nil // the kernel's timers
}
