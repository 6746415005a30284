package addrs

import (
	"encoding/binary"
	"net/netip"
	"testing"

	"github.com/neighwatch/neighwatch/internal/dev/lab"
	"github.com/neighwatch/neighwatch/monitor/internal/rtnl"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

func ifaddrmsg(family, bits, scope uint8, ifindex uint32) []byte {
	b := []byte{family, bits, 0, scope, 0, 0, 0, 0}
	binary.NativeEndian.PutUint32(b[4:], ifindex)
	return b
}

func TestDecode(t *testing.T) {
	// A point-to-point link: IFA_ADDRESS is the peer, IFA_LOCAL ours.
	msg := ifaddrmsg(unix.AF_INET, 32, unix.RT_SCOPE_UNIVERSE, 7)
	msg = rtnl.AppendAttr(msg, unix.IFA_ADDRESS, []byte{10, 9, 9, 9})
	msg = rtnl.AppendAttr(msg, unix.IFA_LOCAL, []byte{10, 0, 0, 1})
	a, err := Decode(msg)
	if err != nil || a != (Addr{Ifindex: 7, Scope: unix.RT_SCOPE_UNIVERSE, Prefix: netip.MustParsePrefix("10.0.0.1/32")}) {
		t.Errorf("point-to-point: %+v, %v", a, err)
	}
	msg = ifaddrmsg(unix.AF_INET6, 64, unix.RT_SCOPE_LINK, 2)
	msg = rtnl.AppendAttr(msg, unix.IFA_ADDRESS, netip.MustParseAddr("fe80::2").AsSlice())
	if a, err := Decode(msg); err != nil || a.Prefix != netip.MustParsePrefix("fe80::2/64") || a.Scope != unix.RT_SCOPE_LINK {
		t.Errorf("link-local: %+v, %v", a, err)
	}
	if _, err := Decode([]byte{2, 24}); err == nil {
		t.Error("a 2-byte message decoded")
	}
}

// TestReadInANamespace: the dump of a namespace the test makes gives each
// interface's global subnets, not its link-local nor loopback addresses.
func TestReadInANamespace(t *testing.T) {
	lab.Require(t)
	ns := lab.NewNS(t, "adr")
	ns.MustIP(t, "link", "add", "seg0", "type", "veth", "peer", "name", "seg0p")
	ns.MustIP(t, "link", "add", "seg1", "type", "veth", "peer", "name", "seg1p")
	ns.MustIP(t, "addr", "add", "10.71.1.5/24", "dev", "seg0")
	ns.MustIP(t, "addr", "add", "2001:db8:71::5/64", "dev", "seg0", "nodad")
	ns.MustIP(t, "addr", "add", "10.71.2.5/24", "dev", "seg1")
	ns.MustIP(t, "link", "set", "seg0", "up")
	ns.MustIP(t, "link", "set", "seg1", "up")
	h, err := ns.Handle()
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	ps, err := NewReader(h).Read()
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string][]netip.Prefix{}
	for _, name := range []string{"seg0", "seg1", "lo"} {
		idx, err := ns.Ifindex(name)
		if err != nil {
			t.Fatal(err)
		}
		byName[name] = ps[int32(idx)]
	}
	if got := byName["seg0"]; len(got) != 2 || Segment(got, netip.MustParseAddr("fe80::1")) != "10.71.1.0/24" {
		t.Errorf("seg0: %v, want 10.71.1.0/24 and 2001:db8:71::/64", got)
	}
	if got := byName["seg1"]; len(got) != 1 || got[0] != netip.MustParsePrefix("10.71.2.0/24") {
		t.Errorf("seg1: %v, want [10.71.2.0/24]", got)
	}
	if got := byName["lo"]; len(got) != 0 {
		t.Errorf("lo: %v, want none (host scope)", got)
	}
}

// BenchmarkRead is what a scrape that names a stuck entry adds: one dump
// of this namespace's addresses.
func BenchmarkRead(b *testing.B) {
	r := NewReader(netns.None())
	for b.Loop() {
		ps, err := r.Read()
		if err != nil || len(ps) == 0 {
			b.Fatalf("%d interfaces, %v", len(ps), err)
		}
	}
}
