package monitor_test

import (
	"fmt"
	"net/netip"
	"regexp"
	"runtime"
	"testing"
	"time"

	"github.com/neighwatch/neighwatch/internal/lab"
	"github.com/neighwatch/neighwatch/monitor"
)

// TestInterfaceFiltersAndRenames: only included interfaces are mirrored;
// renaming an interface out of scope drops its entries, renaming it back
// brings them back through a resync.
func TestInterfaceFiltersAndRenames(t *testing.T) {
	lab.Require(t)
	t.Parallel()
	l := lab.New(t, "flt")
	mac := lab.HostMAC(3, 3)
	l.Node.MustIP(t, "neigh", "add", "10.0.1.70", "lladdr", mac.String(), "dev", lab.NodeClientIf, "nud", "permanent")
	l.Node.MustIP(t, "neigh", "add", "10.0.2.70", "lladdr", mac.String(), "dev", lab.NodeBackendIf, "nud", "permanent")
	m := startMonitor(t, l.Node, monitor.Config{Include: []*regexp.Regexp{regexp.MustCompile("^n[0-9]$")}})
	n0 := ifindex(t, l.Node, lab.NodeClientIf)
	n1 := ifindex(t, l.Node, lab.NodeBackendIf)
	has := func(idx int32, ip string) bool {
		_, ok := m.Table().Lookup(monitor.Key{Ifindex: idx, Addr: netip.MustParseAddr(ip)})
		return ok
	}
	if !has(n0, "10.0.1.70") || !has(n1, "10.0.2.70") {
		t.Fatal("entries of included interfaces missing")
	}
	if _, ok := m.Table().Lookup(monitor.Key{Ifindex: 1, Addr: netip.MustParseAddr("127.0.0.1")}); ok {
		t.Fatal("loopback is not included")
	}
	for _, c := range [][]string{{"link", "set", lab.NodeBackendIf, "down"}, {"link", "set", lab.NodeBackendIf, "name", "b1"}} {
		l.Node.MustIP(t, c...)
	}
	waitFor(t, 5*time.Second, "b1's entries to leave", func() bool { return !has(n1, "10.0.2.70") })
	// The kernel flushed the entries when the link went down: add one back
	// while out of scope, then rename into scope.
	l.Node.MustIP(t, "neigh", "add", "10.0.2.71", "lladdr", mac.String(), "dev", "b1", "nud", "permanent")
	time.Sleep(200 * time.Millisecond)
	if has(n1, "10.0.2.71") {
		t.Fatal("entry of an excluded interface mirrored")
	}
	l.Node.MustIP(t, "link", "set", "b1", "name", "n9")
	waitFor(t, 5*time.Second, "n9's entry to come back by resync", func() bool { return has(n1, "10.0.2.71") })
	if m.Counters.ResyncLink.Load() == 0 {
		t.Error("no link resync counted")
	}
}

// TestARPListenersFollowLinks creates and deletes interfaces while the
// monitor runs: listeners start and stop with them, and nothing leaks.
func TestARPListenersFollowLinks(t *testing.T) {
	lab.Require(t)
	t.Parallel()
	ns := lab.NewNS(t, "arl")
	m := startMonitor(t, ns, monitor.Config{ARP: true})
	base := len(m.ARP.Listening(false))
	base6 := len(m.ARP.Listening(true))
	g0 := runtime.NumGoroutine()
	for round := 0; round < 5; round++ {
		for i := 0; i < 4; i++ {
			ns.MustIP(t, "link", "add", fmt.Sprintf("a%d", i), "type", "veth", "peer", "name", fmt.Sprintf("z%d", i))
		}
		waitFor(t, 5*time.Second, "listeners on 8 new interfaces", func() bool {
			return len(m.ARP.Listening(false)) == base+8 && len(m.ARP.Listening(true)) == base6+8
		})
		for i := 0; i < 4; i++ {
			ns.MustIP(t, "link", "del", fmt.Sprintf("a%d", i)) // takes its peer with it
		}
		waitFor(t, 5*time.Second, "listeners to stop", func() bool {
			return len(m.ARP.Listening(false)) == base && len(m.ARP.Listening(true)) == base6
		})
	}
	if m.ARP.Disabled() != nil {
		t.Fatalf("listeners disabled: %v", m.ARP.Disabled())
	}
	waitFor(t, 5*time.Second, "goroutines to settle", func() bool { return runtime.NumGoroutine() <= g0+8 })
}
