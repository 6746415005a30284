package remediate

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jpillora/backoff"

	"github.com/neighwatch/neighwatch/table"
	"golang.org/x/time/rate"
)

// Outcome is what verification saw after an action.
type Outcome string

// Outcomes.
const (
	OutcomeFixed    Outcome = "fixed"   // REACHABLE at the same MAC
	OutcomeMoved    Outcome = "moved"   // REACHABLE (or updated) at a new MAC
	OutcomeFlushed  Outcome = "flushed" // deleted; the next lookup resolves afresh
	OutcomeFailed   Outcome = "failed"  // the action failed, or the entry went FAILED
	OutcomeNoChange Outcome = "no-change"
	OutcomeDryRun   Outcome = "dry-run" // would have acted
	// OutcomeConflict: the entry's MAC answered while another MAC also
	// claims the IP (answered the same probe, or was seen recently). The
	// engine does not take the answer as a repair; the entry stays stuck.
	OutcomeConflict Outcome = "conflict"
	// OutcomeManaged: the entry is managed by neighwatch now; the kernel
	// re-validates it from here on.
	OutcomeManaged Outcome = "managed"
	// OutcomeConfirmed: the entry's MAC answered a probe, and no other:
	// the host is there, and the MAC it was seen at is another of its
	// own (a bond, ARP flux, a router relaying it). Nothing to repair.
	OutcomeConfirmed Outcome = "confirmed"
)

// Outcomes lists them, for pre-created metric series.
func Outcomes() []Outcome {
	return []Outcome{OutcomeFixed, OutcomeMoved, OutcomeFlushed, OutcomeFailed, OutcomeNoChange, OutcomeDryRun, OutcomeConflict, OutcomeManaged, OutcomeConfirmed}
}

// Actor performs actions on the kernel; the real one is NetActor.
type Actor interface {
	// Probe sends one probe: phase 0 unicast to the entry's MAC, phase 1
	// broadcast (ARP) or solicited-node multicast (NDP). With listen > 0
	// it then reads answers for that long and returns each MAC that
	// answered for the entry's IP, once, in the order they came.
	Probe(ctx context.Context, e *table.Entry, phase int, listen time.Duration) ([]net.HardwareAddr, error)
	// Kick sends RTM_NEWNEIGH with NTF_USE.
	Kick(e *table.Entry) error
	// Flush deletes the entry.
	Flush(e *table.Entry) error
	// Manage makes the entry managed, marked as neighwatch's
	// (table.ProtocolNeighwatch), keeping its address and state.
	Manage(e *table.Entry) error
	// Release clears managed: a valid entry goes back to STALE and the
	// kernel's normal life, an invalid one (FAILED, INCOMPLETE) is
	// deleted. A missing entry or link is not an error.
	Release(k table.Key, valid bool) error
	// Repoint sets an entry neighwatch manages to mac, STALE, still
	// managed: its host moved there, a probe proved it, and a REACHABLE
	// managed entry takes no ARP answer within its locktime.
	Repoint(e *table.Entry, mac net.HardwareAddr) error
}

// Swapper swaps an interface's datapath to bpf_redirect_neigh; the agent
// provides it when --datapath.mode=auto.
type Swapper interface {
	// CanSwap reports whether the interface runs the legacy datapath in
	// auto mode.
	CanSwap(ifindex int32) bool
	Swap(ifindex int32) error
}

// Config configures the engine.
type Config struct {
	Mode       Mode
	Scope      Scope
	Strategies []Strategy
	Filter     Filter
	// Rate is the global action rate (per second), PerInterfaceRate the
	// rate on one interface. One action sends at most two probe packets.
	Rate, PerInterfaceRate float64
	Burst                  int
	MaxConcurrent          int
	QueueSize              int
	// VerifyTimeout bounds the wait for a probe's answer; KernelTimeout the
	// wait after kick and swap, which go through the kernel's DELAY and
	// PROBE timers.
	VerifyTimeout, KernelTimeout time.Duration
	// ProbeGap is the wait for an answer to the unicast probe before the
	// broadcast one.
	ProbeGap               time.Duration
	BackoffMin, BackoffMax time.Duration
	SweepInterval          time.Duration
	// NoConfirm turns off the confirmation of suspicions (confirm.go):
	// then only silence for the table's silence window makes a suspect
	// entry stuck.
	NoConfirm bool
	Manage    ManageConfig
	Logger    *slog.Logger
}

// Defaults are the engine's defaults, in one place: the agent's flags
// take theirs from here, and defaults fills a field left zero with it.
// Mode, Scope and Strategies are the flags' (strategies depend on the
// kernel: DefaultStrategies).
func Defaults() Config {
	return Config{
		Mode: ModeDryRun, Scope: ScopeStuck,
		Rate: 10, PerInterfaceRate: 5, Burst: 1, MaxConcurrent: 4, QueueSize: 1024,
		VerifyTimeout: 2 * time.Second, KernelTimeout: 10 * time.Second, ProbeGap: 300 * time.Millisecond,
		BackoffMin: 30 * time.Second, BackoffMax: 10 * time.Minute, SweepInterval: time.Second,
		Manage: ManageConfig{Max: 1024, Idle: 30 * time.Minute, FailedTimeout: 5 * time.Minute, ReleaseOnExit: true, Interval: time.Second},
	}
}

func (c *Config) defaults() {
	d := Defaults()
	fill := func(v *time.Duration, def time.Duration) {
		if *v <= 0 {
			*v = def
		}
	}
	if c.Rate <= 0 {
		c.Rate = d.Rate
	}
	if c.PerInterfaceRate <= 0 {
		c.PerInterfaceRate = d.PerInterfaceRate
	}
	if c.Burst <= 0 {
		c.Burst = d.Burst
	}
	if c.MaxConcurrent <= 0 {
		c.MaxConcurrent = d.MaxConcurrent
	}
	if c.QueueSize <= 0 {
		c.QueueSize = d.QueueSize
	}
	fill(&c.VerifyTimeout, d.VerifyTimeout)
	fill(&c.KernelTimeout, d.KernelTimeout)
	fill(&c.ProbeGap, d.ProbeGap)
	fill(&c.BackoffMin, d.BackoffMin)
	fill(&c.BackoffMax, d.BackoffMax)
	fill(&c.SweepInterval, d.SweepInterval)
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	c.Manage.defaults()
	if len(c.Strategies) == 0 {
		c.Strategies = DefaultStrategies(c.Manage.Supported)
	}
}

// DefaultStrategies is the default order: manage first where the kernel
// keeps managed entries.
func DefaultStrategies(manageSupported bool) []Strategy {
	if manageSupported {
		return []Strategy{StrategyManage, StrategyProbe, StrategyKick, StrategyFlush}
	}
	return []Strategy{StrategyProbe, StrategyKick, StrategyFlush}
}

// Engine is the remediation loop.
type Engine struct {
	cfg     atomic.Pointer[Config] // replaced whole by Reconfigure
	source  atomic.Value           // string: where the mode came from
	mode    atomic.Value           // Mode
	table   Table
	actor   Actor
	swapper Swapper
	log     *slog.Logger
	c       counters

	queue    chan table.Key
	confirmQ chan table.Key // suspects to confirm (confirm.go)
	moveQ    chan moveCheck // moved entries whose old MAC to ask (movecheck.go)
	// movesWatched is closed once Run subscribed to the table's moves.
	movesWatched chan struct{}
	// acting holds the keys a strategy is acting on. The move watcher's
	// filter reads it while the table publishes, under the table's lock:
	// actMu is a leaf, held for nothing but the map.
	actMu  sync.Mutex
	acting map[table.Key]int
	// soon asks for a sweep now: a suspicion began, or a confirmation
	// went unanswered (the entry is stuck: repair it without waiting).
	soon   chan struct{}
	global *rate.Limiter

	sweeps uint32 // only the Run goroutine touches it

	mu       sync.Mutex
	cands    map[table.Key]*candidate // every candidate seen, one lookup per sweep
	confirms map[table.Key]*confirmation
	perIf    map[int32]*rate.Limiter

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
		table: t, actor: actor, swapper: swapper, log: cfg.Logger,
		queue:        make(chan table.Key, cfg.QueueSize),
		confirmQ:     make(chan table.Key, cfg.QueueSize),
		moveQ:        make(chan moveCheck, moveQueue),
		movesWatched: make(chan struct{}),
		acting:       make(map[table.Key]int),
		soon:         make(chan struct{}, 1),
		global:       rate.NewLimiter(rate.Limit(cfg.Rate), cfg.Burst),
		cands:        make(map[table.Key]*candidate),
		confirms:     make(map[table.Key]*confirmation),
		perIf:        make(map[int32]*rate.Limiter),
	}
	e.c.actions = make([][numOutcomes]atomic.Uint64, len(registry))
	e.cfg.Store(&cfg)
	e.mode.Store(cfg.Mode)
	e.managed = newManager(e)
	t.OnSuspect(e.sweepSoon)
	return e
}

// sweepSoon asks for a sweep now, without waiting.
func (e *Engine) sweepSoon() {
	select {
	case e.soon <- struct{}{}:
	default:
	}
}

// ModeSource says where the mode in force came from (flag, file,
// default, runtime), as the agent set it.
func (e *Engine) ModeSource() string {
	s, _ := e.source.Load().(string)
	return s
}

// SetModeSource records where the mode in force came from.
func (e *Engine) SetModeSource(s string) { e.source.Store(s) }

// conf returns the configuration in force.
func (e *Engine) conf() *Config { return e.cfg.Load() }

// Reconfigure applies a new configuration at runtime: the mode, scope,
// strategies, filters, rates, timeouts and the manage settings. The
// queue size and the number of workers stay as they started.
func (e *Engine) Reconfigure(cfg Config) {
	old := e.conf()
	cfg.defaults()
	cfg.QueueSize, cfg.MaxConcurrent, cfg.Logger = old.QueueSize, old.MaxConcurrent, old.Logger
	cfg.Manage.Supported = old.Manage.Supported
	e.cfg.Store(&cfg)
	e.global.SetLimit(rate.Limit(cfg.Rate))
	e.mu.Lock()
	for _, l := range e.perIf {
		l.SetLimit(rate.Limit(cfg.PerInterfaceRate))
	}
	e.mu.Unlock()
	e.SetMode(cfg.Mode)
}

// Mode returns the current mode.
func (e *Engine) Mode() Mode { return e.mode.Load().(Mode) }

// SetMode changes the mode at runtime.
func (e *Engine) SetMode(m Mode) Mode {
	old := e.mode.Swap(m).(Mode)
	if old != m {
		e.log.Info("remediation mode changed", "from", old, "to", m)
		if m != ModeOff {
			// A new mode deserves a fresh look at everything backed off
			// in the old one (dry-run backs off too).
			e.mu.Lock()
			for _, c := range e.cands {
				c.until, c.tries = 0, 0
			}
			e.mu.Unlock()
		}
	}
	return old
}

// Config returns the configuration in force.
func (e *Engine) Config() Config { return *e.conf() }

// Stats returns the engine's counters and queue length.
func (e *Engine) Stats() Stats {
	s := e.c.stats()
	s.Queue = len(e.queue)
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
				case mc := <-e.moveQ:
					e.checkMove(ctx, mc)
				case k := <-e.queue:
					e.handle(ctx, k)
					e.mu.Lock()
					if c := e.cands[k]; c != nil {
						c.pending = false
					}
					e.mu.Unlock()
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
		e.watchMoves(ctx)
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
	e.c.dropped.Add(dropped)
	e.c.setSkipped(&skipped)
}

func (e *Engine) limiter(ifindex int32) *rate.Limiter {
	e.mu.Lock()
	defer e.mu.Unlock()
	l := e.perIf[ifindex]
	if l == nil {
		l = rate.NewLimiter(rate.Limit(e.conf().PerInterfaceRate), e.conf().Burst)
		e.perIf[ifindex] = l
	}
	return l
}

// wait takes one token from the global and the interface bucket.
func (e *Engine) wait(ctx context.Context, ifindex int32) error {
	waited := false
	for _, l := range []*rate.Limiter{e.global, e.limiter(ifindex)} {
		r := l.Reserve()
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
		e.c.rateLimited.Add(1)
	}
	return nil
}

// Next returns the strategy remediation would use on an entry now (in
// dry-run: would have used), or "" when it would leave it alone.
func (e *Engine) Next(en *table.Entry, ifname string) Strategy {
	d := Decide(en, ifname, e.policy(e.Mode()))
	if !d.Act {
		return ""
	}
	for _, s := range e.strategies(d) {
		if s.applicable(e, en, false) {
			return s.name()
		}
	}
	return ""
}

// policy is what Decide weighs entries against now.
func (e *Engine) policy(mode Mode) Policy {
	c := e.conf()
	return Policy{Mode: mode, Scope: c.Scope, Prevent: c.Manage.Supported && slices.Contains(c.Strategies, StrategyManage), Filter: &c.Filter}
}

// strategies are the ones that may act on a decision, in order: manage
// alone for prevention (a policy prevents only when manage is among the
// strategies); the repair strategies (not manage, not swap) for an entry
// neighwatch manages whose host moved; else all.
func (e *Engine) strategies(d Decision) []strategy {
	var out []strategy
	for _, name := range e.conf().Strategies {
		s := lookup(name)
		switch {
		case s == nil:
		case d.Prevent && name != StrategyManage:
		case d.Moved && !s.repairsMove():
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
			if s.applicable(e, &en, true) {
				if err := e.wait(ctx, k.Ifindex); err != nil {
					return
				}
				if e.Mode() != ModeDryRun {
					// Switched while it waited: no dry-run record and no
					// back-off; the next sweep looks at it in the new mode.
					return
				}
				e.record(&en, s.name(), OutcomeDryRun, d.Reason(), nil)
				break
			}
		}
		e.backOff(k)
		return
	}
	for _, s := range e.strategies(d) {
		if !s.applicable(e, &en, true) {
			continue
		}
		if err := e.wait(ctx, k.Ifindex); err != nil {
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
		e.record(&cur, s.name(), out, d.Reason(), err)
		switch out {
		case OutcomeConflict, OutcomeConfirmed:
			// Another strategy would only ask the same hosts again, or
			// (flush) let the fastest answer win; a confirmed host needs
			// nothing.
			e.backOff(k)
			return
		case OutcomeManaged:
			e.managed.own(k)
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
	if c.tries < 64 {
		c.tries++
	}
}

// watch subscribes to the events of one entry while an action on it is
// verified; nobody subscribes between actions, so the table builds no
// events for the engine then. Call the returned func to stop.
func (e *Engine) watch(k table.Key) (<-chan table.Event, func()) {
	sub := e.table.Events().SubscribeFunc(16, func(ev table.Event) bool {
		return ev.Ifindex == k.Ifindex && ev.IP == k.Addr
	})
	return sub.C(), sub.Close
}

// disputer returns a MAC that recent evidence (within table.ConflictHold)
// says claims the entry's IP instead of, or as well as, the entry's MAC:
// an ARP/NDP sighting, the source of the host's packets, or a conflict.
func disputer(en *table.Entry, now time.Time) net.HardwareAddr {
	for _, ev := range en.Evidence() {
		switch ev.Signal {
		case table.SignalARP, table.SignalSourceMAC, table.SignalConflict:
			if now.Sub(ev.At) < table.ConflictHold {
				return ev.MAC
			}
		}
	}
	return nil
}

// judgeAnswers reads the answers to a broadcast probe of a disputed entry:
// the entry's MAC and another answering is a conflict, and so are two
// other MACs; the entry's MAC alone is the host where the entry says,
// the MAC it was seen at another of its own (confirmed). ok is false
// when the table must tell: one other MAC answered (the kernel takes it:
// moved), or none did (recorded: nobody at the entry's MAC).
func (e *Engine) judgeAnswers(en *table.Entry, answered []net.HardwareAddr) (Outcome, bool) {
	now := time.Now()
	mine := en.HardwareAddr()
	var others []net.HardwareAddr
	fromMine := false
	for _, m := range answered {
		if string(m) == en.LLAddr {
			fromMine = true
		} else {
			others = append(others, m)
		}
	}
	switch {
	case fromMine && len(others) > 0:
		e.table.Heard(en.Key, mine, now)
		e.table.ObserveConflict(en.Key, mine, others[0], now)
		return OutcomeConflict, true
	case fromMine:
		// The claim did not answer: it sends from that MAC, it does not
		// answer for the IP there.
		e.table.Heard(en.Key, mine, now)
		return OutcomeConfirmed, true
	case len(others) >= 2:
		e.table.ObserveConflict(en.Key, others[0], others[1], now)
		return OutcomeConflict, true
	}
	if len(others) == 0 {
		e.table.ProbeUnanswered(en.Key, en.LLAddr, now)
	}
	return "", false
}

// await waits for the entry to be repaired. done is false when the wait
// ran out and final is false (the caller has another step to try).
func (e *Engine) await(ctx context.Context, ch <-chan table.Event, k table.Key, oldMAC string, needMove bool, d time.Duration, final bool) (Outcome, bool) {
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		if o, ok := e.judge(k, oldMAC, needMove); ok {
			return o, true
		}
		select {
		case <-ctx.Done():
			return OutcomeNoChange, true
		case <-ch:
		case <-t.C:
			if !final {
				return OutcomeNoChange, false
			}
			if o, ok := e.judge(k, oldMAC, needMove); ok {
				return o, true
			}
			if cur, ok := e.table.Lookup(k); ok && cur.State == table.StateFailed {
				return OutcomeFailed, true
			}
			return OutcomeNoChange, true
		}
	}
}

// repoint moves an entry neighwatch manages to mac, held pending
// meanwhile.
func (e *Engine) repoint(en *table.Entry, mac net.HardwareAddr) error {
	return e.managed.holding(en.Key, func() error { return e.actor.Repoint(en, mac) })
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

// judge reads the entry's state: repaired, moved, gone, or not yet.
func (e *Engine) judge(k table.Key, oldMAC string, needMove bool) (Outcome, bool) {
	cur, ok := e.table.Lookup(k)
	switch {
	case !ok:
		return OutcomeFlushed, true
	case cur.LLAddr != "" && cur.LLAddr != oldMAC && cur.State.Valid():
		return OutcomeMoved, true
	case needMove:
		return "", false
	case cur.State == table.StateReachable || cur.State == table.StatePermanent:
		return OutcomeFixed, true
	}
	return "", false
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
