package remediate

import (
	"context"

	"github.com/neighwatch/neighwatch/table"
)

// StrategyFlush deletes the entry: the next packet resolves it afresh.
const StrategyFlush Strategy = "flush"

type flushStrategy struct{}

func (flushStrategy) name() Strategy                           { return StrategyFlush }
func (flushStrategy) note() string                             { return "" }
func (flushStrategy) rank(bool, bool) (int, bool)              { return 4, true } // the last resort
func (flushStrategy) inert(*Config, bool) (string, bool)       { return "", false }
func (flushStrategy) prevents() bool                           { return false }
func (flushStrategy) repairs(bool) bool                        { return true }
func (flushStrategy) repairsMove() bool                        { return true }
func (flushStrategy) feature(*Config) (string, bool, string)   { return "", false, "" }
func (flushStrategy) applicable(*kit, *table.Entry, bool) bool { return true }

func (flushStrategy) act(ctx context.Context, k *kit, en *table.Entry, a *attempt) (Outcome, error) {
	if err := k.actor.Flush(en); err != nil {
		return OutcomeFailed, err
	}
	return k.verify(ctx, en, a, k.cfg.VerifyTimeout), nil
}
