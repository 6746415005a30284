package table

import (
	"maps"
	"net"
	"net/netip"
	"slices"
	"testing"
	"time"
)

type clock struct{ t time.Time }

func (c *clock) now() time.Time          { return c.t }
func (c *clock) advance(d time.Duration) { c.t = c.t.Add(d) }
func newTestTable(thr time.Duration) (*Table, *clock) {
	c := &clock{t: time.Unix(1_700_000_000, 0)}
	t := New(thr, nil)
	t.now = c.now
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
		probe     bool             // a unicast probe to the entry's MAC went unanswered
		bypass    uint64
		wantClass Class
		signals   []Signal
	}{
		{name: "reachable is ok", state: StateReachable, age: time.Hour, wantClass: ClassOK},
		{name: "young stale is ok", state: StateStale, age: 59 * time.Second, wantClass: ClassOK},
		{name: "old stale is stale-long", state: StateStale, age: 60 * time.Second, wantClass: ClassStaleLong},
		{name: "old stale with same MAC seen is stale-long", state: StateStale, age: 2 * time.Minute, seen: macA, source: macA, wantClass: ClassStaleLong},
		{name: "old stale with moved MAC is stuck", state: StateStale, age: 2 * time.Minute, seen: macB, wantClass: ClassStuck, signals: []Signal{SignalARP}},
		{name: "young stale with moved MAC is not yet stuck", state: StateStale, age: 10 * time.Second, seen: macB, wantClass: ClassOK, signals: []Signal{SignalARP}},
		{name: "bypass traffic alone is at-risk, not stuck", state: StateStale, age: 2 * time.Minute, bypass: 5, wantClass: ClassAtRisk, signals: []Signal{SignalBypass}},
		{name: "bypass traffic to a host seen at its MAC is at-risk", state: StateStale, age: 2 * time.Minute, bypass: 5, source: macA, seen: macA, wantClass: ClassAtRisk, signals: []Signal{SignalBypass}},
		{name: "source MAC elsewhere is stuck", state: StateStale, age: 2 * time.Minute, source: macB, wantClass: ClassStuck, signals: []Signal{SignalSourceMAC}},
		{name: "bypass and source MAC elsewhere is stuck", state: StateStale, age: 2 * time.Minute, bypass: 5, source: macB, wantClass: ClassStuck, signals: []Signal{SignalBypass, SignalSourceMAC}},
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
			if tt.bypass > 0 {
				tb.AddBypass(k, tt.bypass, c.now())
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
			st := tb.Stats(10)
			fs := st.Interfaces[0].Families[0]
			wantLong := tt.wantClass != ClassOK
			if (fs.StaleLong == 1) != wantLong || (fs.Stuck == 1) != (tt.wantClass == ClassStuck) ||
				(fs.AtRisk == 1) != (tt.wantClass == ClassAtRisk) || (st.StuckTotal == 1) != (tt.wantClass == ClassStuck) {
				t.Fatalf("aggregates: stale-long %d at-risk %d stuck %d stuck set %d for class %v", fs.StaleLong, fs.AtRisk, fs.Stuck, st.StuckTotal, tt.wantClass)
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
	if e.Class() != ClassOK || len(e.Evidence()) != 0 {
		t.Fatalf("after repair: class %v, evidence %v", e.Class(), e.Evidence())
	}
	// Set STALE at a third MAC: what was seen of the host's packets before
	// is not evidence against the new MAC.
	u = upd(1, ipA, StateStale, net.HardwareAddr{2, 0, 0, 0, 0, 0xc})
	u.UpdatedAge = 2 * time.Minute
	tb.Apply(CauseNetlink, u)
	if e, _ := tb.Lookup(k); e.Class() != ClassStaleLong || e.Observed().SourceMismatch {
		t.Fatalf("after a new MAC: class %v, evidence %v; want stale-long with none", e.Class(), e.Evidence())
	}
	// Likewise an ARP sighting from before the new MAC; one after it counts.
	c.advance(time.Second)
	tb.ObserveMAC(1, ipA, macA, c.now())
	c.advance(time.Second)
	u = upd(1, ipA, StateStale, net.HardwareAddr{2, 0, 0, 0, 0, 0xd})
	u.UpdatedAge = 2 * time.Minute
	tb.Apply(CauseNetlink, u)
	if e, _ := tb.Lookup(k); e.Observed().Mismatch || e.Class() != ClassStaleLong {
		t.Fatalf("an ARP sighting older than the entry's MAC counts: class %v, evidence %v", e.Class(), e.Evidence())
	}
	tb.ObserveMAC(1, ipA, macA, c.now())
	if e, _ := tb.Lookup(k); !e.Observed().Mismatch || e.Class() != ClassStuck {
		t.Fatalf("a fresh ARP sighting at another MAC does not count: class %v, evidence %v", e.Class(), e.Evidence())
	}
	if tb.ProbeUnanswered(k, string(macA), c.now()) {
		t.Error("a probe to a MAC the entry no longer has was recorded")
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

func TestStuckCap(t *testing.T) {
	tb, c := newTestTable(time.Second)
	for i := 0; i < 5; i++ {
		ip := netip.AddrFrom4([4]byte{10, 0, 1, byte(i)})
		tb.Apply(CauseNetlink, upd(1, ip, StateStale, macA))
		tb.ObserveMAC(1, ip, macB, c.now())
	}
	c.advance(2 * time.Second)
	st := tb.Stats(3)
	if st.StuckTotal != 5 || len(st.Stuck) != 3 {
		t.Fatalf("stuck total %d listed %d", st.StuckTotal, len(st.Stuck))
	}
}

func TestHeapOrder(t *testing.T) {
	var h staleHeap
	es := make([]*Entry, 50)
	for i := range es {
		es[i] = &Entry{Since: int64((i * 37) % 50), heapIdx: -1}
		h.push(es[i])
	}
	for i := 0; i < 50; i += 3 {
		h.remove(es[i])
	}
	last := int64(-1)
	for h.min() != nil {
		e := h.min()
		if e.Since < last {
			t.Fatalf("heap out of order: %d after %d", e.Since, last)
		}
		last = e.Since
		h.remove(e)
	}
}

// TestConflictHoldsStuck: an entry whose MAC is one of two that answered
// for its IP is stuck in any dynamic state, whatever its MAC answers
// afterwards and if the kernel flips to the other MAC, until ConflictHold
// passes without another conflict; a MAC outside the pair, or a PERMANENT
// entry, is not disputed.
func TestConflictHoldsStuck(t *testing.T) {
	macC := net.HardwareAddr{2, 0, 0, 0, 0, 0xc}
	tb, clk := newTestTable(time.Minute)
	k := Key{Ifindex: 1, Addr: ipA}
	tb.Apply(CauseNetlink, upd(1, ipA, StateReachable, macA))
	stuck := func(when string, want bool) {
		t.Helper()
		e, _ := tb.Lookup(k)
		ev := e.Evidence()
		got := e.Class() == ClassStuck && len(ev) > 0 && ev[len(ev)-1].Signal == SignalConflict
		if got != want {
			t.Fatalf("%s: class %v, evidence %v; want stuck by conflict %v", when, e.Class(), ev, want)
		}
		if n := tb.CountClass(ClassStuck); (n == 1) != want {
			t.Fatalf("%s: %d stuck", when, n)
		}
	}
	if !tb.ObserveConflict(k, macB, macA, clk.now()) {
		t.Fatal("conflict not recorded")
	}
	stuck("reachable at one of the pair", true)
	if e, _ := tb.Lookup(k); e.DisputingMAC() != string(macB) {
		t.Fatalf("disputing MAC %v, want %v", e.HardwareAddr(), macB)
	}
	tb.ObserveMAC(1, ipA, macA, clk.now()) // the spoofer answers again
	stuck("after the entry's MAC answered", true)
	clk.advance(ConflictHold / 2)
	tb.Apply(CauseNetlink, upd(1, ipA, StateStale, macB)) // the kernel flips to the other
	stuck("flipped to the other MAC of the pair", true)
	clk.advance(ConflictHold / 2)
	tb.Apply(CauseNetlink, upd(1, ipA, StateReachable, macB))
	stuck("just past the hold since the conflict", false)

	tb.ObserveConflict(k, macA, macB, clk.now())
	stuck("a new conflict", true)
	tb.Apply(CauseNetlink, upd(1, ipA, StateReachable, macC))
	stuck("at a third MAC", false)
	tb.Apply(CauseNetlink, upd(1, ipA, StatePermanent, macA))
	stuck("PERMANENT", false)
	tb.Apply(CauseNetlink, upd(1, ipA, StateReachable, macA))
	stuck("dynamic again within the hold", true)
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
	if n := tb.CountClass(ClassStaleLong); n != 1 || tb.Threshold() != time.Nanosecond {
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
		if !tb.CandidateChanges(func(k Key, ll string) { out[k] = ll }) {
			return nil
		}
		return out
	}
	if changes() != nil {
		t.Fatal("changes reported before Candidates")
	}
	all := map[Key]string{}
	tb.Candidates(func(k Key, ll string) { all[k] = ll })
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
	tb.Candidates(func(Key, string) { n++ })
	if n != 0 {
		t.Fatalf("candidates after the storm = %d, want none", n)
	}
	if got := changes(); got == nil || len(got) != 0 {
		t.Fatalf("changes after walking again = %v, want none", got)
	}
}
