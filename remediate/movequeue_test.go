package remediate

import (
	"context"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/neighwatch/neighwatch/internal/dev/lab"
	"github.com/neighwatch/neighwatch/table"
)

// moveEv is a move of 10.0.0.<i> on ifindex 3 from old to now at t0.
func moveEv(i int, old, now net.HardwareAddr, moves uint32, oldSince, lastUsed int64) table.Event {
	return table.Event{Time: time.Unix(0, t0), Ifindex: 3, IP: netip.AddrFrom4([4]byte{10, 0, byte(i >> 8), byte(i)}),
		Kind: table.KindTransition, OldLLAddr: old, LLAddr: now, Moves: moves, OldLLAddrSince: oldSince, LastUsed: lastUsed}
}

const t0 = int64(1_000_000) * int64(time.Second)

func mac(i int) net.HardwareAddr {
	return net.HardwareAddr{2, 0x55, 0, byte(i >> 16), byte(i >> 8), byte(i)}
}

// TestMoveStake: what a move puts at stake, from the event alone and the
// claims of its new MAC.
func TestMoveStake(t *testing.T) {
	s := int64(time.Second)
	for _, tc := range []struct {
		name   string
		ev     table.Event
		claims int
		want   stake
	}{
		{"an address's first move", moveEv(1, mac(1), mac(2), 1, t0-s, 0), 1, stakeSettled | stakeFewClaims},
		{"moved a second ago", moveEv(1, mac(1), mac(2), 2, t0-s, 0), 1, stakeFewClaims},
		{"its old MAC held a minute", moveEv(1, mac(1), mac(2), 9, t0-60*s, 0), 1, stakeSettled | stakeFewClaims},
		{"since unknown", moveEv(1, mac(1), mac(2), 9, 0, 0), 1, stakeFewClaims},
		{"used 59 s ago", moveEv(1, mac(1), mac(2), 9, t0-s, t0-59*s), 1, stakeInUse | stakeFewClaims},
		{"used 60 s ago", moveEv(1, mac(1), mac(2), 9, t0-s, t0-60*s), 1, stakeFewClaims},
		{"to a MAC of 15 claims", moveEv(1, mac(1), mac(2), 1, t0-s, 0), manyClaims - 1, stakeSettled | stakeFewClaims},
		{"to a MAC of 16 claims", moveEv(1, mac(1), mac(2), 1, t0-s, 0), manyClaims, stakeSettled},
		{"all of it", heardAt(moveEv(1, mac(1), mac(2), 1, t0-s, t0), t0-s), 1, stakeInUse | stakeHeard | stakeSettled | stakeFewClaims},
		{"its old MAC heard 59 min ago", heardAt(moveEv(1, mac(1), mac(2), 9, t0-s, 0), t0-59*60*s), 1, stakeHeard | stakeFewClaims},
		{"its old MAC heard an hour ago", heardAt(moveEv(1, mac(1), mac(2), 9, t0-s, 0), t0-60*60*s), 1, stakeFewClaims},
		{"its old MAC never heard", heardAt(moveEv(1, mac(1), mac(2), 1, t0-s, 0), 0), 1, stakeSettled | stakeFewClaims},
	} {
		if got := moveStake(&tc.ev, tc.claims); got != tc.want {
			t.Errorf("%s: stake %04b, want %04b", tc.name, got, tc.want)
		}
	}
}

func heardAt(ev table.Event, at int64) table.Event {
	ev.OldHeard = at
	return ev
}

// TestHijackOfAHeardHostCheckedFirst: issue 64's paced flood. Every move
// of the flood is a first move to a MAC of one claim, as a hijack is;
// the queue is full of them. The hijack displaces a MAC heard for the
// address a minute ago (the flood's addresses' MACs were never heard):
// it takes the place of the oldest of the flood's checks and is the
// first a worker takes. Folded into by a further move (the spoofer
// claiming again from another MAC, which was never heard), it keeps its
// stake: the MAC it asks was heard.
func TestHijackOfAHeardHostCheckedFirst(t *testing.T) {
	q := newMoveQueue(8, func() {})
	for i := range 8 {
		ev := moveEv(100+i, mac(100+i), mac(1_000_000+i), 1, t0-int64(time.Second), 0)
		q.add(&ev)
	}
	hijack := heardAt(moveEv(1, mac(1), mac(2), 1, t0-int64(time.Hour), 0), t0-int64(time.Minute))
	q.add(&hijack)
	again := moveEv(1, mac(2), mac(3), 2, t0, 0) // heard: never (the spoofer's MAC)
	q.add(&again)
	mc, ok := q.take()
	if !ok || mc.key.Addr != hijack.IP || mc.old != string(mac(1)) {
		t.Fatalf("took %+v first, want the hijack of %s asking %s", mc, hijack.IP, mac(1))
	}
	if got := q.floods(time.Unix(0, t0))[3].Dropped; got != 1 {
		t.Errorf("%d of the flood's checks dropped, want the 1 the hijack took the place of", got)
	}
}

// flood fills q with n moves of addresses that moved before (stake: few
// claims), 10.0.0.100 on.
func flood(q *moveQueue, n int) {
	for i := range n {
		ev := moveEv(100+i, mac(100+i), mac(1_000_000+i), 5, t0-int64(time.Second), 0)
		q.add(&ev)
	}
}

// TestMoveQueueTakesTheMostAtStake: the check of the highest stake
// first, the oldest of a stake first.
func TestMoveQueueTakesTheMostAtStake(t *testing.T) {
	q := newMoveQueue(8, func() {})
	flood(q, 3)
	first := moveEv(1, mac(1), mac(2), 1, t0-int64(time.Second), 0) // settled
	used := moveEv(2, mac(3), mac(4), 1, t0-int64(time.Second), t0) // settled and in use
	q.add(&first)
	q.add(&used)
	var got []netip.Addr
	for {
		mc, ok := q.take()
		if !ok {
			break
		}
		got = append(got, mc.key.Addr)
	}
	want := []string{"10.0.0.2", "10.0.0.1", "10.0.0.100", "10.0.0.101", "10.0.0.102"}
	if len(got) != len(want) {
		t.Fatalf("took %v, want %v", got, want)
	}
	for i := range want {
		if got[i].String() != want[i] {
			t.Fatalf("took %v, want %v", got, want)
		}
	}
}

// TestMoveQueueFullGivesWay: a full queue takes a check of a higher
// stake in place of the oldest of the lowest, and drops one of no higher
// stake; each counted, the queue never over its size.
func TestMoveQueueFullGivesWay(t *testing.T) {
	var dropped int
	q := newMoveQueue(4, func() { dropped++ })
	flood(q, 6)
	if q.Len() != 4 || dropped != 2 {
		t.Fatalf("%d waiting, %d dropped; want 4 and 2", q.Len(), dropped)
	}
	hijack := moveEv(1, mac(1), mac(2), 1, t0-int64(time.Second), 0)
	q.add(&hijack)
	if q.Len() != 4 || dropped != 3 {
		t.Fatalf("%d waiting, %d dropped after the hijack; want 4 and 3", q.Len(), dropped)
	}
	mc, _ := q.take()
	if mc.key.Addr.String() != "10.0.0.1" || mc.old != string(mac(1)) {
		t.Fatalf("took %v asking %v first, want the hijack of 10.0.0.1 asking %v", mc.key.Addr, net.HardwareAddr(mc.old), mac(1))
	}
	mc, _ = q.take()
	if mc.key.Addr.String() != "10.0.0.101" {
		t.Errorf("took %v next, want 10.0.0.101: the oldest of the flood went for the hijack", mc.key.Addr)
	}
}

// TestMoveQueueFolds: an entry that moves again while its check waits
// keeps one check, which asks the MAC before the first move, at the
// stake of the last move (but in use if any was); a move back to that
// MAC ends the check.
func TestMoveQueueFolds(t *testing.T) {
	q := newMoveQueue(8, func() {})
	s := int64(time.Second)
	first := moveEv(1, mac(1), mac(2), 1, t0-s, t0)
	again := moveEv(1, mac(2), mac(3), 2, t0, 0)
	q.add(&first)
	q.add(&again)
	if q.Len() != 1 {
		t.Fatalf("%d checks wait, want 1", q.Len())
	}
	mc, _ := q.take()
	if mc.old != string(mac(1)) || mc.now != string(mac(3)) || mc.stake != stakeInUse|stakeFewClaims {
		t.Errorf("check asks %v, now %v, stake %03b; want %v, %v, %03b", net.HardwareAddr(mc.old), net.HardwareAddr(mc.now), mc.stake,
			mac(1), mac(3), stakeInUse|stakeFewClaims)
	}
	back := moveEv(1, mac(3), mac(1), 3, t0, 0)
	q.add(&first)
	q.add(&back)
	if _, ok := q.take(); ok || q.Len() != 0 {
		t.Errorf("a check waits for an entry back at its old MAC")
	}
}

// TestClaimsOfAMAC: a MAC's moves are counted over the window and the
// one before; the 16th makes it a flood's; two windows later it is
// forgotten; past claimMACs in a window, new MACs are not counted.
func TestClaimsOfAMAC(t *testing.T) {
	var c claims
	c.cur, c.prev = map[string]int{}, map[string]int{}
	w := int64(claimWindow)
	var n int
	for i := range manyClaims {
		n = c.add("flood", t0+int64(i)*w/manyClaims)
	}
	if n != manyClaims {
		t.Fatalf("%d claims counted, want %d", n, manyClaims)
	}
	if n = c.add("flood", t0+w+1); n != manyClaims+1 {
		t.Errorf("%d claims in the next window, want %d: the window before counts", n, manyClaims+1)
	}
	if n = c.add("flood", t0+4*w); n != 1 {
		t.Errorf("%d claims after two quiet windows, want 1", n)
	}
	for i := range claimMACs {
		c.add(string(mac(i)), t0+4*w)
	}
	if n = c.add("one more", t0+4*w); n != 0 {
		t.Errorf("%d claims of a MAC past the %d counted, want 0", n, claimMACs)
	}
}

// TestHijackInAFloodCheckedFirst: the engine over a real table: 2,000
// entries moved three times each (1,024 checks wait, the rest dropped),
// then one entry that never moved is hijacked. Its check is the first a
// worker takes.
func TestHijackInAFloodCheckedFirst(t *testing.T) {
	tb := table.New(time.Minute, nil)
	const n = 2000
	add := func(i int, m net.HardwareAddr) {
		tb.Apply(table.CauseNetlink, table.Update{Ifindex: 3, Family: table.FamilyInet, Addr: netip.AddrFrom4([4]byte{10, 1, byte(i >> 8), byte(i)}),
			State: table.StateStale, LLAddr: m})
	}
	for i := range n + 1 {
		add(i, mac(i))
	}
	e := New(fastConfig(ModeDryRun, StrategyProbe), tb, &fakeActor{t: tb, answerAt: -1}, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go e.moves.watch(ctx)
	<-e.moves.watched
	for round := 1; round <= 3; round++ {
		for i := range n {
			add(i, mac(round<<12|i))
		}
	}
	if e.moves.q.Len() != moveQueueCap {
		t.Fatalf("%d checks wait, want the queue full (%d)", e.moves.q.Len(), moveQueueCap)
	}
	add(n, mac(1<<20)) // the hijack
	mc, ok := e.moves.q.take()
	if !ok || mc.key.Addr != netip.AddrFrom4([4]byte{10, 1, n >> 8, n & 0xff}) || mc.old != string(mac(n)) {
		t.Fatalf("took %v asking %v first, want the hijack's check", mc.key.Addr, net.HardwareAddr(mc.old))
	}
	if d := e.Stats().MoveChecked(MoveDropped); d == 0 {
		t.Error("no check dropped: the flood did not fill the queue")
	}
}

// TestMoveFoundByAResync: a move the mirror's notifications missed (its
// socket overflowed) is found by the resync that follows and checked.
func TestMoveFoundByAResync(t *testing.T) {
	tb := table.New(time.Minute, nil)
	k := netip.MustParseAddr("10.0.0.7")
	tb.Apply(table.CauseNetlink, table.Update{Ifindex: 3, Family: table.FamilyInet, Addr: k, State: table.StateStale, LLAddr: macOld})
	e := New(fastConfig(ModeDryRun, StrategyProbe), tb, &fakeActor{t: tb, answerAt: -1}, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go e.moves.watch(ctx)
	<-e.moves.watched
	tb.BeginSync(false)
	tb.Apply(table.CauseResync, table.Update{Ifindex: 3, Family: table.FamilyInet, Addr: k, State: table.StateReachable, LLAddr: macNew})
	tb.EndSync()
	mc, ok := e.moves.q.take()
	if !ok || mc.key.Addr != k || mc.old != string(macOld) || mc.now != string(macNew) {
		t.Fatalf("took %v (%v), want the check of %v's move from %v", mc, ok, k, macOld)
	}
}

// TestMoveCheckedAfterAFurtherMove: an entry that moves on to a third
// MAC after its check was taken is still checked: whether its old MAC
// holds the address is the question, and the old MAC answering makes a
// conflict with the MAC the entry has now.
func TestMoveCheckedAfterAFurtherMove(t *testing.T) {
	tb := table.New(time.Minute, nil)
	k := table.Key{Ifindex: 3, Addr: netip.MustParseAddr("10.0.0.7")}
	up := func(m net.HardwareAddr) {
		tb.Apply(table.CauseNetlink, table.Update{Ifindex: 3, Family: table.FamilyInet, Addr: k.Addr, State: table.StateReachable, LLAddr: m})
	}
	up(macOld)
	fa := &fakeActor{t: tb, answerAt: -1, unicastOnly: true, spoofer: macOld}
	e := New(fastConfig(ModeDryRun, StrategyProbe), tb, fa, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go e.moves.watch(ctx)
	<-e.moves.watched
	up(macNew)
	mc, ok := e.moves.q.take()
	if !ok {
		t.Fatal("no check queued")
	}
	third := net.HardwareAddr{2, 0, 0, 0, 0, 3}
	up(third)
	e.moves.check(ctx, mc)
	if got := e.Stats().MoveChecked(MoveAnswered); got != 1 {
		t.Fatalf("%d checks answered, want 1: the check was given up at the further move", got)
	}
	en, _ := tb.Lookup(k)
	if en.Class() != table.ClassConflict || en.Observed().ConflictMACs != [2]string{string(macOld), string(third)} {
		t.Errorf("class %v between %q, want a conflict between %v and %v", en.Class(), en.Observed().ConflictMACs, macOld, third)
	}
}

// TestSweepNeverBlocksOnConfirmations: more suspects than the
// confirmation queue has room for. The sweep queues what fits and
// returns; before, every suspect picked in one sweep saw the room as it
// was before the sweep sent any, the sweep blocked on a full queue with
// the engine's lock held, and the workers, which take that lock when a
// confirmation ends, never drained it: the engine stopped for good (a
// flood of 200,000 spoofed replies a second wedged it in one run of
// three).
func TestSweepNeverBlocksOnConfirmations(t *testing.T) {
	tb := table.New(time.Hour, nil)
	tb.SetLinkName(3, "eth0")
	const suspects = 10
	for i := range suspects {
		k := table.Key{Ifindex: 3, Addr: netip.AddrFrom4([4]byte{10, 0, 0, byte(i + 1)})}
		tb.Apply(table.CauseNetlink, table.Update{Ifindex: 3, Family: table.FamilyInet, Addr: k.Addr, State: table.StateStale, LLAddr: macOld})
		tb.ObserveSourceMAC(k, macNew, 1, time.Now())
	}
	cfg := fastConfig(ModeDryRun, StrategyProbe)
	cfg.QueueSize = 3
	e := New(cfg, tb, &fakeActor{t: tb, answerAt: -1}, nil)
	e.confirmQ <- table.Key{} // one place taken before the sweep
	swept := make(chan struct{})
	go func() { e.sweep(); close(swept) }() // no worker drains the queue
	select {
	case <-swept:
	case <-time.After(lab.Patience(10 * time.Second)): // a blocked sweep never returns; ten seconds is no measurement
		t.Fatal("the sweep blocked on the full confirmation queue")
	}
	if n := len(e.confirmQ); n != cap(e.confirmQ) {
		t.Errorf("%d confirmations queued, want the queue full (%d)", n, cap(e.confirmQ))
	}
}

// TestMoveQueueSaysWhereItFloods: the drops are counted on the interface
// of the check dropped (the newcomer's, or the one a higher stake evicts),
// from 0 on every interface a move was queued on, and the oldest wait is
// the first of a check's moves', folded moves included; an interface
// whose checks were all taken waits 0.
func TestMoveQueueSaysWhereItFloods(t *testing.T) {
	q := newMoveQueue(2, func() {})
	quiet := moveEv(1, mac(1), mac(2), 5, t0-int64(time.Second), 0)
	quiet.Ifindex = 7
	q.add(&quiet)
	if mc, ok := q.take(); !ok || mc.key.Ifindex != 7 {
		t.Fatalf("took %+v %v", mc, ok)
	}
	flood(q, 5) // ifindex 3: two wait, three dropped
	if f := q.floods(time.Unix(0, t0).Add(40 * time.Second)); f[3].Dropped != 3 || f[3].OldestWait != 40*time.Second ||
		f[7] != (Flood{}) || len(f) != 2 {
		t.Fatalf("floods %+v, want 3 dropped and 40 s waited on 3, nothing on 7 (but its series)", f)
	}
	// A higher stake takes the place of the oldest waiting check on 3:
	// that one is dropped, on 3; the newcomer on 9 waits from its own
	// move.
	hijack := moveEv(2, mac(3), mac(4), 1, t0-int64(time.Second), t0)
	hijack.Ifindex, hijack.Time = 9, time.Unix(0, t0).Add(30*time.Second)
	q.add(&hijack)
	f := q.floods(time.Unix(0, t0).Add(40 * time.Second))
	if f[3].Dropped != 4 || f[9].Dropped != 0 || f[9].OldestWait != 10*time.Second {
		t.Fatalf("floods %+v, want 4 dropped on 3, none on 9 and 10 s waited there", f)
	}
	// A move folded into a waiting check keeps its first move's time.
	again := moveEv(101, mac(101), mac(5), 6, t0, 0)
	again.Time = time.Unix(0, t0).Add(35 * time.Second)
	q.add(&again)
	if f := q.floods(time.Unix(0, t0).Add(40 * time.Second)); f[3].OldestWait != 40*time.Second {
		t.Fatalf("the folded check waited %v, want 40 s: from its first move", f[3].OldestWait)
	}
}
