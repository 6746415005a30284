package agent

import (
	"context"
	"sync"
	"time"

	"github.com/neighwatch/neighwatch/metrics"
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

// reloader applies reloaded configurations live, each option by the
// part that owns it (live: the table's stale threshold, remediation's
// settings). A failed reload keeps what runs.
func (a *agent) reloader(reloads <-chan Reload, live []func(Config)) func(context.Context) error {
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
				for _, apply := range live {
					apply(r.Config)
				}
				a.config.set(true)
			}
		}
	}
}
