package remediate

import (
	"context"
	"net"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/neighwatch/neighwatch/internal/dev/lab"
	"github.com/neighwatch/neighwatch/table"
)

// TestMoveCheck: when the kernel points an entry at another MAC, the
// engine asks the old MAC, unicast, whether it still holds the IP, in
// dry-run and on: an answer from it (a hijack: the host is still there)
// makes the entry a conflict; silence, or answers only from the new MAC,
// leaves a move. Not in off, not with NoConfirm, and not between MACs the
// table knows as the host's own.
func TestMoveCheck(t *testing.T) {
	k := table.Key{Ifindex: 3, Addr: netip.MustParseAddr("10.0.0.7")}
	// The hijack's answer makes the kernel point the entry back at the
	// host (a reply past the locktime): a move of its own, whose check
	// asks the spoofer's MAC, silent in this fake.
	hijacked := map[MoveOutcome]uint64{MoveAnswered: 1, MoveUnanswered: 1}
	moved := map[MoveOutcome]uint64{MoveUnanswered: 1}
	for _, tc := range []struct {
		name      string
		mode      Mode
		noConfirm bool
		hostMACs  bool // macNew is known as the host's second MAC
		thirdMAC  bool // a third MAC, neither old nor new, is known as the host's
		old, new  bool // who answers a request sent to the old MAC
		want      map[MoveOutcome]uint64
		probes    int
		class     table.Class
	}{
		{name: "hijack, dry-run", mode: ModeDryRun, old: true, want: hijacked, probes: 1 + ConfirmProbes, class: table.ClassConflict},
		{name: "hijack, on", mode: ModeOn, old: true, want: hijacked, probes: 1 + ConfirmProbes, class: table.ClassConflict},
		{name: "moved", mode: ModeDryRun, want: moved, probes: ConfirmProbes, class: table.ClassOK},
		{name: "moved, the new MAC announcing", mode: ModeDryRun, new: true, want: moved, probes: ConfirmProbes, class: table.ClassOK},
		{name: "off", mode: ModeOff, old: true},
		{name: "no confirmations", mode: ModeDryRun, noConfirm: true, old: true},
		{name: "between the host's own MACs", mode: ModeDryRun, hostMACs: true, old: true, class: table.ClassOK},
		{name: "hijack of a host known at a third MAC", mode: ModeDryRun, thirdMAC: true, old: true, want: hijacked, probes: 1 + ConfirmProbes, class: table.ClassConflict},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tb := table.New(time.Minute, nil)
			tb.Apply(table.CauseNetlink, table.Update{Ifindex: 3, Family: table.FamilyInet, Addr: k.Addr, State: table.StateStale, LLAddr: macOld,
				HasCacheInfo: true, UpdatedAge: time.Hour})
			if tc.hostMACs {
				// macNew sent with the host's address while macOld answered.
				tb.ObserveSourceMAC(k, macNew, 1, time.Now())
				tb.Heard(k, macOld, time.Now())
				if en, _ := tb.Lookup(k); len(en.OtherMACs()) != 1 {
					t.Fatalf("other MACs %v: macNew not known as the host's", en.OtherMACs())
				}
			}
			if tc.thirdMAC {
				third := net.HardwareAddr{2, 0, 0, 0, 0, 3}
				tb.ObserveSourceMAC(k, third, 1, time.Now())
				tb.Heard(k, macOld, time.Now())
				if en, _ := tb.Lookup(k); len(en.OtherMACs()) != 1 || en.OtherMACs()[0].MAC != string(third) {
					t.Fatalf("other MACs %v: the third MAC not known as the host's", en.OtherMACs())
				}
			}
			fa := &fakeActor{t: tb, answerAt: -1, unicastOnly: true}
			if tc.old {
				fa.spoofer = macOld // answers a unicast request sent to it
			}
			if tc.new {
				fa.answerAt, fa.moveTo = 0, macNew // the new MAC answers every request
			}
			cfg := fastConfig(tc.mode, StrategyProbe)
			cfg.NoConfirm = tc.noConfirm
			e := New(cfg, tb, fa, nil)
			// The moves are watched as the engine does; their checks run
			// here, one at a time, each to its end: what a check did not
			// send, it never will.
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			go e.moves.watch(ctx)
			<-e.moves.watched
			// The kernel takes another MAC for the address.
			tb.Apply(table.CauseNetlink, table.Update{Ifindex: 3, Family: table.FamilyInet, Addr: k.Addr, State: table.StateReachable, LLAddr: macNew})
			moves := 1
			if tc.want[MoveAnswered] > 0 {
				moves = 2 // and the kernel's move back at the hijack's answer
			}
			for range moves {
				// The move is queued while the table publishes it.
				mc, ok := e.moves.q.take()
				if !ok {
					t.Fatal("no move queued for its check")
				}
				e.moves.check(ctx, mc)
			}
			if n := e.moves.q.Len(); n != 0 {
				t.Errorf("%d more moves queued, want %d in all", n, moves)
			}
			var probes int
			for _, c := range fa.Calls() {
				if c == "probe0 "+k.Addr.String() {
					probes++
				} else {
					t.Errorf("sent %q: a move check sends only unicast probes to the old MAC", c)
				}
			}
			if probes != tc.probes {
				t.Errorf("%d probes, want %d", probes, tc.probes)
			}
			st := e.Stats()
			for _, o := range MoveOutcomes() {
				if st.MoveChecked(o) != tc.want[o] {
					t.Errorf("move checks %s: %d, want %d", o, st.MoveChecked(o), tc.want[o])
				}
			}
			en, _ := tb.Lookup(k)
			if en.Class() != tc.class {
				t.Errorf("class %v, want %v", en.Class(), tc.class)
			}
			if tc.want[MoveAnswered] > 0 {
				macs := en.Observed().ConflictMACs
				if !slices.Contains(macs[:], string(macOld)) || !slices.Contains(macs[:], string(macNew)) {
					t.Errorf("conflict between %q, want %v and %v", macs, macOld, macNew)
				}
			}
		})
	}
}

// TestOwnRepairIsNotMoveChecked: the move a strategy makes is not checked
// (it acted because the old MAC was found silent), however late the
// check would run; a move the kernel makes afterwards is. One worker, so
// checks run in the order of the moves: once the later move's check has
// asked its old MAC, a check of the repair's move would have asked
// macOld before it.
func TestOwnRepairIsNotMoveChecked(t *testing.T) {
	tb := stuckTable(1)
	k := table.Key{Ifindex: 3, Addr: netip.MustParseAddr("10.0.0.0")}
	fa := &fakeActor{t: tb, answerAt: 1, moveTo: macNew}
	cfg := fastConfig(ModeOn, StrategyProbe)
	cfg.MaxConcurrent = 1
	e := New(cfg, tb, fa, nil)
	stop := runEngine(t, e)
	defer stop()
	<-e.moves.watched
	lab.WaitFor(t, 5*time.Second, "the repair's move", func() bool { return e.Stats().Actions[StrategyProbe][OutcomeMoved] == 1 })
	// Then the kernel moves the entry on its own (the repair ended).
	third := net.HardwareAddr{2, 0, 0, 0, 0, 3}
	tb.Apply(table.CauseNetlink, table.Update{Ifindex: 3, Family: table.FamilyInet, Addr: k.Addr, State: table.StateReachable, LLAddr: third})
	unicasts := func() (toOld, toNew int) {
		fa.mu.Lock()
		defer fa.mu.Unlock()
		for _, m := range fa.unicasts {
			switch m {
			case string(macOld):
				toOld++
			case string(macNew):
				toNew++
			}
		}
		return toOld, toNew
	}
	lab.WaitFor(t, 5*time.Second, "the kernel's move checked", func() bool { _, n := unicasts(); return n == ConfirmProbes })
	if toOld, _ := unicasts(); toOld != 0 {
		t.Errorf("%d move-check probes to %v: the repair's own move was checked", toOld, macOld)
	}
}

// TestIsMove: only a known entry pointed from one MAC at another is a
// move; an entry resolving for the first time, or losing its MAC
// (INCOMPLETE, FAILED), is not.
func TestIsMove(t *testing.T) {
	a, b := net.HardwareAddr(macOld), net.HardwareAddr(macNew)
	for _, tc := range []struct {
		name string
		ev   table.Event
		want bool
	}{
		{"a to b", table.Event{Kind: table.KindTransition, OldLLAddr: a, LLAddr: b}, true},
		{"a to a", table.Event{Kind: table.KindTransition, OldLLAddr: a, LLAddr: a}, false},
		{"first resolved", table.Event{Kind: table.KindTransition, LLAddr: b}, false},
		{"lost its MAC", table.Event{Kind: table.KindTransition, OldLLAddr: a}, false},
		{"created", table.Event{Kind: table.KindTransition, Created: true, OldLLAddr: a, LLAddr: b}, false},
		{"deleted", table.Event{Kind: table.KindTransition, Deleted: true, OldLLAddr: a, LLAddr: b}, false},
		{"not a transition", table.Event{Kind: table.KindMismatch, OldLLAddr: a, LLAddr: b}, false},
	} {
		if got := isMove(tc.ev); got != tc.want {
			t.Errorf("%s: isMove %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestActingMarksNest: a key stays marked until every mark on it is
// dropped, and a dropped mark leaves nothing behind.
func TestActingMarksNest(t *testing.T) {
	a := acting{keys: map[table.Key]int{}}
	k := table.Key{Ifindex: 3, Addr: netip.MustParseAddr("10.0.0.7")}
	barriers := 0
	barrier := func() { barriers++ }
	first := a.mark(k, barrier)
	second := a.mark(k, barrier)
	first()
	if !a.has(k) {
		t.Errorf("one of two marks dropped: the key reads unmarked")
	}
	second()
	if a.has(k) || len(a.keys) != 0 || barriers != 2 {
		t.Errorf("every mark dropped: marked %v, %d keys kept, %d barriers; want unmarked, none, 2", a.has(k), len(a.keys), barriers)
	}
}
