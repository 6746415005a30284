package remediate

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/time/rate"

	"github.com/neighwatch/neighwatch/table"
)

// The tests in this file guard rules of the ledger (docs/rules.md) that
// no other test caught a break of. Most drive the engine in the test's
// own goroutine (settle), so that what must not happen is asserted once
// everything that could have made it happen has run, with no sleep.

// settle runs n sweeps and, after each, every action, confirmation and
// move check they queued, in the test's goroutine, until the queues are
// empty: what is not done then, no worker will do.
func settle(e *Engine, n int) {
	ctx := context.Background()
	for range n {
		e.sweep()
		for drained := false; !drained; {
			select {
			case k := <-e.confirmQ:
				e.confirm(ctx, k)
			case <-e.moves.q.ready:
				e.moves.next(ctx)
			case k := <-e.queue:
				e.handleQueued(ctx, k)
			default:
				drained = true
			}
		}
	}
}

// tokenGate holds every wait for a rate-limit token until the test
// opens it: the test knows a probe is waiting for its token, changes the
// mode or the configuration, and lets it go on.
type tokenGate struct {
	waiting chan time.Duration
	open    chan struct{}
}

// holdTokens makes e's waits for tokens wait for the gate, and takes the
// node's bucket's only token with the next an hour away, so the next
// probe waits, however slow the machine.
func holdTokens(e *Engine) *tokenGate {
	g := &tokenGate{waiting: make(chan time.Duration, 16), open: make(chan struct{})}
	e.limits.sleep = func(ctx context.Context, d time.Duration) error {
		g.waiting <- d
		select {
		case <-g.open:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	e.limits.global.SetLimit(rate.Every(time.Hour))
	e.limits.global.Allow()
	return g
}

// waiter waits until a probe waits for its token; it fails the test if
// the call done belongs to ends without having waited.
func (g *tokenGate) waiter(t *testing.T, done <-chan struct{}) {
	t.Helper()
	select {
	case <-g.waiting:
	case <-done:
		t.Fatal("it ended without waiting for a token")
	}
}

// inBackground runs fn and returns a channel closed when it returned.
func inBackground(fn func()) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn()
	}()
	return done
}

// actionsRecorded counts the actions the engine recorded, every strategy
// and outcome.
func actionsRecorded(e *Engine) uint64 {
	var n uint64
	for _, byOutcome := range e.Stats().Actions {
		for _, c := range byOutcome {
			n += c
		}
	}
	return n
}

// TestSwitchedWhileWaitingForAToken: an action waiting for its token
// when the mode changes does what the new mode allows: off sends
// nothing; dry-run changes nothing; a dry-run record waiting when the
// mode changes is not recorded. The control, left in its mode, acts.
func TestSwitchedWhileWaitingForAToken(t *testing.T) {
	for _, tc := range []struct {
		name     string
		from, to Mode
		calls    int // actor calls once the wait ends
		records  uint64
	}{
		{"on, left on (the control)", ModeOn, ModeOn, 1, 1},
		{"on, switched off", ModeOn, ModeOff, 0, 0},
		{"on, switched to dry-run", ModeOn, ModeDryRun, 0, 0},
		{"dry-run, left in dry-run (the control)", ModeDryRun, ModeDryRun, 0, 1},
		{"dry-run, switched off", ModeDryRun, ModeOff, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tb := stuckTable(1)
			fa := &fakeActor{t: tb, answerAt: 1, moveTo: macNew}
			e := New(fastConfig(tc.from, StrategyProbe, StrategyFlush), tb, fa, nil)
			g := holdTokens(e)
			e.sweep()
			k := <-e.queue
			done := inBackground(func() { e.handleQueued(context.Background(), k) })
			g.waiter(t, done) // the action waits for its token
			e.SetMode(tc.to)
			close(g.open)
			<-done
			if c := fa.Calls(); len(c) != tc.calls {
				t.Errorf("actor calls %v, want %d", c, tc.calls)
			}
			if n := actionsRecorded(e); n != tc.records {
				t.Errorf("%d actions recorded, want %d: %+v", n, tc.records, e.Stats().Actions)
			}
		})
	}
}

// TestConfirmationsStopInOff: a confirmation queued before remediation
// was switched off, or waiting for its token when it was, or when
// --remediation.confirm=false was reloaded, sends nothing. The control,
// left in dry-run, sends its three requests.
func TestConfirmationsStopInOff(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(e *Engine)
		while  bool // switched while it waits for its token, not before it starts
		probes int
	}{
		{"left in dry-run (the control)", func(*Engine) {}, true, ConfirmProbes},
		{"switched off while queued", func(e *Engine) { e.SetMode(ModeOff) }, false, 0},
		{"switched off while waiting for its token", func(e *Engine) { e.SetMode(ModeOff) }, true, 0},
		{"confirm=false reloaded while waiting", func(e *Engine) {
			c := e.Config()
			c.NoConfirm = true
			e.Reconfigure(c)
		}, true, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tb := suspectTable(1)
			fa := &fakeActor{t: tb, answerAt: -1}
			e := New(fastConfig(ModeDryRun, StrategyProbe), tb, fa, nil)
			g := holdTokens(e)
			e.sweep()
			if len(e.confirmQ) != 1 {
				t.Fatalf("%d confirmations queued, want the suspect's", len(e.confirmQ))
			}
			k := <-e.confirmQ
			if !tc.while {
				tc.change(e)
			}
			done := inBackground(func() { e.confirm(context.Background(), k) })
			if tc.while {
				g.waiter(t, done)
				tc.change(e)
			}
			close(g.open)
			<-done
			if c := fa.Calls(); len(c) != tc.probes {
				t.Errorf("sent %v, want %d unicast requests", c, tc.probes)
			}
		})
	}
}

// TestMoveChecksStopInOff: a move check waiting for its token when
// remediation is switched off sends nothing; the control, left in
// dry-run, asks the old MAC.
func TestMoveChecksStopInOff(t *testing.T) {
	for _, to := range []Mode{ModeDryRun, ModeOff} {
		t.Run(string(to), func(t *testing.T) {
			tb := table.New(time.Minute, nil)
			k := table.Key{Ifindex: 3, Addr: netip.MustParseAddr("10.0.0.7")}
			tb.Apply(table.CauseNetlink, table.Update{Ifindex: 3, Family: table.FamilyInet, Addr: k.Addr, State: table.StateReachable, LLAddr: macNew})
			fa := &fakeActor{t: tb, answerAt: -1}
			e := New(fastConfig(ModeDryRun, StrategyProbe), tb, fa, nil)
			g := holdTokens(e)
			done := inBackground(func() {
				e.moves.check(context.Background(), moveCheck{key: k, old: string(macOld), now: string(macNew)})
			})
			g.waiter(t, done)
			e.SetMode(to)
			close(g.open)
			<-done
			want := map[Mode]int{ModeDryRun: ConfirmProbes}[to]
			if c := fa.Calls(); len(c) != want {
				t.Errorf("sent %v, want %d requests", c, want)
			}
		})
	}
}

// TestConfirmationTakesAToken: a confirmation takes a token of the
// node's bucket and of its interface's before its first request.
func TestConfirmationTakesAToken(t *testing.T) {
	tb := suspectTable(1)
	fa := &fakeActor{t: tb, answerAt: -1}
	cfg := fastConfig(ModeDryRun, StrategyProbe)
	cfg.Rate, cfg.PerInterfaceRate = 0.001, 0.001 // a token every 1,000 s
	e := New(cfg, tb, fa, nil)
	e.sweep()
	e.confirm(context.Background(), <-e.confirmQ)
	if c := fa.Calls(); len(c) != ConfirmProbes {
		t.Fatalf("sent %v, want the confirmation's requests", c)
	}
	if n := e.limits.global.Tokens(); n > 0.5 {
		t.Errorf("the node's bucket holds %.3f tokens after a confirmation, want its one token taken", n)
	}
	if n := e.limits.onInterface(3).Tokens(); n > 0.5 {
		t.Errorf("the interface's bucket holds %.3f tokens after a confirmation, want its one token taken", n)
	}
}

// TestConfirmFalseSendsNothing: with --remediation.confirm=false no
// confirmation goes out, sweep after sweep, and the suspect stays one;
// reloaded true, the next sweep confirms it.
func TestConfirmFalseSendsNothing(t *testing.T) {
	tb := suspectTable(1)
	fa := &fakeActor{t: tb, answerAt: -1}
	cfg := fastConfig(ModeDryRun, StrategyProbe)
	cfg.NoConfirm = true
	e := New(cfg, tb, fa, nil)
	settle(e, 3)
	if c := fa.Calls(); len(c) != 0 {
		t.Fatalf("confirm=false sent %v", c)
	}
	cfg = e.Config()
	cfg.NoConfirm = false
	e.Reconfigure(cfg)
	settle(e, 1)
	if c := fa.Calls(); len(c) != ConfirmProbes {
		t.Errorf("reloaded to confirm: sent %v, want %d requests", c, ConfirmProbes)
	}
}

// TestMoveCheckable: which moved entries may have their old MAC asked:
// in dry-run and on, a unicast address of an entry the network set (not
// PERMANENT, not NOARP) that the filters let remediation act on.
func TestMoveCheckable(t *testing.T) {
	ip := netip.MustParseAddr("10.0.0.7")
	excl := &Filter{ExcludeInterfaces: []*regexp.Regexp{regexp.MustCompile("eth0")}}
	for _, tc := range []struct {
		name   string
		state  table.State
		addr   netip.Addr
		mode   Mode
		filter *Filter
		want   bool
	}{
		{"reachable, dry-run", table.StateReachable, ip, ModeDryRun, nil, true},
		{"reachable, on", table.StateReachable, ip, ModeOn, nil, true},
		{"stale, dry-run", table.StateStale, ip, ModeDryRun, nil, true},
		{"off", table.StateReachable, ip, ModeOff, nil, false},
		{"permanent", table.StatePermanent, ip, ModeOn, nil, false},
		{"noarp", table.StateNoARP, ip, ModeOn, nil, false},
		{"multicast", table.StateReachable, netip.MustParseAddr("ff02::1"), ModeOn, nil, false},
		{"interface excluded", table.StateReachable, ip, ModeOn, excl, false},
	} {
		en := entryAt(t, tc.addr, tc.state, macNew)
		if got := MoveCheckable(&en, "eth0", Policy{Mode: tc.mode, Scope: ScopeStuck, Filter: tc.filter}); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestProbesRespectTheFilters: confirmations and move checks follow the
// remediation filters as actions do: an interface left out by
// --remediation.interfaces or named by --remediation.exclude-interfaces,
// or an address outside the CIDR lists, gets no probe.
func TestProbesRespectTheFilters(t *testing.T) {
	tb, k := youngSuspect(t)
	en, _ := tb.Lookup(k)
	for _, tc := range []struct {
		name   string
		filter Filter
		want   bool
	}{
		{"no filter", Filter{}, true},
		{"included", Filter{Interfaces: []*regexp.Regexp{regexp.MustCompile("eth.*")}}, true},
		{"not included", Filter{Interfaces: []*regexp.Regexp{regexp.MustCompile("wan0")}}, false},
		{"excluded", Filter{ExcludeInterfaces: []*regexp.Regexp{regexp.MustCompile("eth0")}}, false},
		{"denied prefix", Filter{DenyCIDRs: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/24")}}, false},
		{"outside the allowed", Filter{AllowCIDRs: []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24")}}, false},
	} {
		p := Policy{Mode: ModeDryRun, Scope: ScopeStuck, Filter: &tc.filter}
		if got := Confirmable(&en, "eth0", p); got != tc.want {
			t.Errorf("%s: confirmable %v, want %v", tc.name, got, tc.want)
		}
		if got := MoveCheckable(&en, "eth0", p); got != tc.want {
			t.Errorf("%s: move-checkable %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestDenyWinsOverAllow: an address in both CIDR lists is left alone.
func TestDenyWinsOverAllow(t *testing.T) {
	tb := stuckTable(1)
	en, _ := tb.Lookup(table.Key{Ifindex: 3, Addr: netip.MustParseAddr("10.0.0.0")})
	f := Filter{AllowCIDRs: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}, DenyCIDRs: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/24")}}
	if d := Decide(&en, "eth0", Policy{Mode: ModeOn, Scope: ScopeStuck, Filter: &f}); d.Act || d.Skip != SkipCIDR {
		t.Errorf("decision %+v, want skipped as cidr-filtered", d)
	}
	f.DenyCIDRs = nil
	if d := Decide(&en, "eth0", Policy{Mode: ModeOn, Scope: ScopeStuck, Filter: &f}); !d.Act {
		t.Errorf("allowed alone: decision %+v, want an action", d)
	}
}

// TestMovesPastTheQueueDropped: at most moveQueueCap moves wait for a
// check; each one more of no higher stake is dropped and counted as
// such, and the queue holds no more.
func TestMovesPastTheQueueDropped(t *testing.T) {
	tb := table.New(time.Minute, nil)
	const n = moveQueueCap + 3
	keys := make([]table.Key, n)
	for i := range keys {
		keys[i] = table.Key{Ifindex: 3, Addr: netip.AddrFrom4([4]byte{10, 0, byte(i >> 8), byte(i)})}
		tb.Apply(table.CauseNetlink, table.Update{Ifindex: 3, Family: table.FamilyInet, Addr: keys[i].Addr, State: table.StateReachable, LLAddr: macOld})
	}
	e := New(fastConfig(ModeDryRun, StrategyProbe), tb, &fakeActor{t: tb, answerAt: -1}, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go e.moves.watch(ctx) // no worker takes them
	<-e.moves.watched
	move := func(k table.Key) {
		tb.Apply(table.CauseNetlink, table.Update{Ifindex: 3, Family: table.FamilyInet, Addr: k.Addr, State: table.StateReachable, LLAddr: macNew})
	}
	// Every move is an address's first, to one MAC: all of one stake.
	for i := range moveQueueCap {
		move(keys[i])
	}
	if got := e.moves.q.Len(); got != moveQueueCap {
		t.Fatalf("%d moves wait, want %d", got, moveQueueCap)
	}
	for i := moveQueueCap; i < n; i++ {
		move(keys[i])
		if got, want := e.Stats().MoveChecked(MoveDropped), uint64(i-moveQueueCap+1); got != want {
			t.Errorf("after %d moves, %d dropped, want %d", i+1, got, want)
		}
	}
	if got := e.moves.q.Len(); got != moveQueueCap {
		t.Errorf("%d moves wait, want %d", got, moveQueueCap)
	}
}

// TestStrategiesRunInConfiguredOrder: the configured order is the order
// they run in, whatever the registry's.
func TestStrategiesRunInConfiguredOrder(t *testing.T) {
	tb := unanswered(1)
	fa := &fakeActor{t: tb, answerAt: -1}
	e := New(fastConfig(ModeOn, StrategyFlush, StrategyKick), tb, fa, nil)
	settle(e, 1)
	if c := fa.Calls(); len(c) == 0 || c[0] != "flush 10.0.0.0" {
		t.Errorf("calls %v: flush, listed first, did not run first", c)
	}
}

// TestNextStrategyAfterAFailure: a strategy that failed hands the entry
// to the next one.
func TestNextStrategyAfterAFailure(t *testing.T) {
	tb := unanswered(1)
	fa := &fakeActor{t: tb, answerAt: -1, kickErr: errors.New("refused")}
	e := New(fastConfig(ModeOn, StrategyKick, StrategyFlush), tb, fa, nil)
	settle(e, 1)
	if c := fa.Calls(); !slices.Equal(c, []string{"kick 10.0.0.0", "flush 10.0.0.0"}) {
		t.Errorf("calls %v, want the kick, then the flush", c)
	}
	if n := e.Stats().Actions[StrategyKick][OutcomeFailed]; n != 1 {
		t.Errorf("%d kicks failed, want 1", n)
	}
}

// TestRepairEndsTheAction: a strategy that repaired the entry (fixed,
// moved, flushed) is the last to run on it; the repair is measured from
// the entry's detection (detection_to_fix) and starts its back-off count
// again.
func TestRepairEndsTheAction(t *testing.T) {
	for _, tc := range []struct {
		name    string
		fa      func(tb *table.Table) *fakeActor
		first   Strategy
		outcome Outcome
	}{
		{"fixed", func(tb *table.Table) *fakeActor { return &fakeActor{t: tb, answerAt: -1, kickFix: true} }, StrategyKick, OutcomeFixed},
		{"moved", func(tb *table.Table) *fakeActor { return &fakeActor{t: tb, answerAt: 1, moveTo: macNew} }, StrategyProbe, OutcomeMoved},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tb := unanswered(1)
			fa := tc.fa(tb)
			k := table.Key{Ifindex: 3, Addr: netip.MustParseAddr("10.0.0.0")}
			e := New(fastConfig(ModeOn, tc.first, StrategyFlush), tb, fa, nil)
			e.cands[k] = &candidate{first: time.Now().Add(-time.Minute).UnixNano(), tries: 3}
			settle(e, 1)
			if n := e.Stats().Actions[tc.first][tc.outcome]; n != 1 {
				t.Fatalf("%d %s by %s, want 1: %+v", n, tc.outcome, tc.first, e.Stats().Actions)
			}
			for _, c := range fa.Calls() {
				if strings.HasPrefix(c, "flush") {
					t.Errorf("calls %v: a flush after the repair", fa.Calls())
				}
			}
			if st := e.Stats(); st.FixCount != 1 || st.FixSum < 60 {
				t.Errorf("detection to fix: %d observed, %.0f s in all; want one of the minute since detection", st.FixCount, st.FixSum)
			}
			if c := e.cands[k]; c.tries != 0 || c.until != 0 {
				t.Errorf("after the repair: %d back-offs counted, until %d; want the count started again", c.tries, c.until)
			}
		})
	}
}

// TestConflictEndsTheAction: when two other MACs answer the broadcast
// probe of a stuck, disputed entry, the conflict ends the action: no
// flush lets the quicker answer win. (The kernel takes neither answer
// here: the entry stays STALE and stuck, a candidate still.)
func TestConflictEndsTheAction(t *testing.T) {
	tb := stuckTable(1)
	third := net.HardwareAddr{2, 0, 0, 0, 0, 3}
	fa := &fakeActor{t: tb, answerAt: 1, moveTo: macNew, spoofer: third, answersIgnored: true}
	e := New(fastConfig(ModeOn, StrategyProbe, StrategyFlush), tb, fa, nil)
	settle(e, 1)
	if n := e.Stats().Actions[StrategyProbe][OutcomeConflict]; n != 1 {
		t.Fatalf("%d probes ended in a conflict, want 1: %+v", n, e.Stats().Actions)
	}
	if c := fa.Calls(); !slices.Equal(c, []string{"probe1 10.0.0.0"}) {
		t.Errorf("calls %v, want the broadcast probe alone", c)
	}
	if en, _ := tb.Lookup(table.Key{Ifindex: 3, Addr: netip.MustParseAddr("10.0.0.0")}); en.Class() != table.ClassStuck {
		t.Errorf("class %v after the conflict, want stuck (a candidate still)", en.Class())
	}
}

// TestDisputedMACIsNeverFixed: a stuck entry whose MAC evidence disputes
// that turns REACHABLE at the same MAC after a kick is not fixed (the
// kernel may confirm it there from the host's own traffic as well as
// from a spoofer's answer).
func TestDisputedMACIsNeverFixed(t *testing.T) {
	tb := stuckTable(1)
	fa := &fakeActor{t: tb, answerAt: -1, kickFix: true}
	e := New(fastConfig(ModeOn, StrategyKick), tb, fa, nil)
	settle(e, 1)
	st := e.Stats().Actions[StrategyKick]
	if st[OutcomeFixed] != 0 || st[OutcomeNoChange] != 1 {
		t.Errorf("kick outcomes %+v, want no-change, never fixed", st)
	}
}

// TestBroadcastOnlyIfUnicastUnanswered: the host answering the unicast
// probe at the entry's MAC ends the probe: no broadcast follows.
func TestBroadcastOnlyIfUnicastUnanswered(t *testing.T) {
	tb := staleTable(1)
	k := table.Key{Ifindex: 3, Addr: netip.MustParseAddr("10.0.0.0")}
	tb.AddBypass(k, 5, time.Now()) // at-risk: no evidence disputes its MAC
	fa := &fakeActor{t: tb, answerAt: 0, moveTo: macOld}
	cfg := fastConfig(ModeOn, StrategyProbe)
	cfg.Scope = ScopeAtRisk
	cfg.ProbeGap = time.Minute // the answer ends the wait, not the gap
	e := New(cfg, tb, fa, nil)
	settle(e, 1)
	if n := e.Stats().Actions[StrategyProbe][OutcomeFixed]; n != 1 {
		t.Fatalf("%d probes fixed the entry, want 1: %+v", n, e.Stats().Actions)
	}
	if c := fa.Calls(); !slices.Equal(c, []string{"probe0 10.0.0.0"}) {
		t.Errorf("calls %v, want the unicast probe alone", c)
	}
}

// TestBackOffCapped: however many times in a row an entry was not
// repaired, its next try is at most BackoffMax away, and by then about
// that far.
func TestBackOffCapped(t *testing.T) {
	tb := unanswered(1)
	e := New(fastConfig(ModeOn, StrategyProbe), tb, &fakeActor{t: tb, answerAt: -1}, nil)
	k := table.Key{Ifindex: 3, Addr: netip.MustParseAddr("10.0.0.0")}
	e.cands[k] = &candidate{first: time.Now().UnixNano()}
	max := e.Config().BackoffMax
	for range 30 {
		e.backOff(k)
	}
	wait := time.Until(time.Unix(0, e.cands[k].until))
	if wait > max || wait < max-time.Minute {
		t.Errorf("after 30 back-offs in a row the next try is %v away, want %v", wait.Round(time.Second), max)
	}
}

// TestDefaultStrategies: the default order by what the kernel and the
// datapath allow: swap first where it can swap, manage where the kernel
// keeps managed entries, then probe, kick, flush.
func TestDefaultStrategies(t *testing.T) {
	for _, tc := range []struct{ manage, swap bool }{{false, false}, {true, false}, {false, true}, {true, true}} {
		want := defaultsFor(t, tc.manage, tc.swap)
		if got := JoinStrategies(DefaultStrategies(tc.manage, tc.swap)); got != want {
			t.Errorf("manage %v, swap %v: %s, want %s", tc.manage, tc.swap, got, want)
		}
	}
}

// defaultsFor is the default order docs/running.md's flag table shows (a
// kernel that keeps managed neighbours, no swap: TestREADMEFlagTable
// holds it to DefaultStrategies(true, false)), as it reads on another
// kernel (manage only where supported) and datapath (swap first where
// it may swap).
func defaultsFor(t *testing.T, manage, swap bool) string {
	t.Helper()
	b, err := os.ReadFile("../docs/running.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("\\| `--remediation\\.strategies` \\| `([a-z,]+)` \\|").FindSubmatch(b)
	if m == nil {
		t.Fatal("docs/running.md's flag table shows no default for --remediation.strategies")
	}
	var out []string
	if swap {
		out = append(out, string(StrategySwap))
	}
	for _, s := range strings.Split(string(m[1]), ",") {
		if s != string(StrategyManage) || manage {
			out = append(out, s)
		}
	}
	return strings.Join(out, ",")
}

// TestReconfigureReachesTheBuckets: a reload's rates reach the node's
// bucket and every interface's, those made before it included, and its
// scope, strategies and filters the next decision; the queue and the
// workers stay as they started.
func TestReconfigureReachesTheBuckets(t *testing.T) {
	tb := stuckTable(1)
	e := New(fastConfig(ModeOn, StrategyProbe), tb, &fakeActor{t: tb, answerAt: -1}, nil)
	before := e.limits.onInterface(3)
	cfg := e.Config()
	cfg.Rate, cfg.PerInterfaceRate = 3, 2
	cfg.Strategies = []Strategy{StrategyFlush}
	cfg.Filter = Filter{ExcludeInterfaces: []*regexp.Regexp{regexp.MustCompile("eth0")}}
	cfg.QueueSize, cfg.MaxConcurrent = 7, 9
	e.Reconfigure(cfg)
	if got := e.limits.global.Limit(); got != 3 {
		t.Errorf("the node's bucket: %v a second, want 3", got)
	}
	if got := before.Limit(); got != 2 {
		t.Errorf("an interface's bucket made before the reload: %v a second, want 2", got)
	}
	if got := e.limits.onInterface(4).Limit(); got != 2 {
		t.Errorf("an interface's bucket made after the reload: %v a second, want 2", got)
	}
	if c := e.Config(); c.QueueSize != Defaults().QueueSize || c.MaxConcurrent != Defaults().MaxConcurrent || cap(e.queue) != Defaults().QueueSize {
		t.Errorf("queue %d (cap %d), %d workers: a reload changed what stays as it started", c.QueueSize, cap(e.queue), c.MaxConcurrent)
	}
	en, _ := tb.Lookup(table.Key{Ifindex: 3, Addr: netip.MustParseAddr("10.0.0.0")})
	if got := e.Next(&en, "eth0"); got != "" {
		t.Errorf("next strategy on an excluded interface: %q, want none", got)
	}
	if got := e.Next(&en, "eth1"); got != StrategyFlush {
		t.Errorf("next strategy: %q, want flush, the reloaded list", got)
	}
}

// TestIdleCountsFromTheLastBypass: a managed entry that carried bypass
// traffic within --manage.idle is not idle, however long ago it was
// managed; one that did not, is.
func TestIdleCountsFromTheLastBypass(t *testing.T) {
	for _, busy := range []bool{true, false} {
		tb := table.New(time.Hour, nil)
		tb.SetLinkName(3, "eth0")
		k := table.Key{Ifindex: 3, Addr: netip.MustParseAddr("10.0.0.7")}
		tb.Apply(table.CauseNetlink, table.Update{Ifindex: 3, Family: table.FamilyInet, Addr: k.Addr, State: table.StateStale,
			LLAddr: macOld, FlagsExt: table.FlagExtManaged, Protocol: table.ProtocolNeighwatch})
		cfg := manageConfig(10)
		cfg.Manage.Idle = time.Hour
		e := New(cfg, tb, &fakeActor{t: tb, answerAt: -1}, nil)
		e.managed.adopt()
		e.managed.owned[k].since = time.Now().Add(-2 * time.Hour).UnixNano()
		if busy {
			tb.AddBypass(k, 3, time.Now().Add(-time.Minute))
		}
		e.managed.maintain(ModeOn)
		want := map[bool]uint64{true: 0, false: 1}[busy]
		if n := e.Stats().Releases[ReleaseIdle]; n != want {
			t.Errorf("bypass a minute ago %v: %d released as idle, want %d", busy, n, want)
		}
	}
}

// TestFailedTimeRestartsWhenValid: the failed timeout counts from the
// entry's latest turn to FAILED: a failure long ago, ended, does not
// count towards a new one.
func TestFailedTimeRestartsWhenValid(t *testing.T) {
	tb := table.New(time.Hour, nil)
	tb.SetLinkName(3, "eth0")
	k := table.Key{Ifindex: 3, Addr: netip.MustParseAddr("10.0.0.7")}
	set := func(s table.State, mac net.HardwareAddr) {
		tb.Apply(table.CauseNetlink, table.Update{Ifindex: 3, Family: table.FamilyInet, Addr: k.Addr, State: s,
			LLAddr: mac, FlagsExt: table.FlagExtManaged, Protocol: table.ProtocolNeighwatch})
	}
	set(table.StateFailed, nil)
	cfg := manageConfig(10)
	cfg.Manage.FailedTimeout = time.Minute
	e := New(cfg, tb, &fakeActor{t: tb, answerAt: -1}, nil)
	e.managed.adopt()
	e.managed.maintain(ModeOn) // FAILED from now
	e.managed.owned[k].failedSince = time.Now().Add(-time.Hour).UnixNano()
	set(table.StateReachable, macOld)
	e.managed.maintain(ModeOn) // valid again
	set(table.StateFailed, nil)
	e.managed.maintain(ModeOn) // FAILED again, just now
	if n := e.Stats().Releases[ReleaseFailed]; n != 0 {
		t.Errorf("%d released as failed the moment they failed again", n)
	}
	e.managed.owned[k].failedSince = time.Now().Add(-2 * time.Minute).UnixNano()
	e.managed.maintain(ModeOn)
	if n := e.Stats().Releases[ReleaseFailed]; n != 1 {
		t.Errorf("%d released as failed after the timeout, want 1", n)
	}
}

// TestReleaseOnExitOnlyWhenSet: a clean shutdown releases the managed
// entries with --manage.release-on-exit, and keeps them without.
func TestReleaseOnExitOnlyWhenSet(t *testing.T) {
	for _, release := range []bool{true, false} {
		tb := table.New(time.Hour, nil)
		tb.SetLinkName(3, "eth0")
		tb.Apply(table.CauseNetlink, table.Update{Ifindex: 3, Family: table.FamilyInet, Addr: netip.MustParseAddr("10.0.0.7"), State: table.StateReachable,
			LLAddr: macOld, FlagsExt: table.FlagExtManaged, Protocol: table.ProtocolNeighwatch})
		cfg := manageConfig(10)
		cfg.Manage.ReleaseOnExit = release
		fa := &fakeActor{t: tb, answerAt: -1}
		e := New(cfg, tb, fa, nil)
		e.managed.adopt()
		e.managed.releaseAll()
		want := map[bool]int{true: 1, false: 0}[release]
		if c := fa.Calls(); len(c) != want {
			t.Errorf("release-on-exit %v: calls %v, want %d release", release, c, want)
		}
	}
}

// unanswered holds n stale-long entries stuck by an unanswered probe
// alone: no other MAC disputes theirs, so being REACHABLE at it again is
// a repair.
func unanswered(n int) *table.Table {
	tbl := staleTable(n)
	for i := range n {
		ip := netip.AddrFrom4([4]byte{10, 0, byte(i >> 8), byte(i)})
		tbl.ProbeUnanswered(table.Key{Ifindex: 3, Addr: ip}, string(macOld), time.Now())
	}
	return tbl
}

// entryAt is one entry of a fresh table, as the table hands it out.
func entryAt(t *testing.T, a netip.Addr, s table.State, mac net.HardwareAddr) table.Entry {
	t.Helper()
	tb := table.New(time.Minute, nil)
	tb.Apply(table.CauseNetlink, table.Update{Ifindex: 3, Family: table.FamilyOf(a), Addr: a, State: s, LLAddr: mac})
	en, ok := tb.Lookup(table.Key{Ifindex: 3, Addr: a})
	if !ok {
		t.Fatalf("%v not in the table", a)
	}
	return en
}

// TestIdleZeroNeverReleases: with --manage.idle=0 a managed entry with
// no traffic for days is kept.
func TestIdleZeroNeverReleases(t *testing.T) {
	tb := table.New(time.Hour, nil)
	tb.SetLinkName(3, "eth0")
	k := table.Key{Ifindex: 3, Addr: netip.MustParseAddr("10.0.0.7")}
	tb.Apply(table.CauseNetlink, table.Update{Ifindex: 3, Family: table.FamilyInet, Addr: k.Addr, State: table.StateStale,
		LLAddr: macOld, FlagsExt: table.FlagExtManaged, Protocol: table.ProtocolNeighwatch})
	cfg := manageConfig(10)
	cfg.Manage.Idle = 0
	e := New(cfg, tb, &fakeActor{t: tb, answerAt: -1}, nil)
	e.managed.adopt()
	e.managed.owned[k].since = time.Now().Add(-72 * time.Hour).UnixNano()
	e.managed.maintain(ModeOn)
	if n, m := e.Stats().Releases[ReleaseIdle], e.managed.Len(); n != 0 || m != 1 {
		t.Errorf("idle 0: %d released as idle, %d still managed; want none released", n, m)
	}
}

// TestReleasesOnlyWhatItStillOwns: an entry neighwatch managed that
// another agent has since made its own (managed, with its protocol) is
// never released as neighwatch's: not by the upkeep (here with
// remediation switched off, which releases the rest), which forgets it,
// nor at a clean shutdown that comes before the upkeep has looked; the
// entries still neighwatch's are released, a valid one kept at its
// address (STALE), not deleted.
func TestReleasesOnlyWhatItStillOwns(t *testing.T) {
	mine, theirs := netip.MustParseAddr("10.0.0.7"), netip.MustParseAddr("10.0.0.8")
	for _, upkeepFirst := range []bool{true, false} {
		tb := table.New(time.Hour, nil)
		tb.SetLinkName(3, "eth0")
		set := func(a netip.Addr, proto uint8) {
			tb.Apply(table.CauseNetlink, table.Update{Ifindex: 3, Family: table.FamilyInet, Addr: a, State: table.StateReachable,
				LLAddr: macOld, FlagsExt: table.FlagExtManaged, Protocol: proto})
		}
		set(mine, table.ProtocolNeighwatch)
		set(theirs, table.ProtocolNeighwatch)
		cfg := manageConfig(10)
		cfg.Manage.ReleaseOnExit = true
		fa := &fakeActor{t: tb, answerAt: -1}
		e := New(cfg, tb, fa, nil)
		e.managed.adopt()
		if n := e.managed.Len(); n != 2 {
			t.Fatalf("%d entries adopted, want 2", n)
		}
		set(theirs, 42) // another agent's now
		if upkeepFirst {
			// Remediation switched off: the upkeep releases every entry
			// that is still neighwatch's.
			e.managed.maintain(ModeOff)
			if c := fa.Calls(); !slices.Equal(c, []string{"release " + mine.String()}) {
				t.Errorf("the upkeep with remediation off, after another agent took an entry: calls %v, want only %s released", c, mine)
			}
		}
		e.managed.releaseAll()
		if c := fa.Calls(); !slices.Equal(c, []string{"release " + mine.String()}) {
			t.Errorf("upkeep first %v: a shutdown's calls %v, want only %s released", upkeepFirst, c, mine)
		}
		if en, ok := tb.Lookup(table.Key{Ifindex: 3, Addr: mine}); !ok || en.State != table.StateStale || en.Owner() != table.OwnerNone {
			t.Errorf("the valid entry released at shutdown: %+v (in the table %v), want kept STALE and managed by none", en, ok)
		}
		if en, _ := tb.Lookup(table.Key{Ifindex: 3, Addr: theirs}); en.Owner() != table.OwnerOther {
			t.Errorf("the other agent's entry after the shutdown: owner %v, want still theirs", en.Owner())
		}
	}
}
