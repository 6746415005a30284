package mirror_test

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"runtime"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/neighwatch/neighwatch/internal/dev/lab"
	"github.com/neighwatch/neighwatch/monitor/mirror"
	"github.com/neighwatch/neighwatch/table"
)

// running is a mirror running in a test namespace, with its table.
type running struct {
	*mirror.Mirror
	table *table.Table
}

// startMirror runs a mirror in ns until the test ends.
func startMirror(t *testing.T, ns lab.NS, cfg mirror.Config) running {
	t.Helper()
	h, err := ns.Handle()
	if err != nil {
		t.Fatalf("open namespace %s: %v", ns.Name, err)
	}
	cfg.NetNS = &h
	tb := table.New(time.Minute, nil)
	m := mirror.New(cfg, tb)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- m.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-errc:
			if err != nil {
				t.Errorf("mirror.Run: %v", err)
			}
		case <-time.After(lab.Patience(10 * time.Second)):
			t.Error("mirror did not stop within 10s of cancel")
		}
		h.Close()
	})
	select {
	case <-m.Ready():
	case err := <-errc:
		t.Fatalf("mirror stopped before ready: %v", err)
	case <-time.After(lab.Patience(20 * time.Second)):
		t.Fatal("mirror not ready after 20s")
	}
	return running{m, tb}
}

// rows renders both sides the same way: dev ip lladdr STATE.
func tableRows(m running) []string {
	entries, names := m.table.Snapshot()
	out := make([]string, 0, len(entries))
	for _, e := range entries {
		out = append(out, fmt.Sprintf("%s %s %s %s", names[e.Ifindex], e.Addr, e.HardwareAddr(), strings.ToUpper(e.State.String())))
	}
	sort.Strings(out)
	return out
}

func kernelRows(t *testing.T, ns lab.NS) []string {
	t.Helper()
	all, err := ns.Neighbours()
	if err != nil {
		t.Fatal(err)
	}
	out := make([]string, 0, len(all))
	for _, e := range all {
		state := "NONE"
		if len(e.State) > 0 {
			state = e.State[0]
		}
		mac := ""
		if e.LLAddr != "" {
			hw, err := net.ParseMAC(e.LLAddr)
			if err != nil {
				t.Fatalf("ip printed lladdr %q: %v", e.LLAddr, err)
			}
			mac = hw.String()
		}
		out = append(out, fmt.Sprintf("%s %s %s %s", e.Dev, netip.MustParseAddr(e.Dst), mac, state))
	}
	sort.Strings(out)
	return out
}

// requireMirror waits until the table equals the kernel's, as ip(8)
// prints it. Kernel timers keep moving entries, so it compares repeatedly
// until both sides agree.
//
// The kernel creates NOARP entries for IPv6 multicast groups without any
// netlink notification (neigh_create does not notify), so only a dump can
// see them. Unless full is set, rows for multicast addresses are left out
// of the comparison; with full set, the caller resyncs first, and each
// dump that ends with the table still behind asks for another (the last
// may have run before the kernel made them).
//
// It fails once within (lab.Patience) passes without the mirror making
// progress (a message applied, a dump ended), or ten times within in
// all: a busy machine slows the mirror down, and a wait on its progress
// rather than on the clock tells that from a mirror that no longer
// converges.
func requireMirror(t *testing.T, m running, ns lab.NS, within time.Duration, full bool) {
	t.Helper()
	wait := lab.Patience(within)
	start := time.Now()
	deadline := start.Add(wait)
	last := m.Counters()
	var got, want []string
	for {
		want = filterRows(kernelRows(t, ns), full)
		got = filterRows(tableRows(m), full)
		want = silentDelay(want, got)
		if strings.Join(got, "\n") == strings.Join(want, "\n") {
			return
		}
		now := time.Now()
		if c := m.Counters(); c != last {
			if full && c[mirror.Dumps] != last[mirror.Dumps] {
				m.Resync()
			}
			last, deadline = c, now.Add(wait)
		}
		if now.After(deadline) || now.Sub(start) > 10*wait {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("table differs from kernel after %v (the last %v without progress):\n%s", time.Since(start).Round(time.Millisecond), wait, diff(want, got))
}

// silentDelay accepts a table row in STALE or REACHABLE for a kernel row
// in DELAY: the kernel moves entries into DELAY without a netlink message
// (STALE->DELAY on transmit, REACHABLE->DELAY in its timer), so a mirror
// fed by netlink alone cannot see it until the entry leaves DELAY; the
// agent's tracer reports these transitions.
func silentDelay(want, got []string) []string {
	have := make(map[string]string, len(got))
	for _, r := range got {
		if i := strings.LastIndexByte(r, ' '); i > 0 {
			have[r[:i]] = r[i+1:]
		}
	}
	out := make([]string, len(want))
	for i, r := range want {
		out[i] = r
		if j := strings.LastIndexByte(r, ' '); j > 0 && r[j+1:] == "DELAY" {
			if st := have[r[:j]]; st == "STALE" || st == "REACHABLE" {
				out[i] = r[:j] + " " + st
			}
		}
	}
	sort.Strings(out)
	return out
}

func filterRows(rows []string, full bool) []string {
	if full {
		return rows
	}
	out := rows[:0:0]
	for _, r := range rows {
		f := strings.Fields(r)
		if a, err := netip.ParseAddr(f[1]); err == nil && a.IsMulticast() {
			continue
		}
		out = append(out, r)
	}
	return out
}

func diff(want, got []string) string {
	w := map[string]bool{}
	for _, s := range want {
		w[s] = true
	}
	g := map[string]bool{}
	for _, s := range got {
		g[s] = true
	}
	var b strings.Builder
	fmt.Fprintf(&b, "kernel has %d entries, table %d\n", len(want), len(got))
	n := 0
	for _, s := range want {
		if !g[s] && n < 20 {
			fmt.Fprintf(&b, "  missing: %s\n", s)
			n++
		}
	}
	for _, s := range got {
		if !w[s] && n < 40 {
			fmt.Fprintf(&b, "  extra:   %s\n", s)
			n++
		}
	}
	return b.String()
}

func TestMirrorStartupTrafficAndLinkDelete(t *testing.T) {
	lab.Require(t)
	t.Parallel()
	l := lab.New(t, "mir")
	mac := lab.HostMAC(7, 1)
	// Entries of every kind before the agent starts.
	l.Node.MustIP(t, "neigh", "add", "10.0.1.50", "lladdr", mac.String(), "dev", lab.NodeClientIf, "nud", "permanent")
	l.Node.MustIP(t, "neigh", "add", "10.0.1.51", "lladdr", mac.String(), "dev", lab.NodeClientIf, "nud", "stale")
	l.Node.MustIP(t, "neigh", "add", "10.0.1.52", "lladdr", mac.String(), "dev", lab.NodeClientIf, "nud", "noarp")
	l.Node.MustIP(t, "neigh", "add", "10.0.2.53", "lladdr", mac.String(), "dev", lab.NodeBackendIf, "nud", "reachable")
	l.Node.MustIP(t, "neigh", "add", "fd00:1::50", "lladdr", mac.String(), "dev", lab.NodeClientIf, "nud", "stale", "router")
	l.Node.MustIP(t, "neigh", "add", "10.0.1.54", "lladdr", mac.String(), "dev", lab.NodeClientIf, "extern_learn")

	m := startMirror(t, l.Node, mirror.Config{})
	requireMirror(t, m, l.Node, 5*time.Second, false)

	e, ok := m.table.Lookup(table.Key{Ifindex: ifindex(t, l.Node, lab.NodeClientIf), Addr: netip.MustParseAddr("fd00:1::50")})
	if !ok || strings.Join(e.FlagNames(), ",") != "router" {
		t.Errorf("fd00:1::50 flags = %v (found %v), want router", e.FlagNames(), ok)
	}
	e, ok = m.table.Lookup(table.Key{Ifindex: ifindex(t, l.Node, lab.NodeClientIf), Addr: netip.MustParseAddr("10.0.1.54")})
	if !ok || !e.Managed() {
		t.Errorf("10.0.1.54 should be extern_learn (found %v, flags %v)", ok, e.FlagNames())
	}

	// Traffic-driven transitions: the node resolves both hosts.
	sub := m.table.Events().Subscribe(1024)
	defer sub.Close()
	if err := l.Client.Ping(lab.BackendIP, 3, 2*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := l.Client.Ping(lab.BackendIP6, 3, 2*time.Second); err != nil {
		t.Fatal(err)
	}
	requireMirror(t, m, l.Node, 5*time.Second, false)
	// A resync also finds the silently created multicast entries.
	m.Resync()
	requireMirror(t, m, l.Node, 5*time.Second, true)
	// The node learned the client from its ARP request: an event with
	// cause netlink for 10.0.1.2 on n0.
	gotEvent := false
	for !gotEvent {
		select {
		case ev := <-sub.C():
			gotEvent = ev.IP == lab.ClientIP && ev.Interface == lab.NodeClientIf && ev.Cause == table.CauseNetlink
		case <-time.After(lab.Patience(5 * time.Second)):
			t.Fatal("no netlink event for the client's entry on n0")
		}
	}
	tr := m.table.Stats(0).Transitions
	if len(tr) == 0 {
		t.Error("no transitions counted after traffic")
	}

	// Deleting an interface drops its entries and its metrics series.
	n1 := ifindex(t, l.Node, lab.NodeBackendIf)
	l.Node.MustIP(t, "link", "del", lab.NodeBackendIf)
	requireMirror(t, m, l.Node, 5*time.Second, false)
	lab.WaitFor(t, 5*time.Second, "interface n1 to leave the stats", func() bool {
		for _, is := range m.table.Stats(0).Interfaces {
			if is.Ifindex == n1 {
				return false
			}
		}
		return true
	})
}

func ifindex(t *testing.T, ns lab.NS, dev string) int32 {
	t.Helper()
	i, err := ns.Ifindex(dev)
	if err != nil {
		t.Fatal(err)
	}
	return int32(i)
}

// TestMirrorSurvivesENOBUFS makes 20,000 changes as fast as ip -batch can
// against a deliberately tiny receive buffer: the socket must overflow,
// the mirror must count it, resync, and still end equal to the kernel.
func TestMirrorSurvivesENOBUFS(t *testing.T) {
	lab.Require(t)
	t.Parallel()
	l := lab.New(t, "nob")
	m := startMirror(t, l.Node, mirror.Config{ReceiveBuffer: 4096})
	fdsBefore := openFDs(t)
	goBefore := runtime.NumGoroutine()
	const hosts, rounds = 200, 100
	states := []string{"stale", "permanent", "reachable", "noarp"}
	var lines []string
	for r := 0; r < rounds; r++ {
		for i := 0; i < hosts; i++ {
			lines = append(lines, fmt.Sprintf("neigh replace %s lladdr %s dev %s nud %s",
				lab.HostIP(200, i), lab.HostMAC(i, r), lab.NodeClientIf, states[(i+r)%len(states)]))
		}
	}
	for i := 0; i < hosts; i += 3 {
		lines = append(lines, fmt.Sprintf("neigh del %s dev %s", lab.HostIP(200, i), lab.NodeClientIf))
	}
	if len(lines) < 20000 {
		t.Fatalf("only %d changes", len(lines))
	}
	if err := l.Node.Batch(lines); err != nil {
		t.Fatal(err)
	}
	requireMirror(t, m, l.Node, 15*time.Second, false)
	// One more dump also brings in what the kernel created silently.
	m.Resync()
	requireMirror(t, m, l.Node, 5*time.Second, true)
	c := m.Counters()
	if c[mirror.ResyncENOBUFS] == 0 {
		rb, _ := m.ReceiveBuffer()
		t.Fatalf("no ENOBUFS resync with a %d-byte receive buffer after %d changes", rb, len(lines))
	}
	t.Logf("ENOBUFS resyncs: %d, dumps: %d, messages: %d", c[mirror.ResyncENOBUFS], c[mirror.Dumps], c[mirror.Messages])
	// Every resync replaced the socket; none may stay open. Other tests
	// run in parallel and open files too, so allow a little slack but far
	// less than one descriptor per resync.
	if fds := openFDs(t); fds > fdsBefore+20 {
		t.Errorf("open descriptors grew from %d to %d over %d resyncs", fdsBefore, fds, c[mirror.ResyncENOBUFS])
	}
	if g := runtime.NumGoroutine(); g > goBefore+20 {
		t.Errorf("goroutines grew from %d to %d over %d resyncs", goBefore, g, c[mirror.ResyncENOBUFS])
	}
}

func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// TestPeriodicResyncPacedByCost: the periodic resync waits at least
// pace.Factor times what the last one took. With a 10 ms interval and
// 3,000 entries (a dump of a millisecond or more), a second and a half
// holds a handful of periodic resyncs, not 150. A busy machine makes
// dumps slower and the count smaller, never larger.
func TestPeriodicResyncPacedByCost(t *testing.T) {
	lab.Require(t)
	t.Parallel()
	l := lab.New(t, "pac")
	const hosts = 3000
	lines := make([]string, 0, hosts)
	for i := range hosts {
		lines = append(lines, fmt.Sprintf("neigh add %s lladdr %s dev %s nud permanent",
			lab.HostIP(100, i), lab.HostMAC(i, 0), lab.NodeClientIf))
	}
	if err := l.Node.Batch(lines); err != nil {
		t.Fatal(err)
	}
	m := startMirror(t, l.Node, mirror.Config{ResyncInterval: 10 * time.Millisecond})
	lab.WaitFor(t, 20*time.Second, "a periodic resync", func() bool { return m.Counters()[mirror.Dumps] >= 2 })
	before := m.Counters()
	window := 1500 * time.Millisecond
	time.Sleep(window)
	after := m.Counters()
	n := after[mirror.ResyncPeriodic] - before[mirror.ResyncPeriodic]
	t.Logf("%d periodic resyncs in %v with a %d-entry table, interval 10ms", n, window, m.table.Len())
	if n >= 30 {
		t.Errorf("%d periodic resyncs in %v: not paced by their cost (unpaced: one per 10ms)", n, window)
	}
}
