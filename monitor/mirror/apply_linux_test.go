package mirror

import (
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/neighwatch/neighwatch/table"
)

// TestApplyBatchKeepsNeighboursOnly: of what a datagram carries, a
// watched interface's IPv4 and IPv6 neighbours enter the table with the
// datagram's cause; a proxy entry (NTF_PROXY), an entry of an unwatched
// interface and another family's do not. (This machine's kernel sends no
// proxy entries to a subscriber or a plain dump, so only a datagram made
// here shows the filter.)
func TestApplyBatchKeepsNeighboursOnly(t *testing.T) {
	tb := table.New(time.Minute, nil)
	m := New(Config{}, tb)
	m.links[3] = &Link{Name: "eth0", Watched: true}
	m.links[4] = &Link{Name: "lxc0", Watched: false}
	mac := net.HardwareAddr{2, 0, 0, 0, 0, 1}
	u := func(ifindex int32, fam table.Family, ip string, flags uint8) table.Update {
		return table.Update{Ifindex: ifindex, Family: fam, Addr: netip.MustParseAddr(ip), State: table.StatePermanent, LLAddr: mac, Flags: flags}
	}
	sub := tb.Events().Subscribe(16)
	defer sub.Close()
	m.applyBatch(table.CauseResync, []table.Update{
		u(3, table.FamilyInet, "10.0.0.1", 0),
		u(3, table.FamilyInet6, "fd00::1", table.FlagRouter),
		u(3, table.FamilyInet, "10.0.0.2", table.FlagProxy),
		u(4, table.FamilyInet, "10.0.0.3", 0),
		u(3, table.Family(7), "10.0.0.4", 0),
	})
	for _, ip := range []string{"10.0.0.1", "fd00::1"} {
		if _, ok := tb.Lookup(table.Key{Ifindex: 3, Addr: netip.MustParseAddr(ip)}); !ok {
			t.Errorf("%s: a watched interface's neighbour not in the table", ip)
		}
	}
	for _, k := range []table.Key{{Ifindex: 3, Addr: netip.MustParseAddr("10.0.0.2")}, {Ifindex: 4, Addr: netip.MustParseAddr("10.0.0.3")},
		{Ifindex: 3, Addr: netip.MustParseAddr("10.0.0.4")}} {
		if _, ok := tb.Lookup(k); ok {
			t.Errorf("%v on %d: in the table (a proxy, an unwatched interface, another family)", k.Addr, k.Ifindex)
		}
	}
	if tb.Len() != 2 {
		t.Errorf("%d entries, want 2", tb.Len())
	}
	for range 2 {
		select {
		case ev := <-sub.C():
			if ev.Cause != table.CauseResync {
				t.Errorf("%v: cause %s, want the datagram's (resync)", ev.IP, ev.Cause)
			}
		default:
			t.Fatal("fewer events than entries applied")
		}
	}
	if c := m.c.snapshot(); c[Ignored] != 3 || c[Messages] != 2 {
		t.Errorf("counted %d ignored and %d applied, want 3 and 2", c[Ignored], c[Messages])
	}
}
