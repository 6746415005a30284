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

	// sleep waits d for a token, or for ctx: a timer, which a test
	// replaces to hold a waiter where it wants it.
	sleep func(ctx context.Context, d time.Duration) error

	mu    sync.Mutex
	perIf map[int32]*rate.Limiter
	rate  rate.Limit // per interface
	burst int
}

func newLimits(c *Config, waited *atomic.Uint64) *limits {
	return &limits{
		global: rate.NewLimiter(rate.Limit(c.Rate), c.Burst), waited: waited, sleep: sleepFor,
		perIf: make(map[int32]*rate.Limiter), rate: rate.Limit(c.PerInterfaceRate), burst: c.Burst,
	}
}

// sleepFor waits d, or until ctx ends.
func sleepFor(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
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
			if err := l.sleep(ctx, d); err != nil {
				r.Cancel()
				return err
			}
		}
	}
	if waited {
		l.waited.Add(1)
	}
	return nil
}
