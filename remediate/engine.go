package remediate

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jpillora/backoff"

	"github.com/neighwatch/neighwatch/table"
)

// Engine is the remediation loop.
type Engine struct {
	*settings // the mode and the configuration in force (settings.go)
	table     engineTable
	kits      kitTable // what each action's kit is given
	actor     Actor
	swapper   Swapper
	log       *slog.Logger
	c         counters

	queue    chan table.Key
	confirmQ chan table.Key // suspects to confirm (confirm.go)
	moves    moveChecks     // moved entries whose old MAC to ask, by stake (movecheck.go)
	acting   acting         // the keys a strategy acts on (movecheck.go)
	// soon asks for a sweep now: a suspicion began, or a confirmation
	// went unanswered (the entry is stuck: repair it without waiting).
	soon   chan struct{}
	limits *limits

	sweeps uint32 // only the Run goroutine touches it

	mu       sync.Mutex
	cands    map[table.Key]*candidate // every candidate seen, one lookup per sweep
	confirms map[table.Key]*confirmation

	managed *Manager // the entries neighwatch manages
}

// candidate is what the engine remembers of an entry that was a candidate.
type candidate struct {
	first   int64  // Unix ns when first seen as a candidate
	until   int64  // backed off until (Unix ns)
	tries   uint32 // back-offs in a row: the next one's attempt
	pending bool   // queued or being acted on
	seen    uint32 // last sweep that saw it
}

// New builds an engine over a table. swapper may be nil.
func New(cfg Config, t Table, actor Actor, swapper Swapper) *Engine {
	cfg.defaults()
	e := &Engine{
		table: t, kits: t, actor: actor, swapper: swapper, log: cfg.Logger,
		queue:    make(chan table.Key, cfg.QueueSize),
		confirmQ: make(chan table.Key, cfg.QueueSize),
		acting:   acting{keys: make(map[table.Key]int)},
		soon:     make(chan struct{}, 1),
		cands:    make(map[table.Key]*candidate),
		confirms: make(map[table.Key]*confirmation),
	}
	e.c.n = newCounterSet()
	e.limits = newLimits(&cfg, e.c.n.Of(RateLimited))
	e.moves = moveChecks{table: t, acting: &e.acting, limits: e.limits, c: &e.c, log: cfg.Logger,
		allowed: func() (*kit, Policy, bool) {
			if e.actor == nil || e.conf().NoConfirm {
				return nil, Policy{}, false
			}
			return e.kit(), e.policy(e.Mode()), true
		},
		q: newMoveQueue(moveQueueCap, func() { e.c.moveChecked(MoveDropped) }), watched: make(chan struct{})}
	e.c.actions = make([][numOutcomes]atomic.Uint64, len(registry))
	e.settings = newSettings(&cfg, e.modeChanged, e.limits.set)
	e.managed = newManager(e, t)
	t.OnSuspect(e.sweepSoon)
	return e
}

// modeChanged gives everything backed off a fresh look when a mode that
// acts begins (dry-run backs off too).
func (e *Engine) modeChanged(m Mode) {
	if m == ModeOff {
		return
	}
	e.mu.Lock()
	for _, c := range e.cands {
		c.until, c.tries = 0, 0
	}
	e.mu.Unlock()
}

// sweepSoon asks for a sweep now, without waiting.
func (e *Engine) sweepSoon() {
	select {
	case e.soon <- struct{}{}:
	default:
	}
}

// Stats returns the engine's counters and queue length.
func (e *Engine) Stats() Stats {
	s := e.c.stats()
	s.Queue = len(e.queue)
	s.MovesWaiting = e.moves.q.Len()
	floods := e.moves.q.floods(time.Now())
	s.Floods = make(map[string]Flood, len(floods))
	for ifindex, f := range floods {
		if name := e.table.LinkName(ifindex); name != "" {
			s.Floods[name] = f
		}
	}
	s.Managed = e.managed.Len()
	return s
}

// Run sweeps for candidates and acts on them until ctx ends.
func (e *Engine) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	for range e.conf().MaxConcurrent {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-ctx.Done():
					return
				case k := <-e.confirmQ:
					e.confirm(ctx, k)
				case <-e.moves.q.ready:
					e.moves.next(ctx)
				case k := <-e.queue:
					e.handleQueued(ctx, k)
				}
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		e.managed.run(ctx)
	}()
	wg.Add(1)
	go func() {
		defer wg.Done()
		e.moves.watch(ctx)
	}()
	tick := time.NewTicker(e.conf().SweepInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			wg.Wait()
			return nil
		case <-tick.C:
			e.sweep()
		case <-e.soon:
			e.sweep()
		}
	}
}

// handleQueued acts on a candidate a sweep queued, and lets the next
// sweeps see it again.
func (e *Engine) handleQueued(ctx context.Context, k table.Key) {
	e.handle(ctx, k)
	e.mu.Lock()
	if c := e.cands[k]; c != nil {
		c.pending = false
	}
	e.mu.Unlock()
}

// sweep queues the candidates that fit in the queue. It walks the table in
// place, one map lookup per candidate: with 100,000 stale-long entries it
// copies only those it queues. Candidates that do not fit are counted as
// dropped and looked at again at the next sweep; while the queue is full
// there is nothing to sweep for.
func (e *Engine) sweep() {
	mode := e.Mode()
	if mode == ModeOff {
		return
	}
	e.sweeps++
	sweep := e.sweeps
	// Repairs first, then the confirmations of what no repair takes up
	// (a repair's probes answer the same question).
	defer func() {
		e.mu.Lock()
		e.queueConfirmations(e.policy(mode), sweep)
		e.mu.Unlock()
	}()
	room := cap(e.queue) - len(e.queue)
	if room == 0 {
		return
	}
	now := time.Now().UnixNano()
	var skipped [numSkipReasons]int
	var dropped uint64
	pol := e.policy(mode)
	pick := func(en *table.Entry, ifname string) bool {
		d := Decide(en, ifname, pol)
		if !d.Act {
			skipped[d.Skip]++
			return false
		}
		c := e.cands[en.Key]
		if c == nil {
			c = &candidate{first: now}
			e.cands[en.Key] = c
		}
		c.seen = sweep
		if c.pending || now < c.until {
			return false
		}
		if cf := e.confirms[en.Key]; cf != nil && cf.pending {
			return false // its confirmation is out: the next sweep sees its outcome
		}
		if room == 0 {
			dropped++
			return false
		}
		room--
		c.pending = true
		return true
	}
	e.mu.Lock()
	picked := e.table.Walk(pol.MinClass(), pick)
	// Entries neighwatch manages are not STALE: whether their host moved
	// is asked of the index of managed entries, not of the class heaps.
	for _, en := range e.table.Owned() {
		if en.DisputingMAC() != "" && pick(&en, e.table.LinkName(en.Ifindex)) {
			picked = append(picked, en)
		}
	}
	// Forget entries that stopped being candidates (repaired, gone).
	for k, c := range e.cands {
		if c.seen != sweep && !c.pending && now >= c.until {
			delete(e.cands, k)
		}
	}
	e.mu.Unlock()
	for i := range picked {
		e.queue <- picked[i].Key // room was reserved above; only sweep sends
	}
	e.c.n.Add(QueueFull, dropped)
	e.c.setSkipped(&skipped)
}

// Next returns the strategy remediation would use on an entry now (in
// dry-run: would have used), or "" when it would leave it alone.
func (e *Engine) Next(en *table.Entry, ifname string) Strategy {
	d := Decide(en, ifname, e.policy(e.Mode()))
	if !d.Act {
		return ""
	}
	kt := e.kit()
	for _, s := range e.strategies(d) {
		if s.applicable(kt, en, false) {
			return s.name
		}
	}
	return ""
}

// kit is what a strategy gets to act with, under the configuration in
// force now.
func (e *Engine) kit() *kit {
	return &kit{table: e.kits, actor: e.actor, swapper: e.swapper, managed: e.managed, cfg: e.conf(), log: e.log, swaps: e.c.n.Of(Swaps)}
}

// policy is what Decide weighs entries against now.
func (e *Engine) policy(mode Mode) Policy {
	c := e.conf()
	return Policy{Mode: mode, Scope: c.Scope, Prevent: prevents(c), Filter: &c.Filter}
}

// strategies are the ones that may act on a decision, in order: the
// preventing ones alone for prevention (a policy prevents only when one
// is among the strategies); those that repair a move for an entry
// neighwatch manages whose host moved; else all.
func (e *Engine) strategies(d Decision) []*strategyInfo {
	var out []*strategyInfo
	for _, name := range e.conf().Strategies {
		s := lookup(name)
		switch {
		case s == nil:
		case d.Prevent && !s.prevents:
		case d.Moved && !s.repairsMove:
		default:
			out = append(out, s)
		}
	}
	return out
}

func (e *Engine) handle(ctx context.Context, k table.Key) {
	en, ok := e.table.Lookup(k)
	if !ok {
		return
	}
	mode := e.Mode()
	d := Decide(&en, e.table.LinkName(k.Ifindex), e.policy(mode))
	if !d.Act {
		return
	}
	if mode == ModeDryRun {
		// Dry-run takes tokens too: it reports what "on" would do, at
		// the pace "on" would do it.
		for _, s := range e.strategies(d) {
			if s.applicable(e.kit(), &en, true) {
				if err := e.limits.wait(ctx, k.Ifindex); err != nil {
					return
				}
				if e.Mode() != ModeDryRun {
					// Switched while it waited: no dry-run record and no
					// back-off; the next sweep looks at it in the new mode.
					return
				}
				e.record(&en, s.name, OutcomeDryRun, d.Reason(), nil)
				break
			}
		}
		e.backOff(k)
		return
	}
	for _, s := range e.strategies(d) {
		if !s.applicable(e.kit(), &en, true) {
			continue
		}
		if err := e.limits.wait(ctx, k.Ifindex); err != nil {
			return
		}
		if e.Mode() != ModeOn { // switched while we waited
			return
		}
		cur, ok := e.table.Lookup(k)
		if !ok || !Decide(&cur, e.table.LinkName(k.Ifindex), e.policy(ModeOn)).Act {
			return // it recovered on its own, or no longer needs us
		}
		out, err := e.act(ctx, &cur, s)
		if out == "" {
			continue // turned down at the last moment
		}
		e.record(&cur, s.name, out, d.Reason(), err)
		switch out {
		case OutcomeConflict, OutcomeConfirmed:
			// Another strategy would only ask the same hosts again, or
			// (flush) let the fastest answer win; a confirmed host needs
			// nothing.
			e.backOff(k)
			return
		case OutcomeManaged:
			e.mu.Lock()
			if c := e.cands[k]; c != nil {
				c.first, c.until, c.tries = time.Now().UnixNano(), 0, 0
			}
			e.mu.Unlock()
			return
		case OutcomeFixed, OutcomeMoved, OutcomeFlushed:
			e.mu.Lock()
			if c := e.cands[k]; c != nil {
				e.c.observeFix(time.Since(time.Unix(0, c.first)).Seconds())
				c.first, c.until, c.tries = time.Now().UnixNano(), 0, 0
			}
			e.mu.Unlock()
			return
		}
		if ctx.Err() != nil {
			return
		}
		en = cur
	}
	e.backOff(k)
}

// backOff leaves a candidate alone for a while: BackoffMin the first
// time, then up to twice as long each time in a row, at most BackoffMax,
// jittered so that entries that failed together are not retried
// together.
func (e *Engine) backOff(k table.Key) {
	e.mu.Lock()
	defer e.mu.Unlock()
	c := e.cands[k]
	if c == nil {
		return
	}
	b := backoff.Backoff{Min: e.conf().BackoffMin, Max: e.conf().BackoffMax, Factor: 2, Jitter: true}
	c.until = time.Now().Add(b.ForAttempt(float64(c.tries))).UnixNano()
	// At 64 the wait is BackoffMax long since; the count stops there, so
	// that the float it becomes never overflows.
	c.tries = min(c.tries+1, 64)
}

func (e *Engine) record(en *table.Entry, s Strategy, o Outcome, reason string, err error) {
	e.c.action(s, o)
	name := e.table.LinkName(en.Ifindex)
	cur, _ := e.table.Lookup(en.Key)
	detail := fmt.Sprintf("strategy=%s outcome=%s reason=%s", s, o, reason)
	if err != nil {
		detail += " error=" + err.Error()
	}
	lvl := slog.LevelInfo
	if o == OutcomeFailed || o == OutcomeNoChange {
		lvl = slog.LevelWarn
	}
	e.log.Log(context.Background(), lvl, "remediation", "interface", name, "ip", en.Addr, "lladdr", net.HardwareAddr(en.LLAddr).String(),
		"strategy", s, "outcome", o, "reason", reason, "err", err)
	e.table.Publish(table.Event{
		Time: time.Now(), Ifindex: en.Ifindex, Interface: name, Family: en.Family(), IP: en.Addr,
		From: en.State, To: cur.State, OldLLAddr: net.HardwareAddr(en.LLAddr), LLAddr: net.HardwareAddr(cur.LLAddr),
		Cause: table.CauseRemediate, Kind: "remediation", Class: cur.Class(), Detail: detail,
	})
}

// macString prints raw MAC bytes, "" for none.
func macString(s string) string {
	if s == "" {
		return ""
	}
	return net.HardwareAddr(s).String()
}
