package remediate

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
)

// limits are the token buckets every probe waits on: one for the node,
// one per interface. Actions, confirmations and move checks share them.
type limits struct {
	global *rate.Limiter
	// waited counts the waits that had to sleep for a token.
	waited *atomic.Uint64

	mu    sync.Mutex
	perIf map[int32]*rate.Limiter
	rate  rate.Limit // per interface
	burst int
}

func newLimits(c *Config, waited *atomic.Uint64) *limits {
	return &limits{
		global: rate.NewLimiter(rate.Limit(c.Rate), c.Burst), waited: waited,
		perIf: make(map[int32]*rate.Limiter), rate: rate.Limit(c.PerInterfaceRate), burst: c.Burst,
	}
}

// set applies new rates to the buckets, those already made included.
func (l *limits) set(c *Config) {
	l.global.SetLimit(rate.Limit(c.Rate))
	l.mu.Lock()
	defer l.mu.Unlock()
	l.rate, l.burst = rate.Limit(c.PerInterfaceRate), c.Burst
	for _, b := range l.perIf {
		b.SetLimit(l.rate)
	}
}

func (l *limits) onInterface(ifindex int32) *rate.Limiter {
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.perIf[ifindex]
	if b == nil {
		b = rate.NewLimiter(l.rate, l.burst)
		l.perIf[ifindex] = b
	}
	return b
}

// wait takes one token from the global and the interface bucket.
func (l *limits) wait(ctx context.Context, ifindex int32) error {
	waited := false
	for _, b := range []*rate.Limiter{l.global, l.onInterface(ifindex)} {
		r := b.Reserve()
		if !r.OK() {
			return errors.New("rate limiter refused")
		}
		if d := r.Delay(); d > 0 {
			waited = true
			t := time.NewTimer(d)
			select {
			case <-ctx.Done():
				t.Stop()
				r.Cancel()
				return ctx.Err()
			case <-t.C:
			}
		}
	}
	if waited {
		l.waited.Add(1)
	}
	return nil
}
