package evidence

import (
	"context"
	"errors"
	"net"
	"os"
	"sync/atomic"
	"time"

	"github.com/jpillora/backoff"

	"github.com/mdlayher/packet"
	"golang.org/x/sys/unix"
)

// The listeners: one packet socket per interface and protocol, opened and
// closed by Run's worker as the links come and go, each read by a
// goroutine that hands what it parses to Observe. This is the watcher's
// I/O; what an observation means is decided in watcher.go and hosts.go.

type listenerKey struct {
	ifindex int32
	ndp     bool
}

// listener is one packet socket and its reader goroutine.
type listener struct {
	conn    net.PacketConn
	link    Link
	done    chan struct{}
	parse   func(frame []byte, own net.HardwareAddr) (Observation, error)
	closing atomic.Bool
}

// close stops the listener; its reader sees closing and exits at once.
func (l *listener) close() {
	l.closing.Store(true)
	l.conn.Close()
}

// retry is when a failed listener start is tried again.
type retry struct {
	at      time.Time
	backoff time.Duration // the last wait
	tries   float64       // failures in a row
}

// retryBackoff paces the restarts of a listener that failed: a second,
// then up to twice as long each time in a row, at most a minute,
// jittered.
var retryBackoff = backoff.Backoff{Min: time.Second, Max: time.Minute, Factor: 2, Jitter: true}

// next schedules the retry after one more failure.
func (r *retry) next(now time.Time) {
	r.backoff = retryBackoff.ForAttempt(r.tries)
	r.tries++
	r.at = now.Add(r.backoff)
}

// retryLocked counts one more failure of a listener and schedules its
// next start; it returns the wait. Call it with w.mu held.
func (w *Watcher) retryLocked(k listenerKey) time.Duration {
	w.failures.Add(1)
	r := w.retries[k]
	r.next(time.Now())
	w.retries[k] = r
	return r.backoff
}

// poke wakes the worker.
func (w *Watcher) poke() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// Run listens until ctx ends.
func (w *Watcher) Run(ctx context.Context) error {
	w.mu.Lock()
	w.running = true
	for idx := range w.links {
		w.dirty[idx] = true
	}
	w.mu.Unlock()
	w.reconcile(ctx)
	close(w.ready)
	sweep := time.NewTicker(max(w.cfg.HostTTL/10, time.Second))
	defer sweep.Stop()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		// Sleep until woken, the next retry is due, or ctx ends.
		w.mu.Lock()
		next := time.Hour
		for _, r := range w.retries {
			next = min(next, time.Until(r.at))
		}
		w.mu.Unlock()
		timer.Reset(max(next, 0))
		select {
		case <-ctx.Done():
			w.mu.Lock()
			w.running = false
			ls := w.listeners
			w.listeners = make(map[listenerKey]*listener)
			w.mu.Unlock()
			for _, l := range ls {
				l.close()
				<-l.done
			}
			return nil
		case <-w.wake:
		case <-timer.C:
		case <-sweep.C:
			w.expire(time.Now())
			continue
		}
		w.reconcile(ctx)
	}
}

// reconcile opens the listeners wanted and not running, and closes those
// running and not wanted, for every link marked dirty or due a retry.
func (w *Watcher) reconcile(ctx context.Context) {
	now := time.Now()
	w.mu.Lock()
	var todo []int32
	for idx := range w.dirty {
		todo = append(todo, idx)
	}
	clear(w.dirty)
	for k, r := range w.retries {
		if !r.at.After(now) {
			todo = append(todo, k.ifindex) // reconcileLink starts whichever is missing
		}
	}
	w.mu.Unlock()
	for _, idx := range todo {
		if ctx.Err() != nil {
			return
		}
		w.reconcileLink(idx)
	}
}

func (w *Watcher) reconcileLink(idx int32) {
	for _, v6 := range []bool{false, true} {
		k := listenerKey{idx, v6}
		w.mu.Lock()
		want, wanted := w.links[idx]
		have := w.listeners[k]
		stale := have != nil && (!wanted || !have.link.same(want)) // not wanted, or the link changed
		if stale {
			delete(w.listeners, k)
		}
		start := wanted && (have == nil || stale) && w.disabled == nil && w.running
		w.mu.Unlock()
		if stale {
			w.collectDrops(idx, have)
			have.close()
		}
		if !start {
			continue
		}
		l, err := openListener(w.cfg.NetNS, idx, want, v6)
		w.mu.Lock()
		cur, still := w.links[idx]
		switch {
		case err != nil:
			if still {
				w.failedLocked(k, want, err)
			}
		case !w.running || w.listeners[k] != nil || !still || !cur.same(want):
			l.conn.Close() // changed while it opened: the next pass opens what is wanted now
		default:
			w.countersLocked(idx)
			w.listeners[k] = l
			if r, ok := w.retries[k]; ok {
				delete(w.retries, k)
				w.log.Info("listener started after failures", "interface", want.Name, "ndp", v6, "backoff", r.backoff)
			}
			go w.read(k, want.HardwareAddr, l)
		}
		w.mu.Unlock()
	}
}

// failedLocked handles a listener that did not start: an interface that
// is gone needs nothing (its deletion follows); a refused packet socket
// turns the listeners off; anything else (EMFILE, ENOMEM, ...) is counted
// and retried with backoff.
func (w *Watcher) failedLocked(k listenerKey, li Link, err error) {
	what := "ARP"
	if k.ndp {
		what = "NDP"
	}
	switch {
	case errors.Is(err, unix.ENODEV) || errors.Is(err, unix.ENXIO):
		return
	case errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES):
		if w.disabled == nil {
			w.disabled = errors.New("ARP and NDP listeners need CAP_NET_RAW (run as root or grant the capability)")
			w.log.Warn("ARP listener disabled: opening a packet socket was refused; mismatch detection is off", "interface", li.Name, "err", err)
		}
		return
	}
	w.log.Warn(what+" listener not started; retrying", "interface", li.Name, "err", err, "retry_in", w.retryLocked(k))
}

// collectDrops adds what the kernel dropped on l's socket since the last
// read (reading resets the kernel's count).
func (w *Watcher) collectDrops(idx int32, l *listener) {
	st, ok := l.conn.(interface{ Stats() (*packet.Stats, error) })
	if !ok {
		return
	}
	s, err := st.Stats()
	if err != nil || s.Drops == 0 {
		return
	}
	w.mu.Lock()
	if c := w.counters[idx]; c != nil {
		c.drops.Add(uint64(s.Drops))
	}
	w.mu.Unlock()
}

// read runs one listener until it is closed or its socket fails for good.
func (w *Watcher) read(k listenerKey, own net.HardwareAddr, l *listener) {
	defer close(l.done)
	buf := make([]byte, 2048)
	failures := 0
	for {
		n, _, err := l.conn.ReadFrom(buf)
		if err != nil {
			if l.closing.Load() {
				return
			}
			// A packet socket reports ENETDOWN once when its interface is
			// or goes down, and works again when it comes up.
			if errors.Is(err, unix.ENETDOWN) {
				continue
			}
			if failures++; failures < 100 && !errors.Is(err, net.ErrClosed) && !errors.Is(err, os.ErrClosed) && !errors.Is(err, unix.EBADF) {
				time.Sleep(10 * time.Millisecond)
				continue
			}
			w.mu.Lock()
			if w.listeners[k] == l {
				delete(w.listeners, k)
				// Start it again, after a pause.
				w.log.Warn("listener failed; restarting", "ifindex", k.ifindex, "err", err, "retry_in", w.retryLocked(k))
			}
			w.mu.Unlock()
			l.conn.Close()
			w.poke()
			return
		}
		failures = 0
		o, err := l.parse(buf[:n], own)
		if err != nil {
			if !errors.Is(err, ErrOwnFrame) && !errors.Is(err, ErrNoSenderIP) && !errors.Is(err, ErrNoLinkLayer) {
				w.malformed.Add(1)
			}
			continue
		}
		w.Observe(k.ifindex, o, time.Now())
	}
}
