package remediate

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/neighwatch/neighwatch/internal/dev/lab"
	"github.com/neighwatch/neighwatch/table"
)

// fakeActor records calls and, when told to, plays the kernel's part by
// applying the update a real reply would cause.
type fakeActor struct {
	t        *table.Table
	mu       sync.Mutex
	calls    []string
	times    []time.Time
	answerAt int // probe phase the host answers (-1: never)
	moveTo   net.HardwareAddr
	kickFix  bool
	kickErr  error // the kernel refuses the kick
	// spoofer answers broadcast probes, and unicast ones when the entry
	// has its MAC (unless unicastOnly: then only those).
	spoofer     net.HardwareAddr
	unicastOnly bool
	// confirmOld: while the broadcast probe is out the kernel confirms
	// the entry at the MAC it has (a DELAY entry confirmed shortly before
	// the host moved turns REACHABLE without a probe) and keeps it there,
	// as it does for a managed entry whatever the answer.
	confirmOld bool
	listens    []time.Duration // each probe's listen, in order
	unicasts   []string        // the MAC each unicast probe went to, in order
	// manageIgnored: the kernel takes the manage request and never
	// marks the entry managed.
	manageIgnored bool
	// answersIgnored: the kernel takes no answer to a probe (they came
	// within its locktime): the entry stays as it was.
	answersIgnored bool
}

func (f *fakeActor) log(s string) {
	f.mu.Lock()
	f.calls = append(f.calls, s)
	f.times = append(f.times, time.Now())
	f.mu.Unlock()
}

func (f *fakeActor) Probe(_ context.Context, e *table.Entry, phase int, listen time.Duration) ([]net.HardwareAddr, error) {
	f.log(fmt.Sprintf("probe%d %s", phase, e.Addr))
	f.mu.Lock()
	f.listens = append(f.listens, listen)
	if phase == 0 {
		f.unicasts = append(f.unicasts, e.LLAddr)
	}
	f.mu.Unlock()
	var who []net.HardwareAddr
	if f.spoofer != nil && ((phase == 1 && !f.unicastOnly) || (phase == 0 && e.LLAddr == string(f.spoofer))) {
		who = append(who, f.spoofer) // the quickest
	}
	if phase == f.answerAt {
		who = append(who, f.moveTo)
	}
	if len(who) == 0 {
		return nil, nil
	}
	if f.answersIgnored {
		return who, nil
	}
	if f.confirmOld && listen > 0 {
		f.t.Apply(table.CauseNetlink, table.Update{Ifindex: e.Ifindex, Family: table.FamilyOf(e.Addr), Addr: e.Addr, State: table.StateReachable,
			LLAddr: []byte(e.LLAddr), FlagsExt: e.FlagsExt, Protocol: e.Protocol})
		return who, nil
	}
	// The kernel takes the first answer.
	u := table.Update{Ifindex: e.Ifindex, Family: table.FamilyInet, Addr: e.Addr, State: table.StateReachable, LLAddr: who[0]}
	if listen > 0 {
		f.t.Apply(table.CauseNetlink, u) // done by the time the listen ends
		return who, nil
	}
	go f.t.Apply(table.CauseNetlink, u)
	return nil, nil
}

func (f *fakeActor) Kick(e *table.Entry) error {
	f.log("kick " + e.Addr.String())
	if f.kickErr != nil {
		return f.kickErr
	}
	if f.kickFix {
		go f.t.Apply(table.CauseNetlink, table.Update{Ifindex: e.Ifindex, Family: table.FamilyInet, Addr: e.Addr, State: table.StateReachable, LLAddr: []byte(e.LLAddr)})
	}
	return nil
}

func (f *fakeActor) Flush(e *table.Entry) error {
	f.log("flush " + e.Addr.String())
	go f.t.Apply(table.CauseNetlink, table.Update{Delete: true, Ifindex: e.Ifindex, Family: table.FamilyInet, Addr: e.Addr})
	return nil
}

// Manage plays the kernel: the entry becomes managed with neighwatch's
// protocol, its address and state kept.
func (f *fakeActor) Manage(e *table.Entry) error {
	f.log("manage " + e.Addr.String())
	if f.manageIgnored {
		return nil
	}
	go f.t.Apply(table.CauseNetlink, table.Update{Ifindex: e.Ifindex, Family: table.FamilyOf(e.Addr), Addr: e.Addr, State: e.State,
		LLAddr: []byte(e.LLAddr), FlagsExt: table.FlagExtManaged, Protocol: table.ProtocolNeighwatch})
	return nil
}

// Release plays the kernel: STALE without managed (the protocol stays),
// or deleted.
func (f *fakeActor) Release(k table.Key, valid bool) error {
	f.log("release " + k.Addr.String())
	cur, ok := f.t.Lookup(k)
	if !ok {
		return nil
	}
	u := table.Update{Ifindex: k.Ifindex, Family: table.FamilyOf(k.Addr), Addr: k.Addr, State: table.StateStale, LLAddr: []byte(cur.LLAddr), Protocol: cur.Protocol}
	if !valid {
		u = table.Update{Delete: true, Ifindex: k.Ifindex, Family: table.FamilyOf(k.Addr), Addr: k.Addr}
	}
	f.t.Apply(table.CauseNetlink, u)
	return nil
}

// Repoint plays the kernel: STALE at mac, managed kept. With confirmOld
// the table hears of it a little later, as through the mirror.
func (f *fakeActor) Repoint(e *table.Entry, mac net.HardwareAddr) error {
	f.log("repoint " + e.Addr.String() + " " + mac.String())
	u := table.Update{Ifindex: e.Ifindex, Family: table.FamilyOf(e.Addr), Addr: e.Addr, State: table.StateStale,
		LLAddr: mac, FlagsExt: table.FlagExtManaged, Protocol: table.ProtocolNeighwatch}
	if f.confirmOld {
		go func() {
			time.Sleep(20 * time.Millisecond)
			f.t.Apply(table.CauseNetlink, u)
		}()
		return nil
	}
	f.t.Apply(table.CauseNetlink, u)
	return nil
}

func (f *fakeActor) Calls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...)
}

// staleTable holds n stale-long IPv4 entries with no evidence.
func staleTable(n int) *table.Table {
	tbl := table.New(time.Nanosecond, nil)
	tbl.SetLinkName(3, "eth0")
	for i := 0; i < n; i++ {
		ip := netip.AddrFrom4([4]byte{10, 0, byte(i >> 8), byte(i)})
		tbl.Apply(table.CauseNetlink, table.Update{Ifindex: 3, Family: table.FamilyInet, Addr: ip, State: table.StateStale, LLAddr: macOld})
	}
	return tbl
}

// stuckTable holds n stuck IPv4 entries: ARP saw them at another MAC,
// and a probe to their own went unanswered.
func stuckTable(n int) *table.Table {
	tbl := suspectTable(n)
	for i := 0; i < n; i++ {
		ip := netip.AddrFrom4([4]byte{10, 0, byte(i >> 8), byte(i)})
		tbl.ProbeUnanswered(table.Key{Ifindex: 3, Addr: ip}, string(macOld), time.Now())
	}
	return tbl
}

// suspectTable holds n suspect IPv4 entries: ARP saw them at another MAC,
// their own not asked yet.
func suspectTable(n int) *table.Table {
	tbl := table.New(time.Nanosecond, nil)
	tbl.SetLinkName(3, "eth0")
	for i := 0; i < n; i++ {
		ip := netip.AddrFrom4([4]byte{10, 0, byte(i >> 8), byte(i)})
		tbl.Apply(table.CauseNetlink, table.Update{Ifindex: 3, Family: table.FamilyInet, Addr: ip, State: table.StateStale, LLAddr: macOld})
		tbl.ObserveMAC(3, ip, macNew, time.Now())
	}
	return tbl
}

func fastConfig(mode Mode, strategies ...Strategy) Config {
	return Config{Mode: mode, Scope: ScopeStuck, Strategies: strategies, Rate: 1000, PerInterfaceRate: 1000, ProbeGap: 20 * time.Millisecond,
		VerifyTimeout: 100 * time.Millisecond, KernelTimeout: 100 * time.Millisecond, SweepInterval: 10 * time.Millisecond}
}

func runEngine(t *testing.T, e *Engine) func() {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { e.Run(ctx); close(done) }()
	return func() { cancel(); <-done }
}

// TestEngineProbeMoves: an entry ARP saw at another MAC is disputed: the
// probe goes to everyone at once, and the host's answer from its new MAC
// is a move.
func TestEngineProbeMoves(t *testing.T) {
	tb := stuckTable(1)
	fa := &fakeActor{t: tb, answerAt: 1, moveTo: macNew}
	e := New(fastConfig(ModeOn, StrategyProbe, StrategyKick), tb, fa, nil)
	stop := runEngine(t, e)
	defer stop()
	// The outcome is counted first and the time to fix observed just
	// after (under qemu-aarch64 a read fell between them): wait for both.
	lab.WaitFor(t, 5*time.Second, "a moved outcome and one detection-to-fix observation", func() bool {
		st := e.Stats()
		return st.Actions[StrategyProbe][OutcomeMoved] == 1 && st.FixCount == 1
	})
	if got := fa.Calls(); len(got) != 1 || got[0] != "probe1 10.0.0.0" {
		t.Fatalf("calls = %v, want one broadcast probe", got)
	}
	if n := e.Stats().FixCount; n != 1 {
		t.Errorf("detection-to-fix observations = %d, want 1", n)
	}
}

// TestEngineProbeUnicastFirst: with nothing disputing the entry's MAC the
// probe goes there first, as the kernel's would, then to everyone.
func TestEngineProbeUnicastFirst(t *testing.T) {
	tb := staleTable(1)
	fa := &fakeActor{t: tb, answerAt: 1, moveTo: macNew}
	cfg := fastConfig(ModeOn, StrategyProbe, StrategyKick)
	cfg.Scope = ScopeAllStale
	e := New(cfg, tb, fa, nil)
	stop := runEngine(t, e)
	defer stop()
	lab.WaitFor(t, 5*time.Second, "a moved outcome", func() bool { return e.Stats().Actions[StrategyProbe][OutcomeMoved] == 1 })
	if got := fa.Calls(); len(got) != 2 || got[0] != "probe0 10.0.0.0" || got[1] != "probe1 10.0.0.0" {
		t.Fatalf("calls = %v, want unicast then broadcast probe", got)
	}
}

func TestEngineFallsThroughStrategies(t *testing.T) {
	tb := staleTable(1)
	fa := &fakeActor{t: tb, answerAt: -1, kickFix: true}
	cfg := fastConfig(ModeOn, StrategyProbe, StrategyKick, StrategyFlush)
	cfg.Scope = ScopeAllStale
	e := New(cfg, tb, fa, nil)
	stop := runEngine(t, e)
	defer stop()
	lab.WaitFor(t, 5*time.Second, "kick to fix it", func() bool { return e.Stats().Actions[StrategyKick][OutcomeFixed] == 1 })
	if e.Stats().Actions[StrategyProbe][OutcomeNoChange] != 1 || e.Stats().Actions[StrategyFlush][OutcomeFlushed] != 0 {
		t.Fatalf("probe no-change %d, flush %d", e.Stats().Actions[StrategyProbe][OutcomeNoChange], e.Stats().Actions[StrategyFlush][OutcomeFlushed])
	}
}

// TestEngineSpooferIsConflict: the kernel took a spoofer's MAC and ARP
// saw the host at its own. The confirmation asks the entry's MAC, and
// the spoofer answers it: two MACs answer for the IP in ARP, a conflict,
// not a host with two MACs and not a repair. Remediation leaves a
// conflict alone: nothing fixed, flushed or repointed.
func TestEngineSpooferIsConflict(t *testing.T) {
	macSpoof := net.HardwareAddr{2, 0, 0, 0, 0, 0x66}
	for _, tc := range []struct {
		name        string
		hostAnswers bool
		unicastOnly bool
	}{
		{"host and spoofer answer the broadcast", true, false},
		{"only the spoofer answers", false, false},
		{"the spoofer answers only unicast", false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tb := table.New(time.Nanosecond, nil)
			ip := netip.MustParseAddr("10.0.0.9")
			k := table.Key{Ifindex: 3, Addr: ip}
			tb.Apply(table.CauseNetlink, table.Update{Ifindex: 3, Family: table.FamilyInet, Addr: ip, State: table.StateStale, LLAddr: macSpoof})
			tb.ObserveMAC(3, ip, macNew, time.Now()) // the host, at its own MAC
			fa := &fakeActor{t: tb, answerAt: -1, spoofer: macSpoof, unicastOnly: tc.unicastOnly, moveTo: macNew, kickFix: true}
			if tc.hostAnswers {
				fa.answerAt = 1
			}
			e := New(fastConfig(ModeOn, StrategyProbe, StrategyKick, StrategyFlush), tb, fa, nil)
			settle(e, 1)
			if en, _ := tb.Lookup(k); en.Class() != table.ClassConflict {
				t.Fatalf("class %v after the confirmation, want conflict", en.Class())
			}
			settle(e, 3) // more sweeps: nothing acts on a conflict
			for _, s := range Strategies() {
				for _, o := range []Outcome{OutcomeFixed, OutcomeMoved, OutcomeFlushed} {
					if n := e.Stats().Actions[s][o]; n != 0 {
						t.Errorf("%s: %d %s", s, n, o)
					}
				}
			}
			if got := fa.Calls(); len(got) != 1 || got[0] != "probe0 10.0.0.9" {
				t.Errorf("calls %v, want the confirmation's unicast probe alone", got)
			}
			en, _ := tb.Lookup(k)
			ev := en.Evidence()
			if len(ev) == 0 || ev[len(ev)-1].Signal != table.SignalConflict || ev[len(ev)-1].MAC.String() != macNew.String() {
				t.Fatalf("entry class %v evidence %v, want a conflict with %v", en.Class(), ev, macNew)
			}
			if n := e.Stats().Confirmed(ConfirmAnswered); n != 1 {
				t.Errorf("%d confirmations answered, want 1", n)
			}
		})
	}
}

// TestConfirmation: a suspect entry gets unicast probes to its own MAC,
// in dry-run as in on, and nothing else: a host that answers there is a
// host with two MACs (the other becomes its, and the entry is not
// stuck); one that does not answer is stuck, and in dry-run nothing more
// is sent. Off sends nothing.
func TestConfirmation(t *testing.T) {
	for _, tc := range []struct {
		name    string
		mode    Mode
		answers bool
		want    ConfirmOutcome
		class   table.Class
	}{
		// Its answer makes the kernel hold the entry REACHABLE: ok.
		{"dry-run, its MAC answers", ModeDryRun, true, ConfirmAnswered, table.ClassOK},
		{"dry-run, silent", ModeDryRun, false, ConfirmUnanswered, table.ClassStuck},
		{"on, its MAC answers", ModeOn, true, ConfirmAnswered, table.ClassOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The host's packets came from another MAC (a bond's second
			// slave, say).
			tb := table.New(time.Nanosecond, nil)
			k := table.Key{Ifindex: 3, Addr: netip.MustParseAddr("10.0.0.0")}
			tb.Apply(table.CauseNetlink, table.Update{Ifindex: 3, Family: table.FamilyInet, Addr: k.Addr, State: table.StateStale, LLAddr: macOld})
			tb.ObserveSourceMAC(k, macNew, 1, time.Now())
			fa := &fakeActor{t: tb, answerAt: -1}
			if tc.answers {
				fa.spoofer = macOld // whoever holds the entry's MAC answers it
				fa.unicastOnly = true
			}
			e := New(fastConfig(tc.mode, StrategyProbe, StrategyFlush), tb, fa, nil)
			settle(e, 1)
			if n := e.Stats().Confirmed(tc.want); n != 1 {
				t.Fatalf("%d confirmations %s, want 1", n, tc.want)
			}
			settle(e, 3) // more sweeps: one confirmation per suspicion
			en, _ := tb.Lookup(k)
			if en.Class() != tc.class {
				t.Errorf("class %v, want %v", en.Class(), tc.class)
			}
			if tc.answers && (en.Suspect() || !en.MultiMAC()) {
				t.Errorf("answered: suspect %v, multi-MAC %v", en.Suspect(), en.MultiMAC())
			}
			calls := fa.Calls()
			probes := 0
			for _, c := range calls {
				switch c {
				case "probe0 10.0.0.0":
					probes++
				default:
					if tc.mode == ModeDryRun {
						t.Errorf("dry-run sent %q: only unicast probes to the entry's MAC", c)
					}
				}
			}
			if want := map[bool]int{true: 1, false: ConfirmProbes}[tc.answers]; probes != want {
				t.Errorf("%d unicast probes, want %d: %v", probes, want, calls)
			}
		})
	}
	tb := suspectTable(1)
	fa := &fakeActor{t: tb, answerAt: -1}
	e := New(fastConfig(ModeOff, StrategyProbe), tb, fa, nil)
	settle(e, 3)
	if c := fa.Calls(); len(c) != 0 {
		t.Errorf("off sent %v", c)
	}
}

func TestEngineDryRunTouchesNothing(t *testing.T) {
	tb := stuckTable(3)
	fa := &fakeActor{t: tb, answerAt: 1, moveTo: macNew}
	e := New(fastConfig(ModeDryRun, StrategyProbe, StrategyFlush), tb, fa, nil)
	settle(e, 1)
	if n := e.Stats().Actions[StrategyProbe][OutcomeDryRun]; n != 3 {
		t.Fatalf("dry-run counted %d, want 3", n)
	}
	settle(e, 3) // more sweeps: the back-off keeps the count
	if n := e.Stats().Actions[StrategyProbe][OutcomeDryRun]; n != 3 {
		t.Errorf("dry-run counted %d, want 3 (once per entry until its backoff ends)", n)
	}
	if c := fa.Calls(); len(c) != 0 {
		t.Fatalf("dry-run called the actor: %v", c)
	}
	// Switching to on at runtime acts, at once.
	e.SetMode(ModeOn)
	settle(e, 1)
	if n := e.Stats().Actions[StrategyProbe][OutcomeMoved]; n != 3 {
		t.Errorf("%d repairs after switching on, want 3", n)
	}
}

// TestEngineRateLimit: the global bucket and each interface's bucket
// hold actions to their rates, each with the other set far higher.
func TestEngineRateLimit(t *testing.T) {
	for _, tc := range []struct {
		name             string
		global, perIface float64
	}{{"global", 20, 1000}, {"per interface", 1000, 20}} {
		t.Run(tc.name, func(t *testing.T) {
			tb := stuckTable(60)
			fa := &fakeActor{t: tb, answerAt: -1}
			cfg := fastConfig(ModeOn, StrategyProbe)
			cfg.Rate, cfg.PerInterfaceRate, cfg.Burst, cfg.MaxConcurrent = tc.global, tc.perIface, 1, 8
			cfg.VerifyTimeout, cfg.ProbeGap = 5*time.Millisecond, time.Millisecond
			made := time.Now() // the limiters are made in New, after this
			e := New(cfg, tb, fa, nil)
			stop := runEngine(t, e)
			// Probes mark the start of actions (the entries are disputed:
			// one broadcast probe each).
			starts := func() []time.Time {
				fa.mu.Lock()
				defer fa.mu.Unlock()
				var out []time.Time
				for i, c := range fa.calls {
					if c[:6] == "probe1" {
						out = append(out, fa.times[i])
					}
				}
				return out
			}
			const n = 30
			lab.WaitFor(t, 30*time.Second, fmt.Sprint(n, " actions"), func() bool { return len(starts()) >= n })
			stop()
			// A bucket of rate 20 and burst 1 grants its k-th token (from
			// 0) no sooner than k/20 s after it was made, however slow the
			// machine: a busy CPU only delays actions. Without a working
			// limiter, 8 workers start 30 actions within a few
			// milliseconds. (The interface's bucket is made at its first
			// action, after made: its tokens come later still.)
			got := starts()
			for k := range n {
				if earliest := made.Add(time.Duration(k) * time.Second / 20); got[k].Before(earliest) {
					t.Fatalf("action %d started %v after the limiter was made, before its token (%v)", k, got[k].Sub(made), earliest.Sub(made))
				}
			}
			if e.Stats().Counts[RateLimited] == 0 {
				t.Error("no action counted as rate-limited")
			}
		})
	}
}

// TestStrategyForDecision: prevention (an at-risk entry outside the
// scope) uses manage alone, and when manage cannot act nothing else may
// touch an entry that is only at-risk; a managed entry whose host moved
// gets only a strategy that repairs a move, whatever the order of the
// strategies.
func TestStrategyForDecision(t *testing.T) {
	tb := table.New(time.Nanosecond, nil)
	tb.SetLinkName(3, "eth0")
	atRisk := table.Key{Ifindex: 3, Addr: netip.MustParseAddr("10.0.0.1")}
	moved := table.Key{Ifindex: 3, Addr: netip.MustParseAddr("10.0.0.2")}
	tb.Apply(table.CauseNetlink, table.Update{Ifindex: 3, Family: table.FamilyInet, Addr: atRisk.Addr, State: table.StateStale, LLAddr: macOld})
	tb.AddBypass(atRisk, 10, time.Now())
	tb.Apply(table.CauseNetlink, table.Update{Ifindex: 3, Family: table.FamilyInet, Addr: moved.Addr, State: table.StateStale, LLAddr: macOld,
		FlagsExt: table.FlagExtManaged, Protocol: table.ProtocolNeighwatch})
	tb.ObserveSourceMAC(moved, macNew, 3, time.Now())
	cfg := fastConfig(ModeOn, StrategyManage, StrategyKick, StrategyProbe, StrategyFlush) // scope stuck
	cfg.Manage = ManageConfig{Supported: true, Max: 1, FailedTimeout: time.Hour, Interval: time.Hour}
	e := New(cfg, tb, &fakeActor{t: tb, answerAt: -1}, nil)
	next := func(k table.Key) Strategy {
		en, ok := tb.Lookup(k)
		if !ok {
			t.Fatalf("%v not in the table", k.Addr)
		}
		return e.Next(&en, "eth0")
	}
	if en, _ := tb.Lookup(atRisk); en.Class() != table.ClassAtRisk {
		t.Fatalf("the bypassed entry is %v, want at-risk", en.Class())
	}
	if got := next(atRisk); got != StrategyManage {
		t.Errorf("an at-risk entry under the manage cap: next %q, want manage", got)
	}
	e.managed.set(table.Key{Ifindex: 3, Addr: netip.MustParseAddr("10.0.0.9")}, &owned{}) // the cap is full
	if got := next(atRisk); got != "" {
		t.Errorf("an at-risk entry with the manage cap full: next %q, want none: prevention must not probe, kick or flush", got)
	}
	if got := next(moved); got != StrategyProbe {
		t.Errorf("a managed entry whose host moved: next %q, want probe (kick and manage do not repair a move)", got)
	}
}

// blockingActor never returns until released: the queue fills.
type blockingActor struct{ release chan struct{} }

func (b *blockingActor) Manage(*table.Entry) error                    { return nil }
func (b *blockingActor) Release(table.Key, bool) error                { return nil }
func (b *blockingActor) Repoint(*table.Entry, net.HardwareAddr) error { return nil }

func (b *blockingActor) Probe(context.Context, *table.Entry, int, time.Duration) ([]net.HardwareAddr, error) {
	<-b.release
	return nil, nil
}
func (b *blockingActor) Kick(*table.Entry) error  { return nil }
func (b *blockingActor) Flush(*table.Entry) error { return nil }

func TestEngineQueueDropsInsteadOfGrowing(t *testing.T) {
	tb := stuckTable(50)
	ba := &blockingActor{release: make(chan struct{})}
	cfg := fastConfig(ModeOn, StrategyProbe)
	cfg.QueueSize, cfg.MaxConcurrent = 5, 1
	e := New(cfg, tb, ba, nil)
	stop := runEngine(t, e)
	lab.WaitFor(t, 5*time.Second, "drops", func() bool { return e.Stats().Counts[QueueFull] > 0 })
	if q := e.Stats().Queue; q > 5 {
		t.Fatalf("queue grew to %d", q)
	}
	close(ba.release)
	stop()
}

func TestEngineNeverTouchesOwnedEntries(t *testing.T) {
	tb := table.New(time.Nanosecond, nil)
	add := func(ip string, st table.State, flags uint8, ext uint32) {
		a := netip.MustParseAddr(ip)
		tb.Apply(table.CauseNetlink, table.Update{Ifindex: 3, Family: table.FamilyInet, Addr: a, State: st, Flags: flags, FlagsExt: ext, LLAddr: macOld})
		tb.ObserveMAC(3, a, macNew, time.Now())
	}
	add("10.0.0.1", table.StatePermanent, 0, 0)
	add("10.0.0.2", table.StateNoARP, 0, 0)
	add("10.0.0.3", table.StateStale, table.FlagExtLearned, 0)
	add("10.0.0.4", table.StateStale, 0, table.FlagExtManaged)
	add("10.0.0.5", table.StateStale, 0, 0) // the control: this one is flushed
	fa := &fakeActor{t: tb, answerAt: -1}
	cfg := fastConfig(ModeOn, StrategyFlush)
	cfg.Scope = ScopeAllStale
	e := New(cfg, tb, fa, nil)
	settle(e, 3)
	if n := e.Stats().Actions[StrategyFlush][OutcomeFlushed]; n != 1 {
		t.Errorf("%d flushed, want the control entry", n)
	}
	if c := fa.Calls(); len(c) != 1 || c[0] != "flush 10.0.0.5" {
		t.Fatalf("actor calls = %v, want only flush 10.0.0.5", c)
	}
}

// TestDryRunSwitchedOnWhileWaiting: an entry waiting for its token in
// dry-run when remediation is switched on is not recorded as dry-run nor
// backed off (30 s): the next sweep acts on it in the new mode.
func TestDryRunSwitchedOnWhileWaiting(t *testing.T) {
	tb := stuckTable(1)
	fa := &fakeActor{t: tb, answerAt: 1, moveTo: macNew}
	e := New(fastConfig(ModeDryRun, StrategyProbe), tb, fa, nil)
	g := holdTokens(e)
	e.sweep()
	k := <-e.queue
	done := inBackground(func() { e.handleQueued(context.Background(), k) })
	g.waiter(t, done) // dry-run decides at the pace of on
	e.SetMode(ModeOn)
	close(g.open)
	<-done
	if n := e.Stats().Actions[StrategyProbe][OutcomeDryRun]; n != 0 {
		t.Errorf("%d dry-run records, want none: the mode changed while it waited", n)
	}
	settle(e, 1)
	if n := e.Stats().Actions[StrategyProbe][OutcomeMoved]; n != 1 {
		t.Errorf("%d repairs in mode on at the next sweep, want 1 (no back-off from the dry-run)", n)
	}
}

// TestDefaultsInOnePlace: a configuration left zero gets Defaults(), the
// values the agent's flags declare (cmd/neighwatch checks its side).
func TestDefaultsInOnePlace(t *testing.T) {
	var c Config
	c.defaults()
	d := Defaults()
	if c.Rate != d.Rate || c.PerInterfaceRate != d.PerInterfaceRate || c.MaxConcurrent != d.MaxConcurrent || c.QueueSize != d.QueueSize ||
		c.VerifyTimeout != d.VerifyTimeout || c.KernelTimeout != d.KernelTimeout || c.Manage.Max != d.Manage.Max ||
		c.Manage.FailedTimeout != d.Manage.FailedTimeout {
		t.Errorf("defaults() gave %+v, Defaults() is %+v", c, d)
	}
}
