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

// rank: first where the kernel keeps managed entries (after swap).
func (manageStrategy) rank(manageSupported, _ bool) (int, bool) { return 1, manageSupported }

func (manageStrategy) inert(c *Config, _ bool) (string, bool) {
	if !c.Manage.Supported {
		return "this kernel keeps no managed neighbours (Linux 5.16+)", true
	}
	return "", false
}

func (manageStrategy) prevents() bool    { return true }
func (manageStrategy) repairs(bool) bool { return false }
func (manageStrategy) repairsMove() bool { return false }

func (manageStrategy) feature(c *Config) (string, bool, string) {
	return "managed", c.Manage.Supported, "the kernel keeps no managed neighbours (NTF_EXT_MANAGED needs Linux 5.16)"
}

// applicable: prevention. An entry already stuck has evidence that its
// host moved, and a probe finds it in one round trip where the kernel's
// re-validation takes its timers (BENCHMARKS.md).
func (manageStrategy) applicable(k *kit, en *table.Entry, count bool) bool {
	return en.Class() != table.ClassStuck && k.managed.canManage(en, false, count)
}

func (manageStrategy) act(ctx context.Context, k *kit, en *table.Entry, a *attempt) (Outcome, error) {
	if !k.managed.canManage(en, true, true) {
		return "", nil // the cap filled while this one waited
	}
	o, err := OutcomeFailed, k.actor.Manage(en)
	if err == nil {
		o = k.awaitManaged(ctx, a.ch, en.Key)
	}
	if o == OutcomeManaged {
		k.managed.own(en.Key)
	} else {
		k.managed.disown(en.Key)
	}
	return o, err
}
