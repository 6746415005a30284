package remediate

import (
	"context"

	"github.com/neighwatch/neighwatch/table"
)

// StrategySwap moves the datapath that feeds the entry's interface from
// legacy (bpf_redirect) to neigh (bpf_redirect_neigh), which lets the
// kernel resolve the neighbour.
const StrategySwap Strategy = "swap"

// swapInfo: first where the datapath can swap (the agent runs with
// --datapath.mode=auto); not a default otherwise. It repairs no move: a
// swap changes how packets reach the entry, not its MAC.
var swapInfo = strategyInfo{name: StrategySwap, note: "first with --datapath.mode=auto", rank: 0, needs: needSwap, strategy: swapStrategy{}}

type swapStrategy struct{}

// applicable: the entry gets bypass traffic, and some datapath that
// feeds its interface can swap.
func (swapStrategy) applicable(kt *kit, en *table.Entry, _ bool) bool {
	return kt.swapper != nil && en.Observed().BypassInState > 0 && kt.swapper.CanSwap(en.Ifindex)
}

func (swapStrategy) act(ctx context.Context, kt *kit, en *table.Entry, a *attempt) (Outcome, error) {
	if err := kt.swapper.Swap(en.Ifindex); err != nil {
		return OutcomeFailed, err
	}
	kt.swaps.Add(1)
	return kt.verify(ctx, en, a, kt.cfg.KernelTimeout), nil // the kernel's timers
}
