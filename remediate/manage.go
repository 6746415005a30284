package remediate

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
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

// ReleaseReason says why a managed entry was given back to the kernel.
type ReleaseReason string

// Release reasons.
const (
	ReleaseIdle      ReleaseReason = "idle"      // no bypass traffic for ManageConfig.Idle
	ReleaseFailed    ReleaseReason = "failed"    // FAILED past ManageConfig.FailedTimeout
	ReleaseUnwatched ReleaseReason = "unwatched" // its interface left the watched set
	ReleaseOff       ReleaseReason = "off"       // remediation switched off
	ReleaseExit      ReleaseReason = "exit"      // clean shutdown
)

// ReleaseReasons lists them, for pre-created metric series.
func ReleaseReasons() []ReleaseReason {
	return []ReleaseReason{ReleaseIdle, ReleaseFailed, ReleaseUnwatched, ReleaseOff, ReleaseExit}
}

// Manager keeps the entries neighwatch manages: it adopts those a
// previous run left, reserves places under the cap for the manage
// strategy, releases what is idle, failed or unwatched, and measures how
// long the kernel takes to follow a managed host that moved. It has its
// own lock; the engine asks it (canManage, own, disown) from its workers.
type Manager struct {
	table managerTable
	actor Actor
	log   *slog.Logger
	c     *counters
	conf  func() *Config
	mode  func() Mode

	mu    sync.Mutex
	owned map[table.Key]*owned
	keys  sync.Map     // the owned keys, for the event filter
	n     atomic.Int32 // how many, so the filter skips the map when none

	// spawn runs the recovery tracker's reading loop (go f()): a test
	// holds it back to show that what happens meanwhile is not lost.
	spawn func(f func())
}

func newManager(e *Engine, t managerTable) *Manager {
	return &Manager{table: t, actor: e.actor, log: e.log, c: &e.c, conf: e.conf, mode: e.Mode, owned: make(map[table.Key]*owned),
		spawn: func(f func()) { go f() }}
}

// owned is what the manager remembers of an entry it manages.
type owned struct {
	since       int64 // Unix ns when managed (or adopted)
	failedSince int64 // Unix ns since it is not valid; 0 while valid
	pending     bool  // reserved under the cap, being made managed
	// For the recovery time: the MAC it was last REACHABLE at, and when
	// evidence or the kernel's re-validation first doubted it since.
	mac       string
	doubtedAt int64
}

// set and del keep the map (under mu) and the lock-free key set the event
// filter reads (it runs under the table's lock, which maintain takes
// while holding mu) in step.
func (m *Manager) set(k table.Key, o *owned) {
	if _, ok := m.owned[k]; !ok {
		m.n.Add(1)
	}
	m.owned[k] = o
	m.keys.Store(k, struct{}{})
}

func (m *Manager) del(k table.Key) {
	if _, ok := m.owned[k]; ok {
		m.n.Add(-1)
	}
	delete(m.owned, k)
	m.keys.Delete(k)
}

// subscribeRecovery subscribes the recovery tracker to the events of
// managed entries. The tracker measures, for managed entries, the time
// from the first doubt about the MAC (evidence of another MAC, or the
// kernel starting to re-validate) to REACHABLE at a new MAC: how long
// the kernel took to follow a host that moved. It reads table events
// only.
//
// The subscription is made before the entries are adopted (run), and
// read by a goroutine of its own: an event published between the two,
// or before that goroutine first runs (late, on a loaded machine), waits
// in the subscription instead of being missed, and with it the recovery.
func (m *Manager) subscribeRecovery() *table.Subscription {
	return m.table.Events().SubscribeAs(table.SubscriberManaged, 1024, func(ev table.Event) bool {
		if (ev.Kind != table.KindTransition && ev.Kind != table.KindMismatch) || m.n.Load() == 0 {
			return false
		}
		_, ok := m.keys.Load(table.Key{Ifindex: ev.Ifindex, Addr: ev.IP})
		return ok
	})
}

// trackRecovery reads sub until ctx ends, and closes it.
func (m *Manager) trackRecovery(ctx context.Context, sub *table.Subscription) {
	defer sub.Close()
	for {
		select {
		case <-ctx.Done():
			return
		case ev := <-sub.C():
			m.recoveryEvent(&ev)
		}
	}
}

func (m *Manager) recoveryEvent(ev *table.Event) {
	m.mu.Lock()
	defer m.mu.Unlock()
	o := m.owned[table.Key{Ifindex: ev.Ifindex, Addr: ev.IP}]
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
				m.c.observeRecovery(time.Duration(at - o.doubtedAt).Seconds())
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
	d := Defaults().Manage
	if c.Max <= 0 {
		c.Max = d.Max
	}
	if c.FailedTimeout <= 0 {
		c.FailedTimeout = d.FailedTimeout
	}
	if c.Interval <= 0 {
		c.Interval = d.Interval
	}
}

// adopt takes over the entries a previous run of neighwatch made managed
// (managed, with its protocol), and no others.
func (m *Manager) adopt() {
	entries := m.table.Owned()
	now := time.Now().UnixNano()
	m.mu.Lock()
	for i := range entries {
		m.set(entries[i].Key, &owned{since: now, mac: entries[i].LLAddr})
	}
	n := len(entries)
	m.mu.Unlock()
	if n > 0 {
		m.log.Info("adopted managed entries a previous run made", "entries", n)
	}
}

// canManage says whether one more entry may be managed and, with
// reserve, takes its place under the cap (own or disown settle it); a
// refusal by the cap is counted.
func (m *Manager) canManage(en *table.Entry, reserve, count bool) bool {
	if !m.conf().Manage.Supported {
		return false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.owned[en.Key]; ok {
		return false
	}
	if len(m.owned) >= m.conf().Manage.Max {
		if count {
			m.c.n.Add(ManageRefused, 1)
		}
		return false
	}
	if reserve {
		m.set(en.Key, &owned{since: time.Now().UnixNano(), pending: true})
	}
	return true
}

// own settles a reservation: managed now.
func (m *Manager) own(k table.Key) {
	cur, _ := m.table.Lookup(k)
	m.mu.Lock()
	m.set(k, &owned{since: time.Now().UnixNano(), mac: cur.LLAddr})
	m.mu.Unlock()
}

// disown drops a reservation whose manage action did not succeed.
func (m *Manager) disown(k table.Key) {
	m.mu.Lock()
	if o := m.owned[k]; o != nil && o.pending {
		m.del(k)
	}
	m.mu.Unlock()
}

// Len returns how many entries neighwatch manages.
func (m *Manager) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.owned)
}

// release gives one entry back to the kernel's normal life.
func (m *Manager) release(k table.Key, valid bool, reason ReleaseReason) {
	err := m.actor.Release(k, valid)
	if err != nil && valid {
		// Not valid after all (it failed meanwhile): delete it.
		err = m.actor.Release(k, false)
	}
	lvl := "released managed entry"
	if err != nil {
		m.log.Warn("releasing a managed entry failed", "ifindex", k.Ifindex, "ip", k.Addr, "reason", reason, "err", err)
		return
	}
	m.c.released(reason)
	m.log.Info(lvl, "interface", m.table.LinkName(k.Ifindex), "ip", k.Addr, "reason", reason)
}

// maintain releases what is no longer needed: entries idle, failed past
// the timeout, or on interfaces no longer watched; everything when
// remediation is off and ReleaseOnExit is set. It forgets entries that
// are gone or that someone else took over.
func (m *Manager) maintain(mode Mode) {
	if m.actor == nil {
		return
	}
	now := time.Now().UnixNano()
	type rel struct {
		k      table.Key
		valid  bool
		reason ReleaseReason
	}
	var todo []rel
	m.mu.Lock()
	for k, o := range m.owned {
		if o.pending {
			continue
		}
		en, ok := m.table.Lookup(k)
		switch {
		case !ok && !m.table.Watched(k.Ifindex):
			// Its interface left the watched set (or is gone: then the
			// kernel deleted the entry and the release finds nothing).
			todo = append(todo, rel{k, true, ReleaseUnwatched})
			m.del(k)
			continue
		case !ok || en.Owner() != table.OwnerNeighwatch:
			m.del(k) // deleted, or someone else changed it
			continue
		case mode == ModeOff && m.conf().Manage.ReleaseOnExit:
			todo = append(todo, rel{k, en.State.Valid(), ReleaseOff})
			m.del(k)
			continue
		}
		if !en.State.Valid() {
			if o.failedSince == 0 {
				o.failedSince = now
			}
			if now-o.failedSince >= int64(m.conf().Manage.FailedTimeout) {
				todo = append(todo, rel{k, false, ReleaseFailed})
				m.del(k)
			}
			continue
		}
		o.failedSince = 0
		if idle := m.conf().Manage.Idle; idle > 0 && now-max(o.since, en.Observed().LastBypass) >= int64(idle) {
			todo = append(todo, rel{k, true, ReleaseIdle})
			m.del(k)
		}
	}
	m.mu.Unlock()
	for _, r := range todo {
		m.release(r.k, r.valid, r.reason)
	}
}

// releaseAll gives back every managed entry at shutdown, when configured.
func (m *Manager) releaseAll() {
	if m.actor == nil || !m.conf().Manage.ReleaseOnExit {
		return
	}
	m.mu.Lock()
	keys := make([]table.Key, 0, len(m.owned))
	for k, o := range m.owned {
		if !o.pending {
			keys = append(keys, k)
		}
	}
	for _, k := range keys {
		m.del(k)
	}
	m.mu.Unlock()
	for _, k := range keys {
		en, ok := m.table.Lookup(k)
		if ok && en.Owner() != table.OwnerNeighwatch {
			// Another agent's since the upkeep last looked, or no longer
			// managed: not neighwatch's to release.
			continue
		}
		m.release(k, !ok || en.State.Valid(), ReleaseExit)
	}
}

// run adopts, then maintains the managed entries until ctx ends.
func (m *Manager) run(ctx context.Context) {
	if !m.conf().Manage.Supported {
		return
	}
	sub := m.subscribeRecovery()
	m.adopt()
	m.spawn(func() { m.trackRecovery(ctx, sub) })
	t := time.NewTicker(m.conf().Manage.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			m.releaseAll()
			return
		case <-t.C:
			m.maintain(m.mode())
		}
	}
}

// holding marks a managed entry pending while fn runs: between the
// actor's two requests of a repoint the entry is briefly not managed,
// and maintain must not forget it.
func (m *Manager) holding(k table.Key, fn func() error) error {
	m.mu.Lock()
	o := m.owned[k]
	if o != nil {
		o.pending = true
	}
	m.mu.Unlock()
	err := fn()
	m.mu.Lock()
	if o != nil {
		o.pending = false
	}
	m.mu.Unlock()
	return err
}
