package evidence

import (
	"errors"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/mdlayher/arp"
	"github.com/mdlayher/ethernet"
	"github.com/neighwatch/neighwatch/table"
)

var (
	ownMAC = net.HardwareAddr{2, 0, 0, 0, 0, 0xee}
	macA   = net.HardwareAddr{2, 0, 0, 0, 0, 0xa}
	macB   = net.HardwareAddr{2, 0, 0, 0, 0, 0xb}
	ipA    = netip.MustParseAddr("10.0.0.1")
)

func arpFrame(t testing.TB, op arp.Operation, srcMAC net.HardwareAddr, srcIP, dstIP string, dstMAC net.HardwareAddr) []byte {
	t.Helper()
	p, err := arp.NewPacket(op, srcMAC, netip.MustParseAddr(srcIP), dstMAC, netip.MustParseAddr(dstIP))
	if err != nil {
		t.Fatal(err)
	}
	pb, err := p.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	f := ethernet.Frame{Destination: ethernet.Broadcast, Source: srcMAC, EtherType: ethernet.EtherTypeARP, Payload: pb}
	b, err := f.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestParseARP(t *testing.T) {
	zero := net.HardwareAddr{0, 0, 0, 0, 0, 0}
	ipv4Frame := func() []byte {
		f := ethernet.Frame{Destination: ethernet.Broadcast, Source: macA, EtherType: ethernet.EtherTypeIPv4, Payload: make([]byte, 46)}
		b, _ := f.MarshalBinary()
		return b
	}
	tests := []struct {
		name    string
		frame   []byte
		want    Kind
		wantErr error
	}{
		{"request", arpFrame(t, arp.OperationRequest, macA, "10.0.0.1", "10.0.0.9", zero), ARPRequest, nil},
		{"reply", arpFrame(t, arp.OperationReply, macA, "10.0.0.1", "10.0.0.9", ownMAC), ARPReply, nil},
		{"gratuitous request", arpFrame(t, arp.OperationRequest, macA, "10.0.0.1", "10.0.0.1", zero), ARPGratuitous, nil},
		{"gratuitous reply", arpFrame(t, arp.OperationReply, macA, "10.0.0.1", "10.0.0.1", ethernet.Broadcast), ARPGratuitous, nil},
		{"own frame", arpFrame(t, arp.OperationRequest, ownMAC, "10.0.0.9", "10.0.0.1", zero), 0, ErrOwnFrame},
		{"probe without sender", arpFrame(t, arp.OperationRequest, macA, "0.0.0.0", "10.0.0.1", zero), 0, ErrNoSenderIP},
		{"not arp", ipv4Frame(), 0, ErrNotARP},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, err := ParseARP(tt.frame, ownMAC)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			if err == nil && (o.Kind != tt.want || o.SenderIP != netip.MustParseAddr("10.0.0.1") || o.SenderMAC.String() != macA.String()) {
				t.Fatalf("got %+v", o)
			}
		})
	}
	if _, err := ParseARP([]byte{1, 2, 3}, ownMAC); err == nil {
		t.Fatal("3-byte frame parsed")
	}
}

func FuzzParseARP(f *testing.F) {
	f.Add(arpFrame(f, arp.OperationReply, macA, "10.0.0.1", "10.0.0.9", ownMAC))
	f.Add(arpFrame(f, arp.OperationRequest, macA, "10.0.0.1", "10.0.0.1", ownMAC))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		o, err := ParseARP(b, ownMAC)
		if err == nil && (!o.SenderIP.Is4() || len(o.SenderMAC) != 6 || o.Kind >= numKinds) {
			t.Fatalf("accepted inconsistent observation %+v", o)
		}
	})
}

// fakeConn is a net.PacketConn that returns queued frames, then EOF.
type fakeConn struct {
	net.PacketConn
	frames [][]byte
	closed bool
}

func (c *fakeConn) ReadFrom(b []byte) (int, net.Addr, error) {
	if len(c.frames) == 0 {
		return 0, nil, net.ErrClosed
	}
	n := copy(b, c.frames[0])
	c.frames = c.frames[1:]
	return n, nil, nil
}

func (c *fakeConn) Close() error { c.closed = true; return nil }

// TestWatcherFeed drives the listener loop with frames: counts by kind,
// a mismatch against the table's entry, a move (one change of MAC is not a
// conflict), malformed frames, and the listener removing itself when its
// socket fails.
func TestWatcherFeed(t *testing.T) {
	tb := table.New(time.Minute, nil)
	tb.Apply(table.CauseNetlink, table.Update{Family: table.FamilyInet, Ifindex: 4, State: table.StateStale, Addr: ipA, LLAddr: macA})
	w := New(Config{ConflictWindow: time.Hour}, tb)
	zero := net.HardwareAddr{0, 0, 0, 0, 0, 0}
	conn := &fakeConn{frames: [][]byte{
		arpFrame(t, arp.OperationRequest, macA, "10.0.0.1", "10.0.0.9", zero),
		arpFrame(t, arp.OperationRequest, ownMAC, "10.0.0.9", "10.0.0.1", zero), // ours: ignored
		{0xde, 0xad},
		arpFrame(t, arp.OperationRequest, macB, "10.0.0.1", "10.0.0.1", zero), // moved: gratuitous from B
	}}
	l := &listener{conn: conn, done: make(chan struct{}), parse: ParseARP}
	k := listenerKey{ifindex: 4}
	w.listeners[k] = l
	w.read(k, ownMAC, l)
	c := w.Counters()[4]
	if c.Packets[ARPRequest] != 1 || c.Packets[ARPGratuitous] != 1 || c.Packets[ARPReply] != 0 {
		t.Errorf("kinds: %v", c.Packets)
	}
	if c.Moves != 1 || c.Conflicts != 0 || c.Mismatches != 1 || w.Malformed() != 1 {
		t.Errorf("moves %d conflicts %d mismatches %d malformed %d; want one move, no conflict", c.Moves, c.Conflicts, c.Mismatches, w.Malformed())
	}
	if mac, _, ok := w.Seen(4, ipA); !ok || mac.String() != macB.String() {
		t.Errorf("seen = %v %v", mac, ok)
	}
	if e, _ := tb.Lookup(table.Key{Ifindex: 4, Addr: ipA}); !e.Observed().Mismatch {
		t.Error("entry not mismatched")
	}
	if !conn.closed || len(w.Listening(false)) != 0 {
		t.Error("failed listener not closed and removed")
	}
	w.ForgetLink(4)
	if _, _, ok := w.Seen(4, ipA); ok || len(w.Counters()) != 0 {
		t.Error("a deleted interface's evidence and counters were kept")
	}
}
