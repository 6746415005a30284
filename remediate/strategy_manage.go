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

type manageStrategy struct{}

func (manageStrategy) name() Strategy { return StrategyManage }
func (manageStrategy) note() string   { return "only on Linux 5.16 and later" }

func (manageStrategy) inert(c *Config, _ bool) string {
	if !c.Manage.Supported {
		return "this kernel keeps no managed neighbours (Linux 5.16+)"
	}
	return ""
}

func (manageStrategy) repairs(bool) bool { return false }
func (manageStrategy) repairsMove() bool { return false }

// applicable: prevention. An entry already stuck has evidence that its
// host moved, and a probe finds it in one round trip where the kernel's
// re-validation takes its timers (BENCHMARKS.md).
func (manageStrategy) applicable(e *Engine, en *table.Entry, count bool) bool {
	return en.Class() != table.ClassStuck && e.managed.canManage(en, false, count)
}

func (manageStrategy) act(ctx context.Context, e *Engine, en *table.Entry, a *attempt) (Outcome, error) {
	if !e.managed.canManage(en, true, true) {
		return "", nil // the cap filled while this one waited
	}
	o, err := OutcomeFailed, e.actor.Manage(en)
	if err == nil {
		o = e.awaitManaged(ctx, a.ch, en.Key)
	}
	if o != OutcomeManaged {
		e.managed.disown(en.Key)
	}
	return o, err
}
