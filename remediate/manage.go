package remediate

import (
	"context"
	"time"

	"github.com/neighwatch/neighwatch/table"
)

// ManageConfig configures the manage strategy and the release of what it
// managed.
type ManageConfig struct {
	// Supported: the kernel keeps managed entries (Linux 5.16+). Without
	// it the manage strategy is never applicable.
	Supported bool
	// Max caps the entries neighwatch manages at once; more are refused
	// (counted) and left to the next strategy.
	Max int
	// Idle releases an entry that saw no bypass traffic for this long
	// (0: never).
	Idle time.Duration
	// FailedTimeout releases an entry that stayed FAILED (or INCOMPLETE)
	// this long: its host is gone, not moved.
	FailedTimeout time.Duration
	// ReleaseOnExit releases every managed entry when remediation is
	// switched off and when the agent shuts down cleanly.
	ReleaseOnExit bool
	// Interval is how often releases are considered.
	Interval time.Duration
}

// Release reasons.
const (
	ReleaseIdle      = "idle"      // no bypass traffic for ManageConfig.Idle
	ReleaseFailed    = "failed"    // FAILED past ManageConfig.FailedTimeout
	ReleaseUnwatched = "unwatched" // its interface left the watched set
	ReleaseOff       = "off"       // remediation switched off
	ReleaseExit      = "exit"      // clean shutdown
)

// ReleaseReasons lists them, for pre-created metric series.
func ReleaseReasons() []string {
	return []string{ReleaseIdle, ReleaseFailed, ReleaseUnwatched, ReleaseOff, ReleaseExit}
}

// owned is what the engine remembers of an entry it manages.
type owned struct {
	since       int64 // Unix ns when managed (or adopted)
	failedSince int64 // Unix ns since it is not valid; 0 while valid
	pending     bool  // reserved under the cap, being made managed
	// For the recovery time: the MAC it was last REACHABLE at, and when
	// evidence or the kernel's re-validation first doubted it since.
	mac       string
	doubtedAt int64
}

// setOwned and delOwned keep the map (under mmu) and the lock-free key
// set the event filter reads (it runs under the table's lock, which
// maintain takes while holding mmu) in step.
func (e *Engine) setOwned(k table.Key, o *owned) {
	if _, ok := e.owned[k]; !ok {
		e.ownedN.Add(1)
	}
	e.owned[k] = o
	e.ownedKeys.Store(k, struct{}{})
}

func (e *Engine) delOwned(k table.Key) {
	if _, ok := e.owned[k]; ok {
		e.ownedN.Add(-1)
	}
	delete(e.owned, k)
	e.ownedKeys.Delete(k)
}

// trackRecovery measures, for managed entries, the time from the first
// doubt about the MAC (evidence of another MAC, or the kernel starting to
// re-validate) to REACHABLE at a new MAC: how long the kernel took to
// follow a host that moved. It reads table events only.
func (e *Engine) trackRecovery(ctx context.Context) {
	sub := e.table.Events().SubscribeFunc(1024, func(ev table.Event) bool {
		if (ev.Kind != table.KindTransition && ev.Kind != table.KindMismatch) || e.ownedN.Load() == 0 {
			return false
		}
		_, ok := e.ownedKeys.Load(table.Key{Ifindex: ev.Ifindex, Addr: ev.IP})
		return ok
	})
	defer sub.Close()
	for {
		select {
		case <-ctx.Done():
			return
		case ev := <-sub.C():
			e.recoveryEvent(&ev)
		}
	}
}

func (e *Engine) recoveryEvent(ev *table.Event) {
	e.mmu.Lock()
	defer e.mmu.Unlock()
	o := e.owned[table.Key{Ifindex: ev.Ifindex, Addr: ev.IP}]
	if o == nil || o.pending {
		return
	}
	at := ev.Time.UnixNano()
	switch {
	case ev.Kind == table.KindMismatch:
		if o.doubtedAt == 0 {
			o.doubtedAt = at
		}
	case ev.To == table.StateReachable && len(ev.LLAddr) > 0:
		if mac := string(ev.LLAddr); mac != o.mac {
			if o.mac != "" && o.doubtedAt != 0 {
				e.c.observeRecovery(time.Duration(at - o.doubtedAt).Seconds())
			}
			o.mac = mac
		}
		o.doubtedAt = 0
	case ev.To != table.StateStale && o.doubtedAt == 0:
		// DELAY, PROBE, FAILED, INCOMPLETE: the kernel doubts it.
		o.doubtedAt = at
	}
}

func (c *ManageConfig) defaults() {
	if c.Max <= 0 {
		c.Max = 1024
	}
	if c.FailedTimeout <= 0 {
		c.FailedTimeout = 5 * time.Minute
	}
	if c.Interval <= 0 {
		c.Interval = time.Second
	}
}

// adopt takes over the entries a previous run of neighwatch made managed
// (managed, with its protocol), and no others.
func (e *Engine) adopt() {
	entries := e.table.Owned()
	now := time.Now().UnixNano()
	e.mmu.Lock()
	for i := range entries {
		e.setOwned(entries[i].Key, &owned{since: now, mac: entries[i].LLAddr})
	}
	n := len(entries)
	e.mmu.Unlock()
	if n > 0 {
		e.log.Info("adopted managed entries a previous run made", "entries", n)
	}
}

// canManage says whether one more entry may be managed and, with
// reserve, takes its place under the cap (own or disown settle it); a
// refusal by the cap is counted.
func (e *Engine) canManage(en *table.Entry, reserve, count bool) bool {
	if !e.conf().Manage.Supported {
		return false
	}
	e.mmu.Lock()
	defer e.mmu.Unlock()
	if _, ok := e.owned[en.Key]; ok {
		return false
	}
	if len(e.owned) >= e.conf().Manage.Max {
		if count {
			e.c.manageRefused.Add(1)
		}
		return false
	}
	if reserve {
		e.setOwned(en.Key, &owned{since: time.Now().UnixNano(), pending: true})
	}
	return true
}

// own settles a reservation: managed now.
func (e *Engine) own(k table.Key) {
	cur, _ := e.table.Lookup(k)
	e.mmu.Lock()
	e.setOwned(k, &owned{since: time.Now().UnixNano(), mac: cur.LLAddr})
	e.mmu.Unlock()
}

// disown drops a reservation whose manage action did not succeed.
func (e *Engine) disown(k table.Key) {
	e.mmu.Lock()
	if o := e.owned[k]; o != nil && o.pending {
		e.delOwned(k)
	}
	e.mmu.Unlock()
}

// Managed returns how many entries neighwatch manages.
func (e *Engine) Managed() int {
	e.mmu.Lock()
	defer e.mmu.Unlock()
	return len(e.owned)
}

// release gives one entry back to the kernel's normal life.
func (e *Engine) release(k table.Key, valid bool, reason string) {
	err := e.actor.Release(k, valid)
	if err != nil && valid {
		// Not valid after all (it failed meanwhile): delete it.
		err = e.actor.Release(k, false)
	}
	lvl := "released managed entry"
	if err != nil {
		e.log.Warn("releasing a managed entry failed", "ifindex", k.Ifindex, "ip", k.Addr, "reason", reason, "err", err)
		return
	}
	e.c.released(reason)
	e.log.Info(lvl, "interface", e.table.LinkName(k.Ifindex), "ip", k.Addr, "reason", reason)
}

// maintain releases what is no longer needed: entries idle, failed past
// the timeout, or on interfaces no longer watched; everything when
// remediation is off and ReleaseOnExit is set. It forgets entries that
// are gone or that someone else took over.
func (e *Engine) maintain(mode Mode) {
	if e.actor == nil {
		return
	}
	now := time.Now().UnixNano()
	type rel struct {
		k      table.Key
		valid  bool
		reason string
	}
	var todo []rel
	e.mmu.Lock()
	for k, o := range e.owned {
		if o.pending {
			continue
		}
		en, ok := e.table.Lookup(k)
		switch {
		case !ok && e.table.LinkName(k.Ifindex) == "":
			// Its interface left the watched set (or is gone: then the
			// kernel deleted the entry and the release finds nothing).
			todo = append(todo, rel{k, true, ReleaseUnwatched})
			e.delOwned(k)
			continue
		case !ok || en.Owner() != table.OwnerNeighwatch:
			e.delOwned(k) // deleted, or someone else changed it
			continue
		case mode == ModeOff && e.conf().Manage.ReleaseOnExit:
			todo = append(todo, rel{k, en.State.Valid(), ReleaseOff})
			e.delOwned(k)
			continue
		}
		if !en.State.Valid() {
			if o.failedSince == 0 {
				o.failedSince = now
			}
			if now-o.failedSince >= int64(e.conf().Manage.FailedTimeout) {
				todo = append(todo, rel{k, false, ReleaseFailed})
				e.delOwned(k)
			}
			continue
		}
		o.failedSince = 0
		if idle := e.conf().Manage.Idle; idle > 0 && now-max(o.since, en.Observed().LastBypass) >= int64(idle) {
			todo = append(todo, rel{k, true, ReleaseIdle})
			e.delOwned(k)
		}
	}
	e.mmu.Unlock()
	for _, r := range todo {
		e.release(r.k, r.valid, r.reason)
	}
}

// releaseAll gives back every managed entry at shutdown, when configured.
func (e *Engine) releaseAll() {
	if e.actor == nil || !e.conf().Manage.ReleaseOnExit {
		return
	}
	e.mmu.Lock()
	keys := make([]table.Key, 0, len(e.owned))
	for k, o := range e.owned {
		if !o.pending {
			keys = append(keys, k)
		}
	}
	for _, k := range keys {
		e.delOwned(k)
	}
	e.mmu.Unlock()
	for _, k := range keys {
		en, ok := e.table.Lookup(k)
		e.release(k, !ok || en.State.Valid(), ReleaseExit)
	}
}

// runManaged adopts, then maintains the managed entries until ctx ends.
func (e *Engine) runManaged(ctx context.Context) {
	if !e.conf().Manage.Supported {
		return
	}
	e.adopt()
	go e.trackRecovery(ctx)
	t := time.NewTicker(e.conf().Manage.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			e.releaseAll()
			return
		case <-t.C:
			e.maintain(e.Mode())
		}
	}
}

// awaitManaged waits until the table shows the entry managed by
// neighwatch.
func (e *Engine) awaitManaged(ctx context.Context, ch <-chan table.Event, k table.Key) Outcome {
	t := time.NewTimer(e.conf().KernelTimeout)
	defer t.Stop()
	for {
		if cur, ok := e.table.Lookup(k); ok && cur.Owner() == table.OwnerNeighwatch {
			return OutcomeManaged
		}
		select {
		case <-ctx.Done():
			return OutcomeNoChange
		case <-ch:
		case <-t.C:
			return OutcomeFailed
		}
	}
}
