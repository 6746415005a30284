package table

import (
	"net/netip"
	"testing"
	"time"
)

// The tests in this file guard rules of the ledger (docs/rules.md) that
// no other test caught a break of.

// staleFor applies an entry of ipA on interface 1, STALE for age at
// macA.
func staleFor(tb *Table, age time.Duration) Key {
	u := upd(1, ipA, StateStale, macA)
	u.UpdatedAge = age
	tb.Apply(CauseNetlink, u)
	return Key{1, ipA}
}

// TestBypassCountsInItsStalePeriod: bypass traffic makes a stale-long
// entry at-risk in the STALE period it came in; once the entry was
// confirmed and went STALE again, that traffic says nothing of the new
// period.
func TestBypassCountsInItsStalePeriod(t *testing.T) {
	tb, c := newTestTable(time.Minute)
	k := staleFor(tb, time.Hour)
	tb.AddBypass(k, 7, c.now())
	if got := classOf(t, tb, k); got != ClassAtRisk {
		t.Fatalf("stale-long with bypass traffic: %v, want at-risk", got)
	}
	tb.Apply(CauseNetlink, upd(1, ipA, StateReachable, macA))
	staleFor(tb, time.Hour)
	e, _ := tb.Lookup(k)
	if e.Class() != ClassStaleLong || e.Observed().BypassInState != 0 {
		t.Errorf("STALE again with no traffic since: %v, %d packets in the period; want stale-long and 0", e.Class(), e.Observed().BypassInState)
	}
	if e.Observed().BypassPackets != 7 {
		t.Errorf("all-time bypass packets %d, want the 7 kept", e.Observed().BypassPackets)
	}
}

// TestMovedHostThatKeepsSendingIsStuck: a moved host keeps sending from
// its new MAC, sighting after sighting; its entry's MAC stays silent, so
// it is stuck the silence window after the first sighting, not after the
// last.
func TestMovedHostThatKeepsSendingIsStuck(t *testing.T) {
	tb, c := newTestTable(time.Second) // silence: MinSilence
	k := staleFor(tb, time.Hour)
	first := c.now()
	for range 9 {
		tb.ObserveSourceMAC(k, macB, 10, c.now())
		c.advance(time.Second)
	}
	tb.ObserveSourceMAC(k, macB, 10, c.now()) // 9 s after the first
	if got := classOf(t, tb, k); got != ClassStaleLong {
		t.Fatalf("9 s after the first sighting: %v, want stale-long (a suspicion)", got)
	}
	c.t = first.Add(MinSilence)
	tb.ObserveSourceMAC(k, macB, 10, c.now())
	e, _ := tb.Lookup(k)
	if e.Class() != ClassStuck {
		t.Errorf("the silence window after the first sighting, the host still sending from %v: %v, want stuck", macB, e.Class())
	}
	if !e.SuspectSince().Equal(first) {
		t.Errorf("suspect since %v, want the first sighting, %v", e.SuspectSince(), first)
	}
}

// TestHeardBeforeTheSightingExplainsNothing: the entry's MAC heard at a
// moment before the sighting (packets counted in an earlier interval)
// does not explain it: the entry is stuck once its MAC stays silent
// after the sighting.
func TestHeardBeforeTheSightingExplainsNothing(t *testing.T) {
	tb, c := newTestTable(time.Second)
	k := staleFor(tb, time.Hour)
	tb.ObserveSourceMAC(k, macB, 1, c.now())
	tb.Heard(k, macA, c.now().Add(-time.Second))
	e, _ := tb.Lookup(k)
	if !e.Suspect() || e.MultiMAC() {
		t.Fatalf("heard before the sighting: suspect %v, multi-MAC %v; want still a suspect, no second MAC", e.Suspect(), e.MultiMAC())
	}
	c.advance(MinSilence)
	if got := classOf(t, tb, k); got != ClassStuck {
		t.Errorf("silent since the sighting: %v, want stuck", got)
	}
}

// stuckByProbe holds one entry STALE for an hour at macA, stuck by a
// probe to macA left unanswered.
func stuckByProbe(t *testing.T) (*Table, Key) {
	t.Helper()
	tb, c := newTestTable(time.Minute)
	k := staleFor(tb, time.Hour)
	if !tb.ProbeUnanswered(k, string(macA), c.now()) {
		t.Fatal("probe not recorded")
	}
	if got := classOf(t, tb, k); got != ClassStuck {
		t.Fatalf("unanswered: %v, want stuck", got)
	}
	return tb, k
}

// TestStateChangeDropsAnUnansweredProbe: an unanswered probe proves the
// host gone only while the entry keeps the state it was sent in: once
// the kernel confirmed the entry (REACHABLE) and it went STALE again, the
// old silence says nothing.
func TestStateChangeDropsAnUnansweredProbe(t *testing.T) {
	tb, k := stuckByProbe(t)
	tb.Apply(CauseNetlink, upd(1, ipA, StateReachable, macA))
	staleFor(tb, time.Hour)
	if e, _ := tb.Lookup(k); e.Class() != ClassStaleLong || len(e.Evidence()) != 0 {
		t.Errorf("STALE again after a confirmation: %v with %v, want stale-long with no evidence", e.Class(), e.Evidence())
	}
}

// TestMoveForgetsTheUnansweredProbe: a probe the old MAC left unanswered
// says nothing of the MAC the kernel then points the entry at, though
// the entry stays STALE: once it moves, the probe is no evidence, nor
// when the entry comes back to the MAC that left it unanswered.
func TestMoveForgetsTheUnansweredProbe(t *testing.T) {
	tb, k := stuckByProbe(t)
	u := upd(1, ipA, StateStale, macB)
	u.UpdatedAge = time.Hour
	tb.Apply(CauseNetlink, u)
	e, _ := tb.Lookup(k)
	if e.LLAddr != string(macB) || e.State != StateStale {
		t.Fatalf("the move was not applied: %+v", e)
	}
	for _, ev := range e.Evidence() {
		if ev.Signal == SignalProbeUnanswered {
			t.Errorf("moved to %v, still STALE: the old MAC's unanswered probe still counts (%v, class %v)", macB, e.Evidence(), e.Class())
		}
	}
	// Back at the first MAC: the probe was of a period that ended.
	u.LLAddr = macA
	tb.Apply(CauseNetlink, u)
	if e, _ := tb.Lookup(k); e.LLAddr != string(macA) || len(e.Evidence()) != 0 || e.Class() == ClassStuck {
		t.Errorf("moved back to %v: %v with %v, want no evidence", macA, e.Class(), e.Evidence())
	}
}

// TestConflictHeldFromTheLast: a conflict holds its entry ConflictHold
// after it was last seen: seen again, the hold starts again.
func TestConflictHeldFromTheLast(t *testing.T) {
	tb, c := newTestTable(time.Minute)
	k := staleFor(tb, time.Hour)
	tb.ObserveConflict(k, macA, macB, c.now())
	c.advance(4 * time.Minute)
	tb.ObserveConflict(k, macA, macB, c.now())
	c.advance(ConflictHold - time.Second) // 9 min 59 s after the first
	if got := classOf(t, tb, k); got != ClassConflict {
		t.Fatalf("%v after the last conflict: %v, want conflict", ConflictHold-time.Second, got)
	}
	c.advance(time.Second)
	if got := classOf(t, tb, k); got != ClassStaleLong {
		t.Errorf("%v after the last conflict: %v, want stale-long", ConflictHold, got)
	}
}

// TestInitialLoadIsSilent: the first dump publishes no event and counts
// no transition: the first event a subscriber gets is the first change
// after it, and only that change is counted.
func TestInitialLoadIsSilent(t *testing.T) {
	tb, _ := newTestTable(time.Minute)
	sub := tb.Events().Subscribe(16)
	defer sub.Close()
	tb.BeginSync(true)
	for i := range 3 {
		tb.Apply(CauseNetlink, upd(1, netip.AddrFrom4([4]byte{10, 0, 0, byte(i + 1)}), StateReachable, macA))
	}
	tb.EndSync()
	after := netip.MustParseAddr("10.0.0.9")
	tb.Apply(CauseNetlink, upd(1, after, StateReachable, macA)) // the sentinel
	var ev Event
	select {
	case ev = <-sub.C(): // published within Apply
	default:
		t.Fatal("no event for a change after the load")
	}
	if ev.IP != after || !ev.Created {
		t.Errorf("first event: %v %s (created %v), want the creation of %v after the load", ev.IP, ev.Kind, ev.Created, after)
	}
	var n uint64
	for _, tr := range tb.Stats(0).Transitions {
		n += tr.Count
	}
	if n != 1 {
		t.Errorf("%d transitions counted, want 1: the load's entries count none", n)
	}
}

// TestWalksAtEmptyAndFullStores: every walk of the table (Range,
// Candidates, Snapshot, Walk, a resync's sweep) visits each entry once
// and nothing past the last slot: on a table that never held an entry,
// on one holding exactly a slab and exactly two, and on one emptied
// again.
func TestWalksAtEmptyAndFullStores(t *testing.T) {
	walks := func(t *testing.T, tb *Table, want int) {
		t.Helper()
		n := 0
		for from := uint32(0); ; {
			from = tb.Range(from, 4096, func(*Entry) { n++ })
			if from == 0 {
				break
			}
		}
		if n != want {
			t.Errorf("Range visited %d, want %d", n, want)
		}
		n = 0
		for from := uint32(0); ; {
			from = tb.Candidates(from, 4096, func(Key, string) { n++ })
			if from == 0 {
				break
			}
		}
		if n != want {
			t.Errorf("Candidates visited %d, want %d", n, want)
		}
		if s, _ := tb.Snapshot(); len(s) != want {
			t.Errorf("Snapshot holds %d, want %d", len(s), want)
		}
		n = 0
		tb.Walk(ClassOK, func(*Entry, string) bool { n++; return false })
		if n != want {
			t.Errorf("Walk visited %d, want %d", n, want)
		}
		tb.BeginSync(false)
		tb.EndSync() // confirms none: deletes every entry it walks to
		if tb.Len() != 0 {
			t.Errorf("%d entries left after a resync that confirmed none", tb.Len())
		}
	}
	t.Run("never held an entry", func(t *testing.T) { walks(t, New(time.Minute, nil), 0) })
	for _, n := range []int{slotsPerSlab, 2 * slotsPerSlab} {
		tb := New(time.Minute, nil)
		us := make([]Update, n)
		for i := range us {
			us[i] = upd(1, netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}), StateStale, macA)
		}
		tb.Apply(CauseNetlink, us...)
		if coreOf(tb).st.top != uint32(n) || len(coreOf(tb).st.slabs) != n/slotsPerSlab {
			t.Fatalf("%d entries: top %d in %d slabs, want every slab full", n, coreOf(tb).st.top, len(coreOf(tb).st.slabs))
		}
		t.Run("full slabs", func(t *testing.T) { walks(t, tb, n) })
		t.Run("emptied", func(t *testing.T) { walks(t, tb, 0) })
	}
}

// TestStaleAgeIsTheStates: an entry REACHABLE for an hour that turns
// STALE is young: its age is the time since it turned STALE.
func TestStaleAgeIsTheStates(t *testing.T) {
	tb, c := newTestTable(time.Minute)
	u := upd(1, ipA, StateReachable, macA)
	u.UpdatedAge = time.Hour
	tb.Apply(CauseNetlink, u)
	k := staleFor(tb, 0) // the kernel's notification: STALE since now
	if got := classOf(t, tb, k); got != ClassOK {
		t.Fatalf("just turned STALE after an hour REACHABLE: %v, want ok", got)
	}
	c.advance(time.Minute)
	if got := classOf(t, tb, k); got != ClassStaleLong {
		t.Errorf("STALE for the threshold: %v, want stale-long", got)
	}
}
