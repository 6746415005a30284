package evidence

import (
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/neighwatch/neighwatch/table"
)

// TestMoveOrConflict: one change of MAC is a move; two MACs answering in
// turn within the window are a conflict, and keep being one while both
// answer; after the window, a change is a move again.
func TestMoveOrConflict(t *testing.T) {
	const window = int64(5 * time.Second)
	s := int64(time.Second)
	type step struct {
		mac  string
		at   int64
		want Verdict
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"first sighting", []step{{"A", 0, Same}}},
		{"same MAC again", []step{{"A", 0, Same}, {"A", 1 * s, Same}, {"A", 60 * s, Same}}},
		{"moved once (gratuitous ARP from the new MAC)", []step{{"A", 0, Same}, {"B", 1 * s, Move}, {"B", 2 * s, Same}, {"B", 9 * s, Same}}},
		{"moved back within the window: flip flop", []step{{"A", 0, Same}, {"B", 1 * s, Move}, {"A", 2 * s, Conflict}}},
		{"both keep answering", []step{{"A", 0, Same}, {"B", 1 * s, Move}, {"A", 2 * s, Conflict}, {"B", 3 * s, Conflict}, {"A", 4 * s, Conflict}}},
		{"moved back after the window: two moves", []step{{"A", 0, Same}, {"B", 1 * s, Move}, {"A", 7 * s, Move}}},
		{"moved back exactly the window after: two moves", []step{{"A", 0, Same}, {"B", 1 * s, Move}, {"A", 6 * s, Move}}},
		{"moved twice to new MACs", []step{{"A", 0, Same}, {"B", 1 * s, Move}, {"C", 2 * s, Move}}},
		{"moved, then a third MAC, then back to the second", []step{{"A", 0, Same}, {"B", 1 * s, Move}, {"C", 2 * s, Move}, {"B", 3 * s, Conflict}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var h host
			for i, st := range tt.steps {
				if got := h.observe(st.mac, st.at, window); got != st.want {
					t.Fatalf("step %d (%s at %ds): %v, want %v", i, st.mac, st.at/s, got, st.want)
				}
			}
		})
	}
}

// TestHostMapBounded: the evidence map keeps at most MaxHosts hosts,
// evicting the least recently seen; hosts not seen for HostTTL are
// forgotten; after a flood of senders fills it, a real conflict is still
// detected.
func TestHostMapBounded(t *testing.T) {
	tb := table.New(time.Minute, nil)
	w := New(Config{MaxHosts: 3, HostTTL: time.Hour, ConflictWindow: 5 * time.Second}, tb)
	t0 := time.Unix(1_700_000_000, 0)
	obs := func(ip string, mac byte, at time.Duration) {
		w.Observe(1, Observation{Kind: ARPRequest, SenderIP: netip.MustParseAddr(ip), SenderMAC: net.HardwareAddr{2, 0, 0, 0, 0, mac}}, t0.Add(at))
	}
	obs("10.0.0.1", 1, 0)
	obs("10.0.0.2", 2, time.Second)
	obs("10.0.0.3", 3, 2*time.Second)
	obs("10.0.0.1", 1, 3*time.Second) // seen again: now the newest
	obs("10.0.0.4", 4, 4*time.Second) // evicts .2, the least recently seen
	if _, _, ok := w.Seen(1, netip.MustParseAddr("10.0.0.2")); ok {
		t.Error("the least recently seen host was kept")
	}
	if _, _, ok := w.Seen(1, netip.MustParseAddr("10.0.0.1")); !ok {
		t.Error("a host seen again was evicted")
	}
	if hs := w.HostStats(); hs.Hosts != 3 || hs.EvictedFull != 1 {
		t.Errorf("host stats %+v, want 3 hosts, 1 evicted", hs)
	}
	// A flood of senders, then a real conflict: A, B, A within the window.
	for i := range 1000 {
		w.Observe(1, Observation{Kind: ARPRequest, SenderIP: netip.AddrFrom4([4]byte{10, 1, byte(i >> 8), byte(i)}), SenderMAC: net.HardwareAddr{2, 1, 0, 0, byte(i >> 8), byte(i)}}, t0.Add(5*time.Second))
	}
	obs("10.0.0.9", 0xa, 6*time.Second)
	obs("10.0.0.9", 0xb, 7*time.Second)
	obs("10.0.0.9", 0xa, 8*time.Second)
	if c := w.Counters()[1]; c.Conflicts != 1 {
		t.Errorf("conflicts %d after the flood, want 1", c.Conflicts)
	}
	if hs := w.HostStats(); hs.Hosts != 3 || hs.EvictedFull != 1+1000+1 {
		t.Errorf("host stats %+v, want 3 hosts, %d evicted", hs, 1002)
	}
	w.expire(t0.Add(8*time.Second + time.Hour))
	if hs := w.HostStats(); hs.Hosts != 0 || hs.EvictedAged != 3 {
		t.Errorf("after an hour: %+v, want none left, 3 aged out", hs)
	}
}

// TestMismatchesCountEntriesBecomingMismatched is the documented meaning
// of neighwatch_arp_mismatches_total: an entry becoming mismatched counts
// once, however many packets keep showing it. Its own MAC heard after it
// explains the other MAC (the host has both), which then counts no more;
// a third MAC counts again.
func TestMismatchesCountEntriesBecomingMismatched(t *testing.T) {
	tb := table.New(time.Minute, nil)
	ip := netip.MustParseAddr("10.0.0.1")
	own, other, third := net.HardwareAddr{2, 0, 0, 0, 0, 1}, net.HardwareAddr{2, 0, 0, 0, 0, 2}, net.HardwareAddr{2, 0, 0, 0, 0, 3}
	t0 := time.Now() // evidence counts only after the entry got its MAC
	tb.Apply(table.CauseNetlink, table.Update{Ifindex: 1, Family: table.FamilyInet, Addr: ip, LLAddr: own, State: table.StateStale})
	w := New(Config{ConflictWindow: time.Second}, tb)
	at := t0
	obs := func(mac net.HardwareAddr) uint64 {
		at = at.Add(10 * time.Second) // past the conflict window each time
		w.Observe(1, Observation{Kind: ARPGratuitous, SenderIP: ip, SenderMAC: mac}, at)
		return w.Counters()[1].Mismatches
	}
	for i, step := range []struct {
		mac  net.HardwareAddr
		want uint64
	}{{other, 1}, {other, 1}, {own, 1}, {other, 1}, {third, 2}} {
		if got := obs(step.mac); got != step.want {
			t.Fatalf("after packet %d from %s: mismatches %d, want %d", i+1, step.mac, got, step.want)
		}
	}
}

// TestConflictEventSaysTheEntry: the event of a conflict carries the
// entry's state and its class as the conflict leaves it (conflict), not
// the zero values a reader takes for "none" and "ok".
func TestConflictEventSaysTheEntry(t *testing.T) {
	tb := table.New(time.Minute, nil)
	ip := netip.MustParseAddr("10.0.0.9")
	a, b := net.HardwareAddr{2, 0, 0, 0, 0, 0xa}, net.HardwareAddr{2, 0, 0, 0, 0, 0xb}
	tb.Apply(table.CauseNetlink, table.Update{Ifindex: 1, Family: table.FamilyInet, Addr: ip, State: table.StateStale, LLAddr: a})
	w := New(Config{ConflictWindow: 5 * time.Second}, tb)
	sub := tb.Events().SubscribeFunc(16, func(ev table.Event) bool { return ev.Kind == table.KindConflict })
	defer sub.Close()
	t0 := time.Now()
	for i, mac := range []net.HardwareAddr{a, b, a} {
		w.Observe(1, Observation{Kind: ARPReply, SenderIP: ip, SenderMAC: mac}, t0.Add(time.Duration(i)*time.Second))
	}
	select {
	case ev := <-sub.C():
		if ev.From != table.StateStale || ev.To != table.StateStale || ev.Class != table.ClassConflict || ev.Created || ev.Deleted {
			t.Errorf("conflict event: from %v to %v class %v created %v deleted %v; want stale, stale, conflict", ev.From, ev.To, ev.Class, ev.Created, ev.Deleted)
		}
		if ev.OldLLAddr.String() != b.String() || ev.LLAddr.String() != a.String() {
			t.Errorf("conflict event between %s and %s, want %s and %s", ev.OldLLAddr, ev.LLAddr, b, a)
		}
	default:
		t.Fatal("no conflict event")
	}
}

// TestAnnouncementsStakeNoMove: a move away from a MAC stakes its check
// on that MAC having spoken for the address (remediate ranks the check
// higher): a reply, a request, a solicitation or a solicited NA from the
// entry's MAC counts; an announcement (a gratuitous ARP, an unsolicited
// NA) does not, for a flood of moves is made of announcements and would
// make every address it moves heard before it moves it again.
func TestAnnouncementsStakeNoMove(t *testing.T) {
	a, b := net.HardwareAddr{2, 0, 0, 0, 0, 0xa}, net.HardwareAddr{2, 0, 0, 0, 0, 0xb}
	for _, tc := range []struct {
		kind   Kind
		ip     string
		staked bool
	}{
		{ARPRequest, "10.0.0.1", true},
		{ARPReply, "10.0.0.1", true},
		{ARPGratuitous, "10.0.0.1", false},
		{NDPSolicitation, "fd00::1", true},
		{NDPAdvertisement, "fd00::1", true},
		{NDPUnsolicitedAdv, "fd00::1", false},
	} {
		t.Run(tc.kind.String(), func(t *testing.T) {
			tb := table.New(time.Minute, nil)
			ip := netip.MustParseAddr(tc.ip)
			fam := table.FamilyInet
			if ip.Is6() {
				fam = table.FamilyInet6
			}
			tb.Apply(table.CauseNetlink, table.Update{Ifindex: 1, Family: fam, Addr: ip, State: table.StateStale, LLAddr: a})
			w := New(Config{ConflictWindow: time.Second}, tb)
			sub := tb.Events().SubscribeFunc(16, func(ev table.Event) bool { return len(ev.OldLLAddr) > 0 && ev.OldLLAddr.String() != ev.LLAddr.String() })
			defer sub.Close()
			t0 := time.Now()
			w.Observe(1, Observation{Kind: tc.kind, SenderIP: ip, SenderMAC: a}, t0)
			if e, ok := tb.Lookup(table.Key{Ifindex: 1, Addr: ip}); !ok || e.Observed().OwnAt != t0.UnixNano() {
				t.Fatalf("the entry's own MAC in a %s was not heard at all", tc.kind)
			}
			tb.Apply(table.CauseNetlink, table.Update{Ifindex: 1, Family: fam, Addr: ip, State: table.StateStale, LLAddr: b})
			select {
			case ev := <-sub.C():
				if got := ev.OldHeard != 0; got != tc.staked {
					t.Errorf("a move after a %s from the entry's MAC: OldHeard %d, want staked %v", tc.kind, ev.OldHeard, tc.staked)
				}
			default:
				t.Fatal("no move event")
			}
		})
	}
}
