package mirror_test

import (
	"net/netip"
	"regexp"
	"testing"
	"time"

	"github.com/neighwatch/neighwatch/internal/dev/lab"
	"github.com/neighwatch/neighwatch/monitor/mirror"
	"github.com/neighwatch/neighwatch/table"
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
	m := startMirror(t, l.Node, mirror.Config{Interfaces: table.Selector{Include: []*regexp.Regexp{regexp.MustCompile("^n[0-9]$")}}})
	n0 := ifindex(t, l.Node, lab.NodeClientIf)
	n1 := ifindex(t, l.Node, lab.NodeBackendIf)
	has := func(idx int32, ip string) bool {
		_, ok := m.table.Lookup(table.Key{Ifindex: idx, Addr: netip.MustParseAddr(ip)})
		return ok
	}
	if !has(n0, "10.0.1.70") || !has(n1, "10.0.2.70") {
		t.Fatal("entries of included interfaces missing")
	}
	if _, ok := m.table.Lookup(table.Key{Ifindex: 1, Addr: netip.MustParseAddr("127.0.0.1")}); ok {
		t.Fatal("loopback is not included")
	}
	for _, c := range [][]string{{"link", "set", lab.NodeBackendIf, "down"}, {"link", "set", lab.NodeBackendIf, "name", "b1"}} {
		l.Node.MustIP(t, c...)
	}
	lab.WaitFor(t, 5*time.Second, "b1's entries to leave", func() bool { return !has(n1, "10.0.2.70") })
	// The kernel flushed the entries when the link went down: add one back
	// while out of scope, then rename into scope.
	l.Node.MustIP(t, "neigh", "add", "10.0.2.71", "lladdr", mac.String(), "dev", "b1", "nud", "permanent")
	time.Sleep(200 * time.Millisecond)
	if has(n1, "10.0.2.71") {
		t.Fatal("entry of an excluded interface mirrored")
	}
	l.Node.MustIP(t, "link", "set", "b1", "name", "n9")
	lab.WaitFor(t, 5*time.Second, "n9's entry to come back by resync", func() bool { return has(n1, "10.0.2.71") })
	if m.Counters().ResyncLink == 0 {
		t.Error("no link resync counted")
	}
}
