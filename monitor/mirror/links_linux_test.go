package mirror_test

import (
	"fmt"
	"net/netip"
	"regexp"
	"strings"
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
	// The sentinel: an entry of an included interface, notified after it
	// on the same socket.
	l.Node.MustIP(t, "neigh", "add", "10.0.1.71", "lladdr", mac.String(), "dev", lab.NodeClientIf, "nud", "permanent")
	lab.WaitFor(t, 5*time.Second, "the included interface's later entry", func() bool { return has(n0, "10.0.1.71") })
	if has(n1, "10.0.2.71") {
		t.Fatal("entry of an excluded interface mirrored")
	}
	l.Node.MustIP(t, "link", "set", "b1", "name", "n9")
	lab.WaitFor(t, 5*time.Second, "n9's entry to come back by resync", func() bool { return has(n1, "10.0.2.71") })
	if m.Counters()[mirror.ResyncLink] == 0 {
		t.Error("no link resync counted")
	}
}

// TestLinksSurviveENOBUFS: link notifications lost to a full socket are
// made good by listing the links again. The test holds the mirror's link
// updates while 150 veth pairs come and a third of them go, so the
// socket's queue (about 200 KiB by default) overflows for certain; once
// released, the mirror must know exactly the pairs left.
func TestLinksSurviveENOBUFS(t *testing.T) {
	lab.Require(t)
	t.Parallel()
	l := lab.New(t, "lnb")
	m := startMirror(t, l.Node, mirror.Config{})
	<-m.LinksReady()
	const pairs = 150
	var add, del []string
	for i := 0; i < pairs; i++ {
		add = append(add, fmt.Sprintf("link add qa%d type veth peer name qb%d", i, i))
		if i%3 == 0 {
			del = append(del, fmt.Sprintf("link del qa%d", i)) // takes its peer along
		}
	}
	release := mirror.HoldLinks(m.Mirror)
	err := l.Node.Batch(add)
	if err == nil {
		err = l.Node.Batch(del)
	}
	release()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{}
	for i := 0; i < pairs; i++ {
		if i%3 != 0 {
			want[fmt.Sprintf("qa%d", i)], want[fmt.Sprintf("qb%d", i)] = true, true
		}
	}
	missing := func() (n int, extra []string) {
		seen := map[string]bool{}
		for _, lk := range m.Links() {
			seen[lk.Name] = true
			if strings.HasPrefix(lk.Name, "q") && !want[lk.Name] {
				extra = append(extra, lk.Name)
			}
		}
		for name := range want {
			if !seen[name] {
				n++
			}
		}
		return n, extra
	}
	deadline := time.Now().Add(lab.Patience(15 * time.Second))
	for n, extra := missing(); (n > 0 || len(extra) > 0) && time.Now().Before(deadline); n, extra = missing() {
		time.Sleep(20 * time.Millisecond)
	}
	if n, extra := missing(); n > 0 || len(extra) > 0 {
		t.Fatalf("after 15 s the mirror misses %d of the namespace's %d test links and keeps %d it deleted (%v); counters %+v", n, len(want), len(extra), extra, m.Counters())
	}
	if c := m.Counters(); c[mirror.LinkENOBUFS] == 0 {
		t.Errorf("no overflow of the link socket recorded (%+v): the test did not test it", c)
	} else {
		t.Logf("link socket overflows: %d, subscriptions renewed: %d", c[mirror.LinkENOBUFS], c[mirror.LinkResubscribe])
	}
}
