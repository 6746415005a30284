package remediate

import (
	"context"

	"github.com/neighwatch/neighwatch/table"
)

// StrategyFlush deletes the entry: the next packet resolves it afresh.
const StrategyFlush Strategy = "flush"

// flushInfo: the last resort; a new resolution repairs a move too.
var flushInfo = strategyInfo{name: StrategyFlush, rank: 4, repairsMove: true, strategy: flushStrategy{}}

type flushStrategy struct{}

func (flushStrategy) applicable(*kit, *table.Entry, bool) bool { return true }

func (flushStrategy) act(ctx context.Context, kt *kit, en *table.Entry, a *attempt) (Outcome, error) {
	if err := kt.actor.Flush(en); err != nil {
		return OutcomeFailed, err
	}
	return kt.verify(ctx, en, a, kt.cfg.VerifyTimeout), nil
}
