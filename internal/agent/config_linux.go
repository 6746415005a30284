package agent

import (
	"context"
	"sync"
	"time"

	"github.com/neighwatch/neighwatch/metrics"
	"github.com/neighwatch/neighwatch/remediate"
)

// configState is the outcome of the last configuration reload, for
// metrics: the start counts as a successful load.
type configState struct {
	mu sync.Mutex
	ok bool
	at time.Time // last success
}

var _ metrics.ConfigSource = (*configState)(nil)

// LastReload implements metrics.ConfigSource.
func (c *configState) LastReload() (bool, time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ok, c.at
}

func (c *configState) set(ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ok = ok
	if ok {
		c.at = time.Now()
	}
}

// reloader applies reloaded configurations live: the stale threshold
// and everything remediation takes (mode, scope, strategies, filters,
// rates, timeouts, manage settings). A failed reload keeps what runs.
func (a *agent) reloader(reloads <-chan Reload, rem *remediation) func(context.Context) error {
	return func(ctx context.Context) error {
		for {
			select {
			case <-ctx.Done():
				return nil
			case r := <-reloads:
				if r.Err != nil {
					a.config.set(false)
					continue
				}
				a.table.SetThreshold(r.Config.StaleThreshold)
				rc := r.Config.Remediation
				if rem.cannotAct != nil && rc.Mode == remediate.ModeOn {
					a.log.Warn("reloaded configuration asks for remediation on, but " + rem.cannotAct.Error() + ": dry-run instead")
					rc.Mode = remediate.ModeDryRun
				}
				rem.engine.Reconfigure(rc)
				rem.engine.SetModeSource(r.ModeSource)
				a.config.set(true)
			}
		}
	}
}
