package table

import (
	"bytes"
	"math"
	"net"
	"net/netip"
	"regexp"
	"slices"
	"testing"
	"time"
)

// The tests in this file pin the table's decision rules at their edges:
// each kills a mutant of the rule that the scenario tests let live
// (make mutation, docs/mutants.md).

// classOf reads an entry's class now.
func classOf(t *testing.T, tb *Table, k Key) Class {
	t.Helper()
	e, ok := tb.Lookup(k)
	if !ok {
		t.Fatalf("%v is not in the table", k.Addr)
	}
	return e.Class()
}

// TestSilenceIsPerSuspect: each suspicion waits its own silence window.
// Suspects seen later are not stuck when the first one's window ends,
// the first one's window is not pushed back by them, and the next window
// to end is the earliest of those left.
func TestSilenceIsPerSuspect(t *testing.T) {
	tb, c := newTestTable(time.Second) // silence: MinSilence, 10 s
	ipB, ipC := netip.MustParseAddr("10.0.0.2"), netip.MustParseAddr("10.0.0.3")
	for _, ip := range []netip.Addr{ipA, ipB, ipC} {
		u := upd(1, ip, StateStale, macA)
		u.UpdatedAge = time.Hour
		tb.Apply(CauseNetlink, u)
	}
	a, b, cc := Key{1, ipA}, Key{1, ipB}, Key{1, ipC}
	tb.ObserveSourceMAC(a, macB, 1, c.now())
	c.advance(4 * time.Second)
	tb.ObserveSourceMAC(b, macB, 1, c.now())
	c.advance(2 * time.Second)
	tb.ObserveSourceMAC(cc, macB, 1, c.now())
	c.advance(4*time.Second - time.Millisecond)
	if got := classOf(t, tb, a); got != ClassStaleLong {
		t.Fatalf("first suspect 1 ms before its window ends: %v", got)
	}
	c.advance(time.Millisecond) // 10 s after the first
	if got := classOf(t, tb, a); got != ClassStuck {
		t.Errorf("first suspect at the end of its window: %v, want stuck", got)
	}
	if got := classOf(t, tb, b); got != ClassStaleLong {
		t.Errorf("second suspect, 6 s into its window: %v, want stale-long", got)
	}
	c.advance(4 * time.Second) // the second's window ends before the third's
	if got := classOf(t, tb, b); got != ClassStuck {
		t.Errorf("second suspect at the end of its window: %v, want stuck", got)
	}
	if got := classOf(t, tb, cc); got != ClassStaleLong {
		t.Errorf("third suspect, 8 s into its window: %v, want stale-long", got)
	}
	c.advance(2 * time.Second)
	if got := classOf(t, tb, cc); got != ClassStuck {
		t.Errorf("third suspect at the end of its window: %v, want stuck", got)
	}
}

// TestPromotionAtTheThreshold: a STALE entry is stale-long from the
// moment its age reaches the threshold, both when it is promoted as time
// passes and when it is attached already that old.
func TestPromotionAtTheThreshold(t *testing.T) {
	tb, c := newTestTable(time.Minute)
	k := Key{1, ipA}
	tb.Apply(CauseNetlink, upd(1, ipA, StateStale, macA))
	c.advance(time.Minute - 10*time.Millisecond)
	if got := classOf(t, tb, k); got != ClassOK {
		t.Fatalf("10 ms before the threshold: %v", got)
	}
	c.advance(10 * time.Millisecond)
	if got := classOf(t, tb, k); got != ClassStaleLong {
		t.Errorf("at the threshold: %v, want stale-long", got)
	}
	ipB := netip.MustParseAddr("10.0.0.2")
	u := upd(1, ipB, StateStale, macA)
	u.UpdatedAge = time.Minute
	tb.Apply(CauseNetlink, u)
	if got := classOf(t, tb, Key{1, ipB}); got != ClassStaleLong {
		t.Errorf("created exactly a threshold old: %v, want stale-long", got)
	}
}

// TestPromotionGrowsOnlyInAStorm: one entry crossing the threshold does
// not reserve room for every entry still pending (only a storm of
// promotions does, TestPromotionStormGrowsOnce).
func TestPromotionGrowsOnlyInAStorm(t *testing.T) {
	tb, c := newTestTable(time.Minute)
	first := upd(1, ipA, StateStale, macA)
	first.UpdatedAge = 30 * time.Second
	tb.Apply(CauseNetlink, first)
	c.advance(31 * time.Second) // the first one only will have crossed
	var us []Update
	for i := range 5000 {
		us = append(us, upd(1, netip.AddrFrom4([4]byte{10, 1, byte(i >> 8), byte(i)}), StateStale, macA))
	}
	tb.Apply(CauseNetlink, us...)
	if n := tb.Advance(); n != 1 {
		t.Fatalf("promoted %d, want 1", n)
	}
	if c := cap(coreOf(tb).ifaces[1].long[0]); c >= 5000 {
		t.Errorf("one promotion reserved room for %d long entries", c)
	}
}

// TestManagedCountsAndOwned: the managed counts follow each entry's owner
// and state, and Owned lists neighwatch's entries only, as they come and
// go.
func TestManagedCountsAndOwned(t *testing.T) {
	tb, _ := newTestTable(time.Minute)
	ipB := netip.MustParseAddr("10.0.0.2")
	mine := upd(1, ipA, StateReachable, macA)
	mine.FlagsExt, mine.Protocol = FlagExtManaged, ProtocolNeighwatch
	theirs := upd(1, ipB, StateReachable, macA)
	theirs.FlagsExt, theirs.Protocol = FlagExtManaged, 99
	tb.Apply(CauseNetlink, mine, theirs)
	fs := func() FamilyStats { return tb.Stats(0).Interfaces[0].Families[0] }
	if s := fs(); s.CountManaged(OwnerNeighwatch, StateReachable) != 1 || s.CountManaged(OwnerOther, StateReachable) != 1 || s.CountManaged(OwnerNone, StateReachable) != 0 {
		t.Fatalf("managed counts %v", s.Managed)
	}
	if o := tb.Owned(); len(o) != 1 || o[0].Addr != ipA || tb.CountOwned() != 1 {
		t.Fatalf("owned %v", o)
	}
	mine.State = StateStale
	tb.Apply(CauseNetlink, mine)
	if s := fs(); s.CountManaged(OwnerNeighwatch, StateReachable) != 0 || s.CountManaged(OwnerNeighwatch, StateStale) != 1 {
		t.Errorf("after a state change: %v", s.Managed)
	}
	tb.Apply(CauseNetlink, Update{Delete: true, Ifindex: 1, Family: FamilyInet, Addr: ipA})
	if s := fs(); s.CountManaged(OwnerNeighwatch, StateStale) != 0 || tb.CountOwned() != 0 || len(tb.Owned()) != 0 {
		t.Errorf("after the delete: %v, owned %d", s.Managed, tb.CountOwned())
	}
}

// TestUnchangedUpdateIsSilent: an update that changes nothing publishes
// nothing; one that changes only the flags, the managed flag or the
// protocol is applied and published.
func TestUnchangedUpdateIsSilent(t *testing.T) {
	tb, _ := newTestTable(time.Minute)
	sub := tb.Events().Subscribe(16)
	defer sub.Close()
	u := upd(1, ipA, StateReachable, macA)
	tb.Apply(CauseNetlink, u)
	<-sub.C() // created
	tb.Apply(CauseNetlink, u)
	if n := len(sub.C()); n != 0 {
		t.Errorf("an update that changes nothing published %d events", n)
	}
	for _, tc := range []struct {
		name string
		set  func(*Update)
		got  func(Entry) bool
	}{
		{"flags", func(u *Update) { u.Flags = FlagRouter }, func(e Entry) bool { return e.Flags == FlagRouter }},
		{"managed", func(u *Update) { u.FlagsExt = FlagExtManaged }, func(e Entry) bool { return e.FlagsExt == FlagExtManaged }},
		{"protocol", func(u *Update) { u.Protocol = ProtocolNeighwatch }, func(e Entry) bool { return e.Protocol == ProtocolNeighwatch }},
	} {
		tc.set(&u)
		tb.Apply(CauseNetlink, u)
		if e, _ := tb.Lookup(Key{1, ipA}); !tc.got(e) {
			t.Errorf("a change of %s alone was not applied: %+v", tc.name, e)
		}
		if n := len(sub.C()); n != 1 {
			t.Errorf("a change of %s alone published %d events, want 1", tc.name, n)
		}
		for len(sub.C()) > 0 {
			<-sub.C()
		}
	}
}

// TestLLAddrChangesCounted: only a move from one address to another
// counts (not losing or gaining one through FAILED), and the count stops
// at its maximum instead of wrapping.
func TestLLAddrChangesCounted(t *testing.T) {
	tb, _ := newTestTable(time.Minute)
	k := Key{1, ipA}
	tb.Apply(CauseNetlink, upd(1, ipA, StateReachable, macA))
	tb.Apply(CauseNetlink, Update{Ifindex: 1, Family: FamilyInet, Addr: ipA, State: StateFailed})
	tb.Apply(CauseNetlink, upd(1, ipA, StateReachable, macB))
	if e, _ := tb.Lookup(k); e.LLAddrChanges != 0 {
		t.Fatalf("through FAILED: %d changes, want 0", e.LLAddrChanges)
	}
	tb.Apply(CauseNetlink, upd(1, ipA, StateReachable, macA))
	if e, _ := tb.Lookup(k); e.LLAddrChanges != 1 {
		t.Fatalf("one move: %d changes", e.LLAddrChanges)
	}
	for i := range math.MaxUint16 + 1 {
		tb.Apply(CauseNetlink, upd(1, ipA, StateReachable, []net.HardwareAddr{macB, macA}[i%2]))
	}
	if e, _ := tb.Lookup(k); e.LLAddrChanges != math.MaxUint16 {
		t.Errorf("after 65,537 moves: %d changes, want %d", e.LLAddrChanges, math.MaxUint16)
	}
}

// TestCandidateOnOwnerChange: an entry that stays a candidate but changes
// owner (neighwatch starts or stops managing it) is reported changed.
func TestCandidateOnOwnerChange(t *testing.T) {
	tb, _ := newTestTable(time.Minute)
	u := upd(1, ipA, StateStale, macA)
	tb.Apply(CauseNetlink, u)
	tb.Candidates(0, 100, func(Key, string) {})
	u.FlagsExt, u.Protocol = FlagExtManaged, ProtocolNeighwatch
	tb.Apply(CauseNetlink, u)
	var changed []Key
	tb.CandidateChanges(func(k Key, _ string) { changed = append(changed, k) })
	if len(changed) != 1 || changed[0] != (Key{1, ipA}) {
		t.Errorf("changes after the owner changed: %v", changed)
	}
}

// TestCacheTimes: the kernel's ages become the times of the last
// confirmation and use.
func TestCacheTimes(t *testing.T) {
	tb, c := newTestTable(time.Minute)
	u := upd(1, ipA, StateStale, macA)
	u.ConfirmedAge, u.UsedAge = 5*time.Second, 7*time.Second
	tb.Apply(CauseNetlink, u)
	e, _ := tb.Lookup(Key{1, ipA})
	if want := c.now().Add(-5 * time.Second).UnixNano(); e.Confirm != want {
		t.Errorf("confirmed at %v, want %v", time.Unix(0, e.Confirm), time.Unix(0, want))
	}
	if want := c.now().Add(-7 * time.Second).UnixNano(); e.Used != want {
		t.Errorf("used at %v, want %v", time.Unix(0, e.Used), time.Unix(0, want))
	}
}

// TestDeleteLinkKeepsOtherLinks: deleting a link's entries leaves every
// other link's.
func TestDeleteLinkKeepsOtherLinks(t *testing.T) {
	tb, _ := newTestTable(time.Minute)
	ipB := netip.MustParseAddr("10.0.0.2")
	tb.Apply(CauseNetlink, upd(1, ipA, StateStale, macA), upd(1, ipB, StateStale, macA), upd(2, ipA, StateStale, macA))
	if n := tb.DeleteLink(2, CauseLink); n != 1 {
		t.Fatalf("deleted %d, want 1", n)
	}
	for _, k := range []Key{{1, ipA}, {1, ipB}} {
		if _, ok := tb.Lookup(k); !ok {
			t.Errorf("%v of link 1 was deleted with link 2", k.Addr)
		}
	}
	if _, ok := tb.Lookup(Key{2, ipA}); ok {
		t.Error("link 2's entry is still there")
	}
}

// TestCreationsCounted: a created entry counts as a transition from
// absent, and a deleted one to absent (outside the initial sync).
func TestCreationsCounted(t *testing.T) {
	tb, _ := newTestTable(time.Minute)
	tb.Apply(CauseNetlink, upd(1, ipA, StateStale, macA))
	tb.Apply(CauseNetlink, Update{Delete: true, Ifindex: 1, Family: FamilyInet, Addr: ipA})
	got := tb.Stats(0).Transitions
	want := []Transition{{Family: FamilyInet, From: "absent", To: "stale", Count: 1}, {Family: FamilyInet, From: "stale", To: "absent", Count: 1}}
	if !slices.Equal(got, want) && !slices.Equal(got, []Transition{want[1], want[0]}) {
		t.Errorf("transitions %+v, want %+v", got, want)
	}
}

// TestHostMACsMostRecentFirst: the host's other MACs are kept most
// recent first, a known one moves to the front without a duplicate, and
// a full list forgets the least recent.
func TestHostMACsMostRecentFirst(t *testing.T) {
	var o Observed
	mac := func(i byte) string { return string([]byte{2, 0, 0, 0, 1, i}) }
	for i := range byte(MaxHostMACs) {
		o.addHostMAC(mac(i), int64(i))
	}
	o.addHostMAC(mac(1), 10) // known: to the front
	var order []byte
	for _, h := range o.HostMACs {
		order = append(order, h.MAC[5])
	}
	if !slices.Equal(order, []byte{1, 3, 2, 0}) {
		t.Fatalf("order %v, want [1 3 2 0]", order)
	}
	if h := o.hostMAC(mac(2)); h == nil || h.MAC != mac(2) || h.At != 2 {
		t.Errorf("hostMAC(2) = %+v", h)
	}
	o.addHostMAC(mac(9), 11) // full: 0, the least recent, goes
	order = order[:0]
	for _, h := range o.HostMACs {
		order = append(order, h.MAC[5])
	}
	if !slices.Equal(order, []byte{9, 1, 3, 2}) {
		t.Errorf("order %v, want [9 1 3 2]", order)
	}
	if o.hostMAC(mac(0)) != nil {
		t.Error("the least recent MAC is still known")
	}
}

// TestKnownMACRecheck: a MAC known as the host's raises no suspicion
// while the entry's MAC was heard less than half the threshold ago, and
// does from then on.
func TestKnownMACRecheck(t *testing.T) {
	tb, c := newTestTable(time.Minute) // recheck: 30 s
	u := upd(1, ipA, StateStale, macA)
	u.UpdatedAge = time.Hour
	tb.Apply(CauseNetlink, u)
	k := Key{1, ipA}
	tb.ObserveSourceMAC(k, macB, 1, c.now())
	tb.Heard(k, macA, c.now()) // macB is the host's
	c.advance(30*time.Second - time.Millisecond)
	tb.ObserveSourceMAC(k, macB, 1, c.now())
	if e, _ := tb.Lookup(k); e.Suspect() {
		t.Fatal("a known MAC, the entry's heard 30 s - 1 ms ago, raised a suspicion")
	}
	c.advance(time.Millisecond)
	tb.ObserveSourceMAC(k, macB, 1, c.now())
	if e, _ := tb.Lookup(k); !e.Suspect() {
		t.Error("a known MAC, the entry's last heard half the threshold ago, raised no suspicion")
	}
}

// TestHeardAtTheSameInstant: the entry's MAC heard at the very time of
// an unanswered probe clears it, and at the very time of a sighting
// explains it.
func TestHeardAtTheSameInstant(t *testing.T) {
	tb, c := newTestTable(time.Minute)
	u := upd(1, ipA, StateStale, macA)
	u.UpdatedAge = time.Hour
	tb.Apply(CauseNetlink, u)
	k := Key{1, ipA}
	tb.ProbeUnanswered(k, string(macA), c.now())
	tb.Heard(k, macA, c.now())
	if got := classOf(t, tb, k); got == ClassStuck {
		t.Errorf("an answer at the probe's own time left it stuck")
	}
	c.advance(time.Second)
	tb.ObserveSourceMAC(k, macB, 1, c.now())
	tb.Heard(k, macA, c.now())
	e, _ := tb.Lookup(k)
	if e.Suspect() || len(e.OtherMACs()) != 1 || e.OtherMACs()[0].MAC != string(macB) {
		t.Errorf("heard at the sighting's own time: suspect %v, other MACs %v", e.Suspect(), e.OtherMACs())
	}
}

// TestCountClassByMinimum: CountClass counts the class asked for and
// every worse one.
func TestCountClassByMinimum(t *testing.T) {
	tb, c := newTestTable(time.Minute)
	ips := []netip.Addr{netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2"), netip.MustParseAddr("10.0.0.3")}
	for _, ip := range ips {
		u := upd(1, ip, StateStale, macA)
		u.UpdatedAge = time.Hour
		tb.Apply(CauseNetlink, u)
	}
	tb.AddBypass(Key{1, ips[1]}, 3, c.now())                  // at-risk
	tb.ProbeUnanswered(Key{1, ips[2]}, string(macA), c.now()) // stuck
	for min, want := range map[Class]int{ClassStaleLong: 3, ClassAtRisk: 2, ClassStuck: 1} {
		if n := tb.CountClass(min); n != want {
			t.Errorf("CountClass(%v) = %d, want %d", min, n, want)
		}
	}
}

// TestPublishNamesTheLink: an event published without an interface name
// gets the link's.
func TestPublishNamesTheLink(t *testing.T) {
	tb, _ := newTestTable(time.Minute)
	tb.SetLinkName(4, "eth4")
	sub := tb.Events().Subscribe(4)
	defer sub.Close()
	tb.Publish(Event{Ifindex: 4, Kind: KindRemediation})
	tb.Publish(Event{Ifindex: 4, Interface: "given", Kind: KindRemediation})
	if a, b := <-sub.C(), <-sub.C(); a.Interface != "eth4" || b.Interface != "given" {
		t.Errorf("interfaces %q and %q, want eth4 and given", a.Interface, b.Interface)
	}
}

// TestSuspicionFacts: a suspicion says when it began and which MAC it is
// about, until the entry's own MAC explains it.
func TestSuspicionFacts(t *testing.T) {
	tb, c := newTestTable(time.Minute)
	u := upd(1, ipA, StateStale, macA)
	u.UpdatedAge = time.Hour
	tb.Apply(CauseNetlink, u)
	k := Key{1, ipA}
	at := c.now()
	tb.ObserveSourceMAC(k, macB, 1, at)
	e, _ := tb.Lookup(k)
	if !e.SuspectSince().Equal(at) || e.DisputingMAC() != string(macB) {
		t.Errorf("suspect since %v (want %v), disputing %x", e.SuspectSince(), at, e.DisputingMAC())
	}
	tb.Heard(k, macA, c.now())
	e, _ = tb.Lookup(k)
	if !e.SuspectSince().IsZero() || e.DisputingMAC() != "" {
		t.Errorf("explained: suspect since %v, disputing %x", e.SuspectSince(), e.DisputingMAC())
	}
}

// hostAtThreeMACs is a STALE entry at macA whose host was also seen
// sending from macC and macB (B first in the list), each while macA
// answered.
func hostAtThreeMACs(t *testing.T) (*Table, Key, net.HardwareAddr) {
	t.Helper()
	tb, c := newTestTable(time.Minute)
	macC := net.HardwareAddr{2, 0, 0, 0, 0, 0xc}
	u := upd(1, ipA, StateStale, macA)
	u.UpdatedAge = time.Hour
	tb.Apply(CauseNetlink, u)
	k := Key{1, ipA}
	for _, m := range []net.HardwareAddr{macC, macB} { // macB last: first in the list
		tb.ObserveSourceMAC(k, m, 1, c.now())
		tb.Heard(k, macA, c.now())
		c.advance(time.Minute) // past the recheck
	}
	e, _ := tb.Lookup(k)
	if o := e.OtherMACs(); len(o) != 2 || o[0].MAC != string(macB) || o[1].MAC != string(macC) {
		t.Fatalf("other MACs %v, want B then C", o)
	}
	return tb, k, macC
}

// TestMoveToAKnownMAC: when the entry moves to one of its host's other
// MACs, that MAC leaves the list, the MAC the entry left takes its place
// (the host moved between its own MACs: a bond, ARP flux; the move check
// leaves such moves alone), and the rest keep their order.
func TestMoveToAKnownMAC(t *testing.T) {
	tb, k, macC := hostAtThreeMACs(t)
	var e Entry
	tb.Apply(CauseNetlink, upd(1, ipA, StateReachable, macB))
	e, _ = tb.Lookup(k)
	if o := e.OtherMACs(); len(o) != 2 || o[0].MAC != string(macA) || o[1].MAC != string(macC) {
		t.Errorf("after the move to B: other MACs %v, want A then C", o)
	}
	// A move to a MAC the host was never known at keeps the list.
	tb.Apply(CauseNetlink, upd(1, ipA, StateReachable, net.HardwareAddr{2, 0, 0, 0, 0, 0xd}))
	e, _ = tb.Lookup(k)
	if o := e.OtherMACs(); len(o) != 2 || o[0].MAC != string(macA) || o[1].MAC != string(macC) {
		t.Errorf("after a move to an unknown MAC: other MACs %v, want A then C", o)
	}
}

// TestLostMACIsNotAHostMAC: an entry that loses its MAC (FAILED, no
// lladdr) adds none to its host's other MACs; when it resolves again to
// one of them, that one leaves the list and the list closes the gap.
func TestLostMACIsNotAHostMAC(t *testing.T) {
	tb, k, macC := hostAtThreeMACs(t)
	var e Entry
	tb.Apply(CauseNetlink, Update{Ifindex: 1, Family: FamilyInet, Addr: ipA, State: StateFailed})
	e, _ = tb.Lookup(k)
	if o := e.OtherMACs(); len(o) != 2 || o[0].MAC != string(macB) || o[1].MAC != string(macC) {
		t.Errorf("after losing its MAC: other MACs %v, want B then C (A is no host MAC of its own)", o)
	}
	tb.Apply(CauseNetlink, upd(1, ipA, StateReachable, macB))
	e, _ = tb.Lookup(k)
	if o := e.OtherMACs(); len(o) != 1 || o[0].MAC != string(macC) {
		t.Errorf("resolved at B: other MACs %v, want C alone", o)
	}
}

// TestEntryFlagsAndOwner: Managed, Owner and FlagNames read the kernel's
// flags as ip(8) does.
func TestEntryFlagsAndOwner(t *testing.T) {
	for _, tc := range []struct {
		flags    uint8
		flagsExt uint32
		protocol uint8
		managed  bool
		owner    Owner
		names    []string
	}{
		{0, 0, 0, false, OwnerNone, nil},
		{FlagRouter | FlagProxy, 0, 0, false, OwnerNone, []string{"router", "proxy"}},
		{FlagExtLearned, 0, 0, true, OwnerNone, []string{"extern_learn"}},
		{0, FlagExtManaged, ProtocolNeighwatch, true, OwnerNeighwatch, []string{"managed"}},
		{0, FlagExtManaged, 99, true, OwnerOther, []string{"managed"}},
	} {
		e := Entry{Flags: tc.flags, FlagsExt: tc.flagsExt, Protocol: tc.protocol}
		if e.Managed() != tc.managed || e.Owner() != tc.owner || !slices.Equal(e.FlagNames(), tc.names) {
			t.Errorf("flags %#x/%#x protocol %d: managed %v, owner %v, names %v; want %v, %v, %v",
				tc.flags, tc.flagsExt, tc.protocol, e.Managed(), e.Owner(), e.FlagNames(), tc.managed, tc.owner, tc.names)
		}
	}
}

// TestApplyTracepoint: a silent transition applies only from the state
// the table holds (or creates an entry from none), and keeps the lladdr,
// the flags, the extended flags (managed) and the protocol: a managed
// entry's silent DELAY leaves it neighwatch's.
func TestApplyTracepoint(t *testing.T) {
	tb, c := newTestTable(time.Minute)
	k := Key{1, ipA}
	if tb.ApplyTracepoint(k, StateStale, StateDelay, c.now()) {
		t.Error("applied to an absent entry from stale")
	}
	if !tb.ApplyTracepoint(k, StateNone, StateIncomplete, c.now()) {
		t.Fatal("a creation from none was not applied")
	}
	u := upd(1, ipA, StateStale, macA)
	u.Flags, u.FlagsExt, u.Protocol = FlagRouter, FlagExtManaged, ProtocolNeighwatch // a router neighwatch manages
	tb.Apply(CauseNetlink, u)
	if tb.ApplyTracepoint(k, StateReachable, StateDelay, c.now()) {
		t.Error("applied from reachable to a stale entry")
	}
	if !tb.ApplyTracepoint(k, StateStale, StateDelay, c.now()) {
		t.Fatal("stale -> delay not applied")
	}
	if e, _ := tb.Lookup(k); e.State != StateDelay || e.LLAddr != string(macA) || e.Flags != FlagRouter ||
		e.FlagsExt != FlagExtManaged || e.Protocol != ProtocolNeighwatch || e.Owner() != OwnerNeighwatch {
		t.Errorf("after the tracepoint: %+v, want DELAY at the same MAC, a router, still managed by neighwatch", e)
	}
}

// TestSelectorMatch: no include list selects every name; an exclude wins.
func TestSelectorMatch(t *testing.T) {
	re := func(s string) []*regexp.Regexp { return []*regexp.Regexp{regexp.MustCompile("^(?:" + s + ")$")} }
	for _, tc := range []struct {
		s    Selector
		name string
		want bool
	}{
		{Selector{}, "eth0", true},
		{Selector{Include: re("eth.*")}, "eth0", true},
		{Selector{Include: re("eth.*")}, "lo", false},
		{Selector{Exclude: re("lo")}, "lo", false},
		{Selector{Exclude: re("lo")}, "eth0", true},
		{Selector{Include: re("eth.*"), Exclude: re("eth1")}, "eth1", false},
	} {
		if got := tc.s.Match(tc.name); got != tc.want {
			t.Errorf("%+v.Match(%q) = %v, want %v", tc.s, tc.name, got, tc.want)
		}
	}
}

// TestStateNames: single states by name, none as none, anything else in
// hex.
func TestStateNames(t *testing.T) {
	for s, want := range map[State]string{StateNone: "none", StateStale: "stale", StatePermanent: "permanent", StateStale | StateDelay: "0x0c"} {
		if got := s.String(); got != want {
			t.Errorf("State(%#x) = %q, want %q", uint8(s), got, want)
		}
	}
}

// TestEventDetailsNameMACs: mismatch events name both MACs.
func TestEventDetailsNameMACs(t *testing.T) {
	tb, c := newTestTable(time.Minute)
	u := upd(1, ipA, StateStale, macA)
	u.UpdatedAge = time.Hour
	tb.Apply(CauseNetlink, u)
	sub := tb.Events().Subscribe(16)
	defer sub.Close()
	k := Key{1, ipA}
	tb.ObserveSourceMAC(k, macB, 1, c.now())
	tb.Heard(k, macA, c.now())
	c.advance(time.Minute)
	tb.ObserveMAC(1, ipA, net.HardwareAddr{2, 0, 0, 0, 0, 0xc}, c.now())
	var details []string
	for len(sub.C()) > 0 {
		if ev := <-sub.C(); ev.Kind == KindMismatch {
			details = append(details, ev.Detail)
		}
	}
	want := []string{
		"packets from 10.0.0.1 come from 02:00:00:00:00:0b, kernel sends to 02:00:00:00:00:0a: stuck if that MAC stays silent",
		"the entry's MAC answered after 02:00:00:00:00:0b was seen with the host's address: not stuck while the entry's MAC answers",
		"seen at 02:00:00:00:00:0c, kernel sends to 02:00:00:00:00:0a: stuck if that MAC stays silent",
	}
	if !slices.Equal(details, want) {
		t.Errorf("mismatch details:\n%q\nwant\n%q", details, want)
	}
}

// TestConflictHoldEnds: a conflict holds the class for ConflictHold after
// it was last seen, no longer.
func TestConflictHoldEnds(t *testing.T) {
	tb, c := newTestTable(time.Minute)
	k := Key{1, ipA}
	tb.Apply(CauseNetlink, upd(1, ipA, StateReachable, macA))
	tb.ObserveConflict(k, macB, macA, c.now())
	c.advance(ConflictHold - time.Millisecond)
	if got := classOf(t, tb, k); got != ClassConflict {
		t.Fatalf("1 ms before the hold ends: %v", got)
	}
	c.advance(time.Millisecond)
	if got := classOf(t, tb, k); got != ClassOK {
		t.Errorf("at the end of the hold: %v, want ok", got)
	}
}

// TestCandidatesInBatches: a walk of the candidates stops after max and
// says where to go on.
func TestCandidatesInBatches(t *testing.T) {
	tb, _ := newTestTable(time.Minute)
	for i := range 5 {
		tb.Apply(CauseNetlink, upd(1, netip.AddrFrom4([4]byte{10, 0, 0, byte(i)}), StateStale, macA))
	}
	n := 0
	next := tb.Candidates(0, 2, func(Key, string) { n++ })
	if n != 2 || next == 0 {
		t.Fatalf("first batch: %d candidates, next %d", n, next)
	}
	for next != 0 {
		next = tb.Candidates(next, 2, func(Key, string) { n++ })
	}
	if n != 5 {
		t.Errorf("%d candidates in all, want 5", n)
	}
}

// TestKeptEventSharesOneCopy: an event whose lladdr did not change keeps
// one copy for both, and one without an lladdr is kept as is.
func TestKeptEventSharesOneCopy(t *testing.T) {
	tb, c := newTestTable(time.Minute)
	sub := tb.Events().Subscribe(16)
	defer sub.Close()
	u := upd(1, ipA, StateStale, macA)
	u.UpdatedAge = time.Hour
	tb.Apply(CauseNetlink, u)
	tb.AddBypass(Key{1, ipA}, 1, c.now()) // a class event: the same lladdr before and after
	tb.Apply(CauseNetlink, Update{Ifindex: 1, Family: FamilyInet, Addr: netip.MustParseAddr("10.0.0.9"), State: StateIncomplete})
	var class, noLL *Event
	for len(sub.C()) > 0 {
		ev := <-sub.C()
		switch {
		case ev.Kind == KindClass:
			class = &ev
		case ev.IP == netip.MustParseAddr("10.0.0.9"):
			noLL = &ev
		}
	}
	if class == nil || noLL == nil {
		t.Fatal("missing events")
	}
	if len(class.LLAddr) == 0 || &class.LLAddr[0] != &class.OldLLAddr[0] {
		t.Errorf("a class event's lladdr and old lladdr are two copies")
	}
	if len(noLL.LLAddr) != 0 {
		t.Errorf("an entry without an lladdr: %v", noLL.LLAddr)
	}
}

// TestMoveEventSaysWhenTheOldMACWasHeard: a move's event carries when
// the MAC it leaves was last heard for the address (its ARP or NDP, its
// packets, an answer): what ranks the move's check (remediate: a hijack
// displaces a host that was heard); 0 for a MAC never heard; and the new
// MAC starts unheard.
func TestMoveEventSaysWhenTheOldMACWasHeard(t *testing.T) {
	tb := New(time.Hour, nil)
	k := Key{Ifindex: 1, Addr: ipA}
	tb.Apply(CauseNetlink, upd(1, ipA, StateStale, macA))
	heard := time.Now().Add(-time.Minute)
	if !tb.Heard(k, macA, heard) {
		t.Fatal("the entry's own MAC not heard")
	}
	sub := tb.Events().Subscribe(8)
	defer sub.Close()
	move := func(mac net.HardwareAddr) Event {
		t.Helper()
		tb.Apply(CauseNetlink, upd(1, ipA, StateStale, mac))
		return nextMove(t, sub)
	}
	if ev := move(macB); ev.OldHeard != heard.UnixNano() {
		t.Errorf("the move from a MAC heard at %v: OldHeard %v", heard, time.Unix(0, ev.OldHeard))
	}
	if ev := move(macA); ev.OldHeard != 0 {
		t.Errorf("the move from a MAC never heard: OldHeard %v, want 0", time.Unix(0, ev.OldHeard))
	}
}

// TestMoveEventSaysWhenTrafficLastUsedIt: a move's event says when
// traffic last used the entry, the kernel's own output or bypass traffic
// the tracer counted, whichever is later: what makes a move "in use" for
// its check's stake (remediate), bypass traffic included, which the
// kernel's use time never shows.
func TestMoveEventSaysWhenTrafficLastUsedIt(t *testing.T) {
	tb := New(time.Hour, nil)
	k := Key{Ifindex: 1, Addr: ipA}
	idle := func(mac net.HardwareAddr) Update {
		u := upd(1, ipA, StateStale, mac)
		u.UsedAge = 10 * time.Minute
		return u
	}
	tb.Apply(CauseNetlink, idle(macA))
	sub := tb.Events().Subscribe(8)
	defer sub.Close()
	move := func(mac net.HardwareAddr) Event {
		t.Helper()
		tb.Apply(CauseNetlink, idle(mac))
		return nextMove(t, sub)
	}
	if ev := move(macB); ev.LastUsed == 0 || time.Since(time.Unix(0, ev.LastUsed)) < 9*time.Minute {
		t.Fatalf("a move of an entry the kernel used 10 min ago, no bypass: LastUsed %v", time.Unix(0, ev.LastUsed))
	}
	bypass := time.Now().Add(-5 * time.Second)
	if !tb.AddBypass(k, 3, bypass) {
		t.Fatal("bypass packets not taken")
	}
	if ev := move(macA); ev.LastUsed != bypass.UnixNano() {
		t.Errorf("a move of an entry bypass traffic used at %v (the kernel 10 min ago): LastUsed %v", bypass, time.Unix(0, ev.LastUsed))
	}
}

// nextMove returns the next move event (a change of MAC) sub holds, and
// fails when it holds none.
func nextMove(t *testing.T, sub *Subscription) Event {
	t.Helper()
	for {
		select {
		case ev := <-sub.C():
			if len(ev.OldLLAddr) > 0 && !bytes.Equal(ev.OldLLAddr, ev.LLAddr) {
				return ev
			}
		default:
			t.Fatal("no move event")
		}
	}
}
