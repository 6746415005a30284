package remediate

import (
	"context"

	"github.com/neighwatch/neighwatch/table"
)

// StrategyFlush deletes the entry: the next packet resolves it afresh.
const StrategyFlush Strategy = "flush"

type flushStrategy struct{}

func (flushStrategy) name() Strategy                              { return StrategyFlush }
func (flushStrategy) note() string                                { return "" }
func (flushStrategy) inert(*Config, bool) string                  { return "" }
func (flushStrategy) repairs(bool) bool                           { return true }
func (flushStrategy) repairsMove() bool                           { return true }
func (flushStrategy) applicable(*Engine, *table.Entry, bool) bool { return true }

func (flushStrategy) act(ctx context.Context, e *Engine, en *table.Entry, a *attempt) (Outcome, error) {
	if err := e.actor.Flush(en); err != nil {
		return OutcomeFailed, err
	}
	return e.verify(ctx, en, a, e.conf().VerifyTimeout), nil
}
