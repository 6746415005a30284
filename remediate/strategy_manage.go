package remediate

import (
	"context"

	"github.com/neighwatch/neighwatch/table"
)

// StrategyManage makes the entry managed (NTF_EXT_MANAGED, kernel
// 5.16+), marked with table.ProtocolNeighwatch: the kernel keeps it
// fresh itself, whatever path the traffic takes. It prevents; it does
// not repair. The Manager keeps what it made managed.
const StrategyManage Strategy = "manage"

// manageInfo: first where the kernel keeps managed entries (after
// swap). It prevents, and repairs nothing.
var manageInfo = strategyInfo{name: StrategyManage, note: "only on Linux 5.16 and later", rank: 1, needs: needManaged,
	prevents: true, strategy: manageStrategy{}}

type manageStrategy struct{}

// applicable: prevention. An entry already stuck has evidence that its
// host moved, and a probe finds it in one round trip where the kernel's
// re-validation takes its timers (BENCHMARKS.md).
func (manageStrategy) applicable(kt *kit, en *table.Entry, count bool) bool {
	return en.Class() != table.ClassStuck && kt.managed.canManage(en, false, count)
}

func (manageStrategy) act(ctx context.Context, kt *kit, en *table.Entry, a *attempt) (Outcome, error) {
	if !kt.managed.canManage(en, true, true) {
		return "", nil // the cap filled while this one waited
	}
	o, err := OutcomeFailed, kt.actor.Manage(en)
	if err == nil {
		o = kt.awaitManaged(ctx, a.ch, en.Key)
	}
	if o == OutcomeManaged {
		kt.managed.own(en.Key)
	} else {
		kt.managed.disown(en.Key)
	}
	return o, err
}
