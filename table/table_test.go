package table

import (
	"bytes"
	"maps"
	"net"
	"net/netip"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
)

type clock struct{ t time.Time }

func (c *clock) now() time.Time          { return c.t }
func (c *clock) advance(d time.Duration) { c.t = c.t.Add(d) }
func newTestTable(thr time.Duration) (*Table, *clock) {
	c := &clock{t: time.Unix(1_700_000_000, 0)}
	t := New(thr, nil)
	coreOf(t).now = c.now
	return t, c
}

var (
	macA = net.HardwareAddr{2, 0, 0, 0, 0, 0xa}
	macB = net.HardwareAddr{2, 0, 0, 0, 0, 0xb}
	ipA  = netip.MustParseAddr("10.0.0.1")
)

func upd(ifindex int32, ip netip.Addr, state State, mac net.HardwareAddr) Update {
	return Update{Family: FamilyOf(ip), Ifindex: ifindex, State: state, Addr: ip, LLAddr: mac, HasCacheInfo: true}
}

func TestClassification(t *testing.T) {
	tests := []struct {
		name      string
		state     State
		age       time.Duration
		seen      net.HardwareAddr // ARP/NDP
		source    net.HardwareAddr // the host's own packets
		heard     bool             // then the entry's own MAC was heard (its packets)
		probe     bool             // a unicast probe to the entry's MAC went unanswered
		silent    bool             // then the entry's MAC stayed silent for the silence window
		bypass    uint64
		wantClass Class
		signals   []Signal
	}{
		{name: "reachable is ok", state: StateReachable, age: time.Hour, wantClass: ClassOK},
		{name: "young stale is ok", state: StateStale, age: 59 * time.Second, wantClass: ClassOK},
		{name: "old stale is stale-long", state: StateStale, age: 60 * time.Second, wantClass: ClassStaleLong},
		{name: "old stale with same MAC seen is stale-long", state: StateStale, age: 2 * time.Minute, seen: macA, source: macA, wantClass: ClassStaleLong},
		{name: "seen at another MAC is a suspicion, not stuck", state: StateStale, age: 2 * time.Minute, seen: macB, wantClass: ClassStaleLong, signals: []Signal{SignalARP}},
		{name: "seen at another MAC, its own silent for the window, is stuck", state: StateStale, age: 2 * time.Minute, seen: macB, silent: true, wantClass: ClassStuck, signals: []Signal{SignalARP}},
		{name: "seen at another MAC, a probe to its own unanswered, is stuck", state: StateStale, age: 2 * time.Minute, seen: macB, probe: true, wantClass: ClassStuck, signals: []Signal{SignalARP, SignalProbeUnanswered}},
		{name: "young stale with moved MAC is not yet stuck", state: StateStale, age: 10 * time.Second, seen: macB, probe: true, wantClass: ClassOK, signals: []Signal{SignalARP, SignalProbeUnanswered}},
		{name: "bypass traffic alone is at-risk, not stuck", state: StateStale, age: 2 * time.Minute, bypass: 5, wantClass: ClassAtRisk, signals: []Signal{SignalBypass}},
		{name: "bypass traffic to a host seen at its MAC is at-risk", state: StateStale, age: 2 * time.Minute, bypass: 5, source: macA, seen: macA, wantClass: ClassAtRisk, signals: []Signal{SignalBypass}},
		{name: "source MAC elsewhere is a suspicion", state: StateStale, age: 2 * time.Minute, source: macB, wantClass: ClassStaleLong, signals: []Signal{SignalSourceMAC}},
		{name: "source MAC elsewhere, its own silent, is stuck", state: StateStale, age: 2 * time.Minute, bypass: 5, source: macB, silent: true, wantClass: ClassStuck, signals: []Signal{SignalBypass, SignalSourceMAC}},
		{name: "source MAC elsewhere, then its own heard: a host with two MACs", state: StateStale, age: 2 * time.Minute, bypass: 5, source: macB, heard: true, silent: true, wantClass: ClassAtRisk, signals: []Signal{SignalBypass}},
		{name: "a probe unanswered, then its own heard, is not stuck", state: StateStale, age: 2 * time.Minute, probe: true, heard: true, wantClass: ClassStaleLong},
		{name: "unanswered unicast probe is stuck", state: StateStale, age: 2 * time.Minute, probe: true, wantClass: ClassStuck, signals: []Signal{SignalProbeUnanswered}},
		{name: "permanent with moved MAC is ok", state: StatePermanent, age: time.Hour, seen: macB, wantClass: ClassOK, signals: []Signal{SignalARP}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tb, c := newTestTable(time.Minute)
			u := upd(1, ipA, tt.state, macA)
			u.UpdatedAge = tt.age
			tb.Apply(CauseNetlink, u)
			k := Key{1, ipA}
			if tt.seen != nil {
				tb.ObserveMAC(1, ipA, tt.seen, c.now())
			}
			if tt.source != nil {
				tb.ObserveSourceMAC(k, tt.source, 3, c.now())
			}
			if tt.probe && !tb.ProbeUnanswered(k, string(macA), c.now()) {
				t.Fatal("probe not recorded")
			}
			if tt.heard {
				c.advance(time.Millisecond)
				if !tb.Heard(k, macA, c.now()) {
					t.Fatal("own MAC not heard")
				}
			}
			if tt.bypass > 0 {
				tb.AddBypass(k, tt.bypass, c.now())
			}
			if tt.silent {
				c.advance(time.Minute) // the silence window: the 1 min threshold
			}
			e, _ := tb.Lookup(k)
			if e.Class() != tt.wantClass {
				t.Fatalf("class = %v, want %v", e.Class(), tt.wantClass)
			}
			var got []Signal
			for _, ev := range e.Evidence() {
				got = append(got, ev.Signal)
			}
			if !slices.Equal(got, tt.signals) {
				t.Errorf("evidence %v, want %v", got, tt.signals)
			}
			if e.MultiMAC() != (tt.heard && tt.source != nil) {
				t.Errorf("multi-MAC %v, want %v", e.MultiMAC(), tt.heard && tt.source != nil)
			}
			st := tb.Stats(10)
			fs := st.Interfaces[0].Families[0]
			wantLong := tt.wantClass != ClassOK
			if (fs.StaleLong == 1) != wantLong || (fs.Stuck == 1) != (tt.wantClass == ClassStuck) ||
				(fs.AtRisk == 1) != (tt.wantClass == ClassAtRisk) || (st.StuckTotal == 1) != (tt.wantClass == ClassStuck) {
				t.Fatalf("aggregates: stale-long %d at-risk %d stuck %d stuck set %d for class %v", fs.StaleLong, fs.AtRisk, fs.Stuck, st.StuckTotal, tt.wantClass)
			}
			if (fs.MultiMAC == 1) != e.MultiMAC() {
				t.Errorf("multi-MAC gauge %d for an entry multi-MAC %v", fs.MultiMAC, e.MultiMAC())
			}
			stale := 0
			if tt.state == StateStale {
				stale = 1
			}
			if n := len(tb.Walk(ClassOK, func(*Entry, string) bool { return true })); n != stale {
				t.Errorf("Walk(ok) visited %d, want every STALE entry (%d)", n, stale)
			}
			for _, min := range []Class{ClassStaleLong, ClassAtRisk, ClassStuck} {
				want := 0
				if tt.wantClass >= min {
					want = 1
				}
				if n := tb.CountClass(min); n != want {
					t.Errorf("CountClass(%v) = %d, want %d", min, n, want)
				}
				if n := len(tb.Walk(min, func(*Entry, string) bool { return true })); n != want {
					t.Errorf("Walk(%v) visited %d, want %d", min, n, want)
				}
			}
		})
	}
}

// TestEvidenceFollowsTheEntry: a new MAC for the entry (the kernel
// re-resolved it) makes old source-MAC evidence agree with it, and a state
// change clears an unanswered probe.
func TestEvidenceFollowsTheEntry(t *testing.T) {
	tb, c := newTestTable(time.Minute)
	u := upd(1, ipA, StateStale, macA)
	u.UpdatedAge = 2 * time.Minute
	tb.Apply(CauseNetlink, u)
	k := Key{1, ipA}
	tb.ObserveSourceMAC(k, macB, 1, c.now())
	tb.ProbeUnanswered(k, string(macA), c.now())
	if e, _ := tb.Lookup(k); e.Class() != ClassStuck {
		t.Fatalf("class %v, want stuck", e.Class())
	}
	tb.Apply(CauseNetlink, upd(1, ipA, StateReachable, macB))
	e, _ := tb.Lookup(k)
	if e.Class() != ClassOK || len(e.Evidence()) != 0 || e.Suspect() {
		t.Fatalf("after repair: class %v, evidence %v, suspect %v", e.Class(), e.Evidence(), e.Suspect())
	}
	// Set STALE at a third MAC: what was seen of the host's packets before
	// is not evidence against the new MAC.
	u = upd(1, ipA, StateStale, net.HardwareAddr{2, 0, 0, 0, 0, 0xc})
	u.UpdatedAge = 2 * time.Minute
	tb.Apply(CauseNetlink, u)
	if e, _ := tb.Lookup(k); e.Class() != ClassStaleLong || e.Observed().SourceMismatch {
		t.Fatalf("after a new MAC: class %v, evidence %v; want stale-long with none", e.Class(), e.Evidence())
	}
	// Likewise an ARP sighting from before the new MAC; one after it is a
	// suspicion, which an unanswered probe to the new MAC confirms.
	c.advance(time.Second)
	tb.ObserveMAC(1, ipA, macA, c.now())
	c.advance(time.Second)
	d := net.HardwareAddr{2, 0, 0, 0, 0, 0xd}
	u = upd(1, ipA, StateStale, d)
	u.UpdatedAge = 2 * time.Minute
	tb.Apply(CauseNetlink, u)
	if e, _ := tb.Lookup(k); e.Observed().Mismatch || e.Class() != ClassStaleLong {
		t.Fatalf("an ARP sighting older than the entry's MAC counts: class %v, evidence %v", e.Class(), e.Evidence())
	}
	tb.ObserveMAC(1, ipA, macA, c.now())
	if e, _ := tb.Lookup(k); !e.Observed().Mismatch || !e.Suspect() || e.Class() != ClassStaleLong {
		t.Fatalf("a fresh ARP sighting at another MAC is no suspicion: class %v, evidence %v", e.Class(), e.Evidence())
	}
	if tb.ProbeUnanswered(k, string(macA), c.now()) {
		t.Error("a probe to a MAC the entry no longer has was recorded")
	}
	tb.ProbeUnanswered(k, string(d), c.now())
	if e, _ := tb.Lookup(k); e.Class() != ClassStuck {
		t.Fatalf("suspect, its MAC unanswered: class %v, want stuck", e.Class())
	}
}

// TestHostWithTwoMACs is the healthy host that sends from a second MAC
// (a balance-tlb bond, ARP flux, a router relaying it): its entry's MAC
// answers after each sighting, so it is never stuck, and the second MAC,
// now the host's, begins no suspicion while the entry's MAC keeps
// answering. Once the entry's MAC stays silent for the recheck time, the
// next sighting is a suspicion again, and silence makes it stuck within
// the window.
func TestHostWithTwoMACs(t *testing.T) {
	tb, c := newTestTable(time.Minute)
	u := upd(1, ipA, StateStale, macA)
	u.UpdatedAge = 2 * time.Minute
	tb.Apply(CauseNetlink, u)
	k := Key{1, ipA}
	class := func() Class { e, _ := tb.Lookup(k); return e.Class() }
	tb.ObserveSourceMAC(k, macB, 1, c.now())
	c.advance(time.Second)
	tb.Heard(k, macA, c.now()) // a probe answered, or its frames
	if e, _ := tb.Lookup(k); e.Suspect() || !e.MultiMAC() || e.OtherMACs()[0].MAC != string(macB) {
		t.Fatalf("after its MAC answered: suspect %v, other MACs %v", e.Suspect(), e.OtherMACs())
	}
	// Its packets from the second MAC keep coming; the first answers
	// now and then, within the recheck time (half the threshold).
	for i := range 10 {
		c.advance(10 * time.Second)
		tb.ObserveSourceMAC(k, macB, 1, c.now())
		if e, _ := tb.Lookup(k); e.Suspect() || class() == ClassStuck {
			t.Fatalf("a known MAC of a host that answers is a suspicion: class %v", class())
		}
		if i%2 == 1 {
			tb.Heard(k, macA, c.now()) // every 20 s
		}
	}
	// The old host goes away: its MAC silent past the recheck time, the
	// second MAC's packets are a suspicion again, and silence makes it
	// stuck.
	c.advance(31 * time.Second)
	tb.ObserveSourceMAC(k, macB, 1, c.now())
	if e, _ := tb.Lookup(k); !e.Suspect() || class() != ClassStaleLong {
		t.Fatalf("the entry's MAC silent past the recheck time: suspect %v class %v", e.Suspect(), class())
	}
	c.advance(59 * time.Second)
	if class() != ClassStaleLong {
		t.Fatalf("stuck before the silence window: %v", class())
	}
	c.advance(time.Second)
	if class() != ClassStuck {
		t.Fatalf("silent for the window: class %v, want stuck", class())
	}
	if n := tb.Stats(1).Interfaces[0].Families[0].Stuck; n != 1 {
		t.Fatalf("stuck gauge %d", n)
	}
	// It answers again: not stuck.
	tb.Heard(k, macA, c.now())
	if class() == ClassStuck {
		t.Fatal("stuck after the entry's MAC answered")
	}
}

func TestPromotionWithTimeAndRecovery(t *testing.T) {
	tb, c := newTestTable(time.Minute)
	sub := tb.Events().Subscribe(16)
	defer sub.Close()
	tb.Apply(CauseNetlink, upd(1, ipA, StateStale, macA))
	tb.ObserveMAC(1, ipA, macB, c.now()) // mismatch while young
	drain(sub)
	c.advance(61 * time.Second)
	tb.Advance()
	ev := <-sub.C()
	if ev.Kind != "class" || ev.Class != ClassStuck || ev.Cause != CauseClassify {
		t.Fatalf("promotion event = %+v", ev)
	}
	st := tb.Stats(10)
	if got := st.Interfaces[0].Families[0].OldestStale; got != 61*time.Second {
		t.Fatalf("oldest stale age = %v, want 61s", got)
	}
	// The kernel learns the new MAC: REACHABLE, no longer mismatched.
	tb.Apply(CauseNetlink, upd(1, ipA, StateReachable, macB))
	e, _ := tb.Lookup(Key{1, ipA})
	if e.Class() != ClassOK || e.Observed().Mismatch || e.LLAddrChanges != 1 || e.Transitions != 1 {
		t.Fatalf("after recovery: class %v mismatch %v lladdr changes %d transitions %d", e.Class(), e.Observed().Mismatch, e.LLAddrChanges, e.Transitions)
	}
	st = tb.Stats(10)
	fs := st.Interfaces[0].Families[0]
	if fs.StaleLong != 0 || fs.Stuck != 0 || fs.Mismatched != 0 || fs.HasStale || st.StuckTotal != 0 || fs.LLAddrChanges != 1 {
		t.Fatalf("aggregates after recovery: %+v", fs)
	}
	if fs.Count(StateReachable) != 1 || fs.Count(StateStale) != 0 {
		t.Fatalf("state counts: %v", fs.States)
	}
}

func drain(s *Subscription) {
	for len(s.C()) > 0 {
		<-s.C()
	}
}

func TestResyncSweepsAndCountsTransitions(t *testing.T) {
	tb, _ := newTestTable(time.Minute)
	ipB := netip.MustParseAddr("10.0.0.2")
	tb.BeginSync(true)
	tb.Apply(CauseResync, upd(1, ipA, StateStale, macA), upd(1, ipB, StateReachable, macA))
	tb.EndSync()
	if n := len(tb.Stats(0).Transitions); n != 0 {
		t.Fatalf("initial load counted %d transitions", n)
	}
	sub := tb.Events().Subscribe(16)
	defer sub.Close()
	// A later dump without ipB and with ipA changed.
	tb.BeginSync(false)
	tb.Apply(CauseResync, upd(1, ipA, StateReachable, macA))
	if deleted := tb.EndSync(); deleted != 1 {
		t.Fatalf("sweep deleted %d, want 1", deleted)
	}
	got := map[string]bool{}
	for len(sub.C()) > 0 {
		ev := <-sub.C()
		got[ev.IP.String()+" "+string(ev.Cause)+" "+ev.From.String()+"->"+ev.To.String()] = true
	}
	for _, want := range []string{"10.0.0.1 resync stale->reachable", "10.0.0.2 resync reachable->reachable"} {
		if !got[want] {
			t.Errorf("missing event %q in %v", want, got)
		}
	}
	tr := map[string]uint64{}
	for _, x := range tb.Stats(0).Transitions {
		tr[x.From+"->"+x.To] = x.Count
	}
	if tr["stale->reachable"] != 1 || tr["reachable->absent"] != 1 || len(tr) != 2 {
		t.Fatalf("transitions = %v", tr)
	}
}

func TestDeleteLinkForgetsInterface(t *testing.T) {
	tb, _ := newTestTable(time.Minute)
	tb.SetLinkName(1, "eth0")
	tb.SetLinkName(2, "eth1")
	tb.Apply(CauseNetlink, upd(1, ipA, StateStale, macA), upd(2, ipA, StateStale, macA))
	if n := tb.DeleteLink(2, CauseLink); n != 1 {
		t.Fatalf("deleted %d", n)
	}
	st := tb.Stats(0)
	if st.Entries != 1 || len(st.Interfaces) != 1 || st.Interfaces[0].Name != "eth0" {
		t.Fatalf("after delete: %+v", st)
	}
}

func TestBroadcasterDropsForSlowSubscriber(t *testing.T) {
	b := NewBroadcaster()
	if b.Active() {
		t.Fatal("active without subscribers")
	}
	slow := b.Subscribe(2)
	fast := b.Subscribe(100)
	for i := 0; i < 10; i++ {
		b.Publish(Event{Detail: "x"})
	}
	if slow.Dropped() != 8 || fast.Dropped() != 0 || b.Dropped() != 8 {
		t.Fatalf("dropped: slow %d fast %d total %d", slow.Dropped(), fast.Dropped(), b.Dropped())
	}
	only := b.SubscribeFunc(1, func(ev Event) bool { return ev.Detail == "mine" })
	b.Publish(Event{Detail: "x"})
	b.Publish(Event{Detail: "mine"})
	b.Publish(Event{Detail: "x"})
	if ev := <-only.C(); ev.Detail != "mine" || only.Dropped() != 0 {
		t.Fatalf("filtered subscriber got %q, dropped %d", ev.Detail, only.Dropped())
	}
	only.Close()
	slow.Close()
	slow.Close() // idempotent
	fast.Close()
	if b.Active() {
		t.Fatal("still active after all closed")
	}
}

// TestDroppedBySubscriber: the events a subscriber lost are counted for
// who it is, its losses kept once it is closed, and a subscriber that
// lost none adds nothing.
func TestDroppedBySubscriber(t *testing.T) {
	b := NewBroadcaster()
	stream := b.SubscribeAs(SubscriberStream, 1, nil)
	action := b.SubscribeAs(SubscriberAction, 1, func(ev Event) bool { return ev.Detail == "mine" })
	managed := b.SubscribeAs(SubscriberManaged, 100, nil)
	other := b.Subscribe(2)
	for range 4 {
		b.Publish(Event{Detail: "x"})
	}
	b.Publish(Event{Detail: "mine"})
	b.Publish(Event{Detail: "mine"})
	want := map[Subscriber]uint64{SubscriberStream: 5, SubscriberAction: 1, SubscriberOther: 4}
	if got := b.DroppedBy(); !maps.Equal(got, want) {
		t.Fatalf("dropped by %v, want %v", got, want)
	}
	stream.Close()
	again := b.SubscribeAs(SubscriberStream, 1, nil)
	b.Publish(Event{Detail: "x"})
	b.Publish(Event{Detail: "x"})
	want = map[Subscriber]uint64{SubscriberStream: 6, SubscriberAction: 1, SubscriberOther: 6}
	if got := b.DroppedBy(); !maps.Equal(got, want) || b.Dropped() != 13 {
		t.Fatalf("after a stream closed and another lost one: dropped by %v (total %d), want %v (13)", got, b.Dropped(), want)
	}
	for _, s := range []*Subscription{again, action, managed, other} {
		s.Close()
	}
	if got := b.DroppedBy(); !maps.Equal(got, want) {
		t.Errorf("all closed: dropped by %v, want %v", got, want)
	}
}

func TestStuckCap(t *testing.T) {
	tb, c := newTestTable(time.Second)
	for i := 0; i < 5; i++ {
		ip := netip.AddrFrom4([4]byte{10, 0, 1, byte(i)})
		tb.Apply(CauseNetlink, upd(1, ip, StateStale, macA))
		tb.ObserveMAC(1, ip, macB, c.now())
	}
	c.advance(MinSilence) // stale-long, and silent for the window
	st := tb.Stats(3)
	if st.StuckTotal != 5 || len(st.Stuck) != 3 {
		t.Fatalf("stuck total %d listed %d", st.StuckTotal, len(st.Stuck))
	}
}

func TestHeapOrder(t *testing.T) {
	st := newStore()
	defer st.release()
	var h staleHeap
	slots := make([]uint32, 50)
	for i := range slots {
		slot, r := st.insert(Key{Ifindex: 1, Addr: netip.AddrFrom4([4]byte{10, 0, 0, byte(i)})})
		r.since = int32((i * 37) % 50)
		slots[i] = slot
		h.push(st, slot)
	}
	for i := 0; i < 50; i += 3 {
		h.remove(st, slots[i])
	}
	last, n := int32(-1), 0
	for {
		slot, ok := h.min()
		if !ok {
			break
		}
		if s := st.at(slot).since; s < last {
			t.Fatalf("heap out of order: %d after %d", s, last)
		} else {
			last = s
		}
		h.remove(st, slot)
		n++
	}
	if n != 50-17 {
		t.Errorf("%d entries came out of the heap, want %d", n, 50-17)
	}
}

// TestConflictIsItsOwnClass: an entry whose MAC is one of two that
// answered for its IP is a conflict, not stuck, in any dynamic state,
// whatever its MAC answers afterwards and if the kernel flips to the
// other MAC, until ConflictHold passes without another conflict; a MAC
// outside the pair, or a PERMANENT entry, is not disputed. Evidence that
// the host is gone from the entry's MAC makes it stuck still.
func TestConflictIsItsOwnClass(t *testing.T) {
	macC := net.HardwareAddr{2, 0, 0, 0, 0, 0xc}
	tb, clk := newTestTable(time.Minute)
	k := Key{Ifindex: 1, Addr: ipA}
	tb.Apply(CauseNetlink, upd(1, ipA, StateReachable, macA))
	conflict := func(when string, want bool) {
		t.Helper()
		e, _ := tb.Lookup(k)
		ev := e.Evidence()
		got := e.Class() == ClassConflict && len(ev) > 0 && ev[len(ev)-1].Signal == SignalConflict
		if got != want {
			t.Fatalf("%s: class %v, evidence %v; want a conflict %v", when, e.Class(), ev, want)
		}
		if n := tb.Stats(1).Interfaces[0].Families[0].Conflict; (n == 1) != want {
			t.Fatalf("%s: conflict gauge %d", when, n)
		}
		if n := tb.CountClass(ClassStuck); n != 0 || len(tb.Walk(ClassAtRisk, func(*Entry, string) bool { return true })) != 0 {
			t.Fatalf("%s: a conflict counted stuck or walked for remediation", when)
		}
	}
	if !tb.ObserveConflict(k, macB, macA, clk.now()) {
		t.Fatal("conflict not recorded")
	}
	conflict("reachable at one of the pair", true)
	if e, _ := tb.Lookup(k); e.DisputingMAC() != string(macB) {
		t.Fatalf("disputing MAC %v, want %v", e.HardwareAddr(), macB)
	}
	tb.ObserveMAC(1, ipA, macA, clk.now()) // the entry's MAC answers again
	conflict("after the entry's MAC answered", true)
	clk.advance(ConflictHold / 2)
	tb.Apply(CauseNetlink, upd(1, ipA, StateStale, macB)) // the kernel flips to the other
	conflict("flipped to the other MAC of the pair", true)
	clk.advance(ConflictHold / 2)
	tb.Apply(CauseNetlink, upd(1, ipA, StateReachable, macB))
	conflict("just past the hold since the conflict", false)

	tb.ObserveConflict(k, macA, macB, clk.now())
	conflict("a new conflict", true)
	tb.Apply(CauseNetlink, upd(1, ipA, StateReachable, macC))
	conflict("at a third MAC", false)
	tb.Apply(CauseNetlink, upd(1, ipA, StatePermanent, macA))
	conflict("PERMANENT", false)
	tb.Apply(CauseNetlink, upd(1, ipA, StateReachable, macA))
	conflict("dynamic again within the hold", true)
	// STALE past the threshold, and a probe to its MAC unanswered: the
	// host is gone from it, whoever answered before.
	u := upd(1, ipA, StateStale, macA)
	u.UpdatedAge = 2 * time.Minute
	tb.Apply(CauseNetlink, u)
	tb.ProbeUnanswered(k, string(macA), clk.now())
	if e, _ := tb.Lookup(k); e.Class() != ClassStuck {
		t.Fatalf("a conflict whose MAC went unanswered: class %v, want stuck", e.Class())
	}
	tb.Apply(CauseNetlink, Update{Delete: true, Family: FamilyInet, Ifindex: 1, Addr: ipA})
	if n := tb.CountClass(ClassStuck); n != 0 {
		t.Fatalf("%d stuck after delete", n)
	}
	if tb.ObserveConflict(k, macA, macB, clk.now()) {
		t.Fatal("a conflict on a deleted entry was recorded")
	}
}

// TestSetThreshold: a longer threshold takes stale-long entries back, a
// shorter one makes them stale-long at once.
func TestSetThreshold(t *testing.T) {
	tb := New(time.Hour, nil)
	tb.SetLinkName(3, "eth0")
	tb.Apply(CauseNetlink, Update{Ifindex: 3, Family: FamilyInet, Addr: netip.MustParseAddr("10.0.0.1"), State: StateStale, LLAddr: []byte{2, 0, 0, 0, 0, 1}})
	if n := tb.CountClass(ClassStaleLong); n != 0 {
		t.Fatalf("stale-long under a 1h threshold: %d", n)
	}
	tb.SetThreshold(time.Nanosecond)
	if n := tb.CountClass(ClassStaleLong); n != 1 || time.Duration(coreOf(tb).threshold) != time.Nanosecond {
		t.Fatalf("stale-long after lowering the threshold: %d", n)
	}
	tb.SetThreshold(time.Hour)
	if n := tb.CountClass(ClassStaleLong); n != 0 {
		t.Fatalf("stale-long after raising the threshold again: %d", n)
	}
}

// TestCandidateChanges: after Candidates, CandidateChanges reports each
// entry whose candidacy or lladdr changed, once, with its lladdr now (""
// when it left the set); changes that do not touch the set are not
// reported; when the changes outgrow the bound it says so and reports
// nothing until Candidates is walked again.
func TestCandidateChanges(t *testing.T) {
	tb, _ := newTestTable(time.Minute)
	ipB, ipC := netip.MustParseAddr("10.0.0.2"), netip.MustParseAddr("10.0.0.3")
	tb.Apply(CauseNetlink, upd(2, ipA, StateStale, macA), upd(2, ipB, StateReachable, macA))
	changes := func() map[Key]string {
		out := map[Key]string{}
		if !tb.CandidateChanges(func(k Key, ll string) { out[k] = strings.Clone(ll) }) {
			return nil
		}
		return out
	}
	if changes() != nil {
		t.Fatal("changes reported before Candidates")
	}
	all := map[Key]string{}
	allCandidates(tb, func(k Key, ll string) { all[k] = strings.Clone(ll) })
	if len(all) != 1 || all[Key{2, ipA}] != string(macA) {
		t.Fatalf("candidates = %v, want only %v", all, ipA)
	}
	tb.Apply(CauseNetlink,
		upd(2, ipA, StateStale, macB), // lladdr changed
		upd(2, ipB, StateDelay, macA), // not a candidate before or after
		upd(2, ipC, StateStale, macA), // new
		upd(2, ipA, StateStale, macB)) // no change
	got := changes()
	want := map[Key]string{{2, ipA}: string(macB), {2, ipC}: string(macA)}
	if !maps.Equal(got, want) {
		t.Fatalf("changes = %v, want %v", got, want)
	}
	if got := changes(); len(got) != 0 {
		t.Fatalf("changes reported twice: %v", got)
	}
	tb.Apply(CauseNetlink, upd(2, ipA, StateReachable, macB), Update{Delete: true, Ifindex: 2, Addr: ipC, Family: FamilyInet})
	if got, want := changes(), (map[Key]string{{2, ipA}: "", {2, ipC}: ""}); !maps.Equal(got, want) {
		t.Fatalf("changes = %v, want %v", got, want)
	}
	// A storm of short-lived entries, past the bound: the table stays
	// small while the keys to report grow.
	var us []Update
	for i := range minCandDirty + 1 {
		ip := netip.AddrFrom4([4]byte{10, 1, byte(i >> 8), byte(i)})
		us = append(us, upd(3, ip, StateStale, macA), Update{Delete: true, Ifindex: 3, Addr: ip, Family: FamilyInet})
	}
	tb.Apply(CauseNetlink, us...)
	if changes() != nil {
		t.Fatal("a storm past the bound was reported as complete")
	}
	n := 0
	allCandidates(tb, func(Key, string) { n++ })
	if n != 0 {
		t.Fatalf("candidates after the storm = %d, want none", n)
	}
	if got := changes(); got == nil || len(got) != 0 {
		t.Fatalf("changes after walking again = %v, want none", got)
	}
}

// allCandidates walks every candidate one at a time, as a reader that
// walks in batches does, cursor after cursor.
func allCandidates(tb *Table, fn func(k Key, lladdr string)) {
	for from := tb.Candidates(0, 1, fn); from != 0; {
		from = tb.Candidates(from, 1, fn)
	}
}

// TestPromotionStormGrowsOnce: 100,000 STALE entries crossing the
// threshold in one advance move to the long heaps with one allocation
// each, not append's chain of copies, which came to about five times the
// heaps' final size (2.2 MB for 0.4 MB here).
func TestPromotionStormGrowsOnce(t *testing.T) {
	tb, c := newTestTable(time.Minute)
	const n = 100_000
	tb.Apply(CauseNetlink, benchUpdates(n, StateStale)...)
	if got := tb.CountClass(ClassStaleLong); got != 0 {
		t.Fatalf("%d entries past the threshold at once, want none", got)
	}
	c.advance(2 * time.Minute)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	got := tb.CountClass(ClassStaleLong)
	runtime.ReadMemStats(&after)
	if got != n {
		t.Fatalf("%d entries past the threshold, want %d", got, n)
	}
	final := uint64(n * 4) // a 4-byte slot each
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 2*final {
		t.Errorf("the promotion allocated %d bytes for heaps of %d; want at most twice that", alloc, final)
	} else {
		t.Logf("the promotion allocated %d bytes for heaps of %d", alloc, final)
	}
}

// TestPromotionStormKeepsTheRest: a storm's advance takes the entries
// past the threshold out of the young heap at once, and leaves the rest a
// valid heap (each below its parent, each record knowing its place),
// whose entries cross later, in order, as the clock reaches each.
func TestPromotionStormKeepsTheRest(t *testing.T) {
	tb, c := newTestTable(time.Minute)
	const n = 40_000 // on 4 interfaces: 2,000 a heap cross 20 s on, 1,000 each 10 s after
	us := benchUpdates(n, StateStale)
	for i := range us {
		// Ages from 0 to 99 s in no order: those over 40 s cross 20 s on.
		us[i].UpdatedAge = time.Duration(i*7919%100) * time.Second
	}
	tb.Apply(CauseNetlink, us...)
	crossedBy := func(d time.Duration) int {
		k := 0
		for _, u := range us {
			if u.UpdatedAge+d >= time.Minute {
				k++
			}
		}
		return k
	}
	valid := func() int {
		t.Helper()
		left := 0
		for _, s := range coreOf(tb).ifaces {
			for f := range s.pending {
				h := s.pending[f]
				left += len(h)
				for i, slot := range h {
					if got := coreOf(tb).st.at(slot).heapIdx; got != int32(i) {
						t.Fatalf("slot %d at %d of the young heap thinks it is at %d", slot, i, got)
					}
					if i > 0 && h.less(coreOf(tb).st, i, (i-1)/2) {
						t.Fatalf("the young heap is out of order at %d", i)
					}
				}
			}
		}
		return left
	}
	// Those already past the minute are stale-long as they come.
	if got, want := tb.Advance(), 0; got != want {
		t.Fatalf("%d promoted at once, want %d", got, want)
	}
	c.advance(20 * time.Second)
	if got, want := crossedBy(0)+tb.Advance(), crossedBy(20*time.Second); got != want || (want-crossedBy(0))/4 < promotionStorm {
		t.Fatalf("%d past the threshold by 20 s, want %d (a storm of at least %d)", got, want, promotionStorm)
	}
	if left, want := valid(), n-crossedBy(20*time.Second); left != want {
		t.Fatalf("%d left young, want %d", left, want)
	}
	promoted := crossedBy(20 * time.Second) // stale-long so far, as checked above
	for elapsed := 30 * time.Second; elapsed <= time.Minute; elapsed += 10 * time.Second {
		c.advance(10 * time.Second)
		promoted += tb.Advance()
		if want := crossedBy(elapsed); promoted != want {
			t.Fatalf("%d promoted by %v, want %d", promoted, elapsed, want)
		}
		if left, want := valid(), n-crossedBy(elapsed); left != want {
			t.Fatalf("%d left young at %v, want %d", left, elapsed, want)
		}
	}
	if got := tb.CountClass(ClassStaleLong); got != n {
		t.Errorf("%d stale-long at the end, want %d", got, n)
	}
}

// TestAdvanceCountsWhatReadersPromoted: a scrape or a lookup that
// advances the table first does not hide a burst from Advance, whose
// caller returns the burst's memory; each promotion is counted once.
func TestAdvanceCountsWhatReadersPromoted(t *testing.T) {
	tb, c := newTestTable(time.Minute)
	for i := range 300 {
		tb.Apply(CauseNetlink, upd(1, netip.AddrFrom4([4]byte{10, 2, byte(i >> 8), byte(i)}), StateStale, macA))
	}
	c.advance(61 * time.Second)
	tb.Stats(10) // a scrape: it promotes the 300
	if e, ok := tb.Lookup(Key{1, netip.AddrFrom4([4]byte{10, 2, 0, 7})}); !ok || e.Class() != ClassStaleLong {
		t.Fatalf("after the scrape the entry is %v (%v), want stale-long", e.Class(), ok)
	}
	if n := tb.Advance(); n != 300 {
		t.Errorf("Advance after a scrape promoted them: %d, want 300", n)
	}
	if n := tb.Advance(); n != 0 {
		t.Errorf("a second Advance: %d, want 0", n)
	}
}

// TestEventsCopyOnlyWhatIsKept: a subscriber's event holds its own copy
// of the MACs, which later changes to the entry do not touch; and a
// burst that no subscriber keeps copies no MAC (a thousand entries
// crossing the threshold allocated one each).
func TestEventsCopyOnlyWhatIsKept(t *testing.T) {
	tb, c := newTestTable(time.Minute)
	all := tb.Events().Subscribe(16)
	tb.Apply(CauseNetlink, upd(1, ipA, StateStale, macA))
	tb.Apply(CauseNetlink, upd(1, ipA, StateReachable, macB))
	created, moved := <-all.C(), <-all.C()
	all.Close()
	if !bytes.Equal(created.LLAddr, macA) || !bytes.Equal(moved.OldLLAddr, macA) || !bytes.Equal(moved.LLAddr, macB) {
		t.Fatalf("events: created at %v, then %v -> %v; want %v, then %v -> %v", created.LLAddr, moved.OldLLAddr, moved.LLAddr, macA, macA, macB)
	}

	for i := range 1000 {
		tb.Apply(CauseNetlink, upd(2, netip.AddrFrom4([4]byte{10, 3, byte(i >> 8), byte(i)}), StateStale, macA))
	}
	kept := 0
	none := tb.Events().SubscribeFunc(16, func(ev Event) bool {
		if ev.Kind == KindClass && ev.IP == netip.AddrFrom4([4]byte{10, 3, 0, 9}) {
			kept++
			return true
		}
		return false
	})
	defer none.Close()
	c.advance(61 * time.Second)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	n := tb.Advance()
	runtime.ReadMemStats(&after)
	if n != 1000 || kept != 1 {
		t.Fatalf("promoted %d, kept %d events; want 1,000 and 1", n, kept)
	}
	if ev := <-none.C(); !bytes.Equal(ev.LLAddr, macA) {
		t.Errorf("the kept event's MAC is %v, want %v", ev.LLAddr, macA)
	}
	// The long heap grows by append (below a storm) a few dozen times.
	allocs := after.Mallocs - before.Mallocs
	t.Logf("1,000 promotions, one event kept: %d allocations", allocs)
	if allocs > 100 {
		t.Errorf("1,000 promotions that one subscriber filtered: %d allocations, want at most 100", allocs)
	}
}

// TestReportConflict: a reported conflict is recorded as ObserveConflict
// records it, and its event carries both MACs, the cause and detail, and
// the entry's state and class as the conflict leaves them; an IP the
// table does not hold still gets its event, marked created and deleted.
func TestReportConflict(t *testing.T) {
	tb := New(time.Minute, nil)
	tb.SetLinkName(3, "eth0")
	k := Key{Ifindex: 3, Addr: netip.MustParseAddr("10.0.0.9")}
	a, b := net.HardwareAddr{2, 0, 0, 0, 0, 1}, net.HardwareAddr{2, 0, 0, 0, 0, 2}
	tb.Apply(CauseNetlink, Update{Ifindex: 3, Family: FamilyInet, Addr: k.Addr, State: StateStale, LLAddr: a})
	sub := tb.Events().SubscribeFunc(8, func(ev Event) bool { return ev.Kind == KindConflict })
	defer sub.Close()
	if !tb.ReportConflict(k, a, b, time.Now(), CauseRemediate, "why") {
		t.Fatal("not recorded")
	}
	ev := <-sub.C()
	en, _ := tb.Lookup(k)
	if en.Class() != ClassConflict || ev.Class != ClassConflict || ev.From != StateStale || ev.To != StateStale || ev.Created || ev.Deleted ||
		ev.OldLLAddr.String() != a.String() || ev.LLAddr.String() != b.String() || ev.Cause != CauseRemediate || ev.Detail != "why" || ev.Interface != "eth0" {
		t.Errorf("entry class %v, event %+v", en.Class(), ev)
	}
	other := Key{Ifindex: 3, Addr: netip.MustParseAddr("10.0.0.10")}
	if tb.ReportConflict(other, a, b, time.Now(), CauseARP, "x") {
		t.Error("recorded for an IP the table does not hold")
	}
	if ev := <-sub.C(); !ev.Created || !ev.Deleted || ev.IP != other.Addr {
		t.Errorf("event for an IP the table does not hold: %+v", ev)
	}
}

// TestBroadcasterHookSeesEveryEvent: a hook is called with every event
// as it is published, where a subscriber with a full buffer loses them;
// removed, it is called no more, and a broadcaster with neither hook
// nor subscriber is inactive (publishers build no events).
func TestBroadcasterHookSeesEveryEvent(t *testing.T) {
	b := NewBroadcaster()
	slow := b.Subscribe(1)
	seen := 0
	remove := b.Hook(func(Event) { seen++ })
	for range 5 {
		b.Publish(Event{Detail: "x"})
	}
	if seen != 5 || slow.Dropped() != 4 {
		t.Fatalf("hook saw %d of 5, the full subscriber dropped %d; want 5 and 4", seen, slow.Dropped())
	}
	slow.Close()
	if !b.Active() {
		t.Fatal("inactive with a hook left")
	}
	remove()
	remove() // twice: once
	b.Publish(Event{})
	if seen != 5 || b.Active() {
		t.Errorf("after the hook's removal: seen %d, active %v; want 5, false", seen, b.Active())
	}
}

// coreOf returns the state behind tb's parts.
func coreOf(tb *Table) *core { return tb.Reader.core }
