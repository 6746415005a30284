package mirror_test

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/neighwatch/neighwatch/internal/dev/lab"
	"github.com/neighwatch/neighwatch/internal/kver"
	"github.com/neighwatch/neighwatch/monitor/mirror"
	"github.com/neighwatch/neighwatch/table"
)

// The tests in this file guard rules of the ledger (docs/rules.md): the
// table follows the kernel field by field, whichever way an entry
// changes.

// nextEvent returns the next event of the subscription about ip.
func nextEvent(t *testing.T, sub *table.Subscription, ip netip.Addr, what string) table.Event {
	t.Helper()
	timeout := time.After(lab.Patience(10 * time.Second))
	for {
		select {
		case ev := <-sub.C():
			if ev.IP == ip {
				return ev
			}
		case <-timeout:
			t.Fatalf("no event for %v: %s", ip, what)
		}
	}
}

// TestNetlinkChangesMatchTheKernel: each change the kernel notifies (a
// new entry, a new MAC and state, a flag, managed, a delete) reaches the
// table as the kernel has it, field by field, with cause netlink.
func TestNetlinkChangesMatchTheKernel(t *testing.T) {
	lab.Require(t)
	t.Parallel()
	ns, peer := lab.VethPair(t, "mnl")
	m := startMirror(t, ns, mirror.Config{})
	sub := m.table.Events().Subscribe(256)
	defer sub.Close()
	a, b := lab.HostMAC(31, 1), lab.HostMAC(31, 2)
	for _, ip := range []netip.Addr{netip.MustParseAddr("10.31.0.7"), netip.MustParseAddr("fd00:31::7")} {
		steps := [][]string{
			{"neigh", "add", ip.String(), "lladdr", a.String(), "dev", "v0", "nud", "stale"},
			{"neigh", "replace", ip.String(), "lladdr", b.String(), "dev", "v0", "nud", "reachable"},
			{"neigh", "replace", ip.String(), "lladdr", b.String(), "dev", "v0", "nud", "stale", "router"},
			{"neigh", "replace", ip.String(), "lladdr", a.String(), "dev", "v0", "nud", "permanent"},
		}
		if ok, _, _ := kver.AtLeast(5, 16); ok {
			// Managed, the kernel re-validates the entry at once: the
			// address answers from v1, so it ends REACHABLE there (what it
			// passes through on the way, netlink does not say).
			mac, err := peer.MAC("v1")
			if err != nil {
				t.Fatal(err)
			}
			plen := map[bool]string{true: "/32", false: "/128"}[ip.Is4()]
			peer.MustIP(t, "addr", "add", ip.String()+plen, "dev", "v1", "nodad")
			steps = append(steps, []string{"neigh", "replace", ip.String(), "lladdr", mac.String(), "dev", "v0", "managed"})
		}
		steps = append(steps, []string{"neigh", "del", ip.String(), "dev", "v0"})
		for _, step := range steps {
			ns.MustIP(t, step...)
			what := fmt.Sprint(step)
			if ev := nextEvent(t, sub, ip, what); ev.Cause != table.CauseNetlink {
				t.Errorf("%s: event cause %s, want netlink", what, ev.Cause)
			}
			lab.RequireTableMatches(t, ns, m.table, "v0", ip, what)
		}
	}
}

// TestResyncRecordsWhatItFinds: a resync's dump brings back every field
// of an entry the table got wrong, drops an entry the kernel does not
// have, and records both with cause resync.
func TestResyncRecordsWhatItFinds(t *testing.T) {
	lab.Require(t)
	t.Parallel()
	ns, _ := lab.VethPair(t, "mrs")
	kept, gone := netip.MustParseAddr("10.32.0.7"), netip.MustParseAddr("10.32.0.8")
	a, b := lab.HostMAC(32, 1), lab.HostMAC(32, 2)
	ns.MustIP(t, "neigh", "add", kept.String(), "lladdr", a.String(), "dev", "v0", "nud", "permanent")
	m := startMirror(t, ns, mirror.Config{})
	lab.RequireTableMatches(t, ns, m.table, "v0", kept, "loaded")
	idx, _ := ns.Ifindex("v0")
	// What the notifications missed: the table holds a state, a MAC and
	// an entry the kernel does not.
	m.table.Apply(table.CauseNetlink,
		table.Update{Ifindex: int32(idx), Family: table.FamilyInet, Addr: kept, State: table.StateStale, LLAddr: b, Flags: table.FlagRouter},
		table.Update{Ifindex: int32(idx), Family: table.FamilyInet, Addr: gone, State: table.StateStale, LLAddr: b})
	if ns.TableDiffers(m.table, "v0", kept) == nil || ns.TableDiffers(m.table, "v0", gone) == nil {
		t.Fatal("the table still agrees with the kernel")
	}
	sub := m.table.Events().Subscribe(256)
	defer sub.Close()
	m.Resync()
	for _, ip := range []netip.Addr{kept, gone} {
		ev := nextEvent(t, sub, ip, "the resync")
		if ev.Cause != table.CauseResync {
			t.Errorf("%v: the resync's event has cause %s, want resync", ip, ev.Cause)
		}
		lab.RequireTableMatches(t, ns, m.table, "v0", ip, "after the resync")
	}
}
