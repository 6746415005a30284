package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/neighwatch/neighwatch/internal/control"
	"github.com/neighwatch/neighwatch/internal/dev/lab"
)

func TestStateAgeFromCacheinfoSurvivesRestart(t *testing.T) {
	lab.Require(t)
	t.Parallel()
	l := lab.New(t, "age")
	l.Node.MustIP(t, "neigh", "add", "10.0.1.77", "lladdr", "02:00:00:00:00:77", "dev", lab.NodeClientIf, "nud", "stale")
	time.Sleep(10 * time.Second)
	sock := sockPath(t)
	a := startAgent(t, l.Node, sock)
	e, ok := findEntry(statusJSON(t, sock), lab.NodeClientIf, "10.0.1.77")
	if !ok {
		t.Fatal("10.0.1.77 missing from status --json")
	}
	if e.State != "stale" || e.StateAgeSeconds < 10 {
		t.Fatalf("first agent: state %s age %.2fs, want stale and >= 10s", e.State, e.StateAgeSeconds)
	}
	first := e.StateAgeSeconds
	a.stop(t)

	startAgent(t, l.Node, sock)
	e, ok = findEntry(statusJSON(t, sock), lab.NodeClientIf, "10.0.1.77")
	if !ok {
		t.Fatal("10.0.1.77 missing after restart")
	}
	if e.StateAgeSeconds < first {
		t.Fatalf("after restart the age went from %.2fs back to %.2fs", first, e.StateAgeSeconds)
	}
	t.Logf("state age %.2fs, after restart %.2fs", first, e.StateAgeSeconds)
}

// TestMismatchBecomesStuck is the black-hole signature: the client moves
// to a new MAC, its gratuitous ARP reaches the listener but not the
// node's table (drop_gratuitous_arp=1), so the node still sends to the old
// MAC. The entry must be reported mismatched, then stuck once past the
// threshold, in status and metrics.
func TestMismatchBecomesStuck(t *testing.T) {
	lab.Require(t)
	t.Parallel()
	l := lab.New(t, "mis")
	if err := l.PinClientToNode(); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"net.ipv4.conf.all.drop_gratuitous_arp", "net.ipv4.conf." + lab.NodeClientIf + ".drop_gratuitous_arp"} {
		if err := l.Node.Sysctl(k, "1"); err != nil {
			t.Fatal(err)
		}
	}
	oldMAC, err := l.Client.MAC(lab.ClientIf)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Node.SetNeigh(lab.NodeClientIf, lab.ClientIP, oldMAC, "stale"); err != nil {
		t.Fatal(err)
	}
	sock := sockPath(t)
	a := startAgent(t, l.Node, sock, "--stale-threshold", "3s")

	newMAC := lab.HostMAC(42, 9)
	if err := l.MoveClientMAC(newMAC); err != nil {
		t.Fatal(err)
	}
	if err := l.Client.AnnounceARP(lab.ClientIf, lab.ClientIP, newMAC, 2); err != nil {
		t.Fatal(err)
	}
	ke, err := l.Node.Entry(lab.NodeClientIf, lab.ClientIP)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.EqualFold(ke.LLAddr, oldMAC.String()) {
		t.Fatalf("lab broken: the node's kernel entry moved to %s, want it stuck at %s", ke.LLAddr, oldMAC)
	}

	var e control.Entry
	lab.WaitFor(t, 10*time.Second, "the entry stuck", func() bool {
		e, _ = findEntry(statusJSON(t, sock), lab.NodeClientIf, lab.ClientIP.String())
		return e.Class == "stuck"
	})
	if !e.Mismatch || e.SeenLLAddr != newMAC.String() || e.LLAddr != oldMAC.String() {
		t.Errorf("status: mismatch=%v seen=%s lladdr=%s, want mismatch, seen %s, lladdr %s", e.Mismatch, e.SeenLLAddr, e.LLAddr, newMAC, oldMAC)
	}
	body := a.metrics(t)
	for _, want := range []string{
		`neighwatch_neighbours_stuck{family="inet",interface="n0"} 1`,
		`neighwatch_neighbours_mismatched{family="inet",interface="n0"} 1`,
		// segment: the subnet of n0's own address (10.0.1.1/24).
		fmt.Sprintf(`neighwatch_stuck_neighbour_info{family="inet",interface="n0",ip="10.0.1.2",lladdr="%s",seen_lladdr="%s",segment="10.0.1.0/24"} 1`, oldMAC, newMAC),
		`neighwatch_arp_packets_total{interface="n0",kind="gratuitous"} 2`,
		// Two announcements, one mismatch: the counter counts entries
		// becoming mismatched, not the packets that keep showing it.
		`neighwatch_arp_mismatches_total{interface="n0"} 1`,
	} {
		if !strings.Contains(body, want+"\n") {
			t.Errorf("metrics lack %s", want)
		}
	}
	checkMetricsLint(t, body)
}

// TestNDPMismatchBecomesStuck is the IPv6 version of the black-hole
// signature: the client moves and announces itself with an unsolicited
// Neighbor Advertisement that the node's kernel ignores
// (drop_unsolicited_na=1) but the NDP listener sees.
func TestNDPMismatchBecomesStuck(t *testing.T) {
	lab.Require(t)
	t.Parallel()
	l := lab.New(t, "ndm")
	if err := l.PinClientToNode(); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"net.ipv6.conf.all.drop_unsolicited_na", "net.ipv6.conf." + lab.NodeClientIf + ".drop_unsolicited_na"} {
		if err := l.Node.Sysctl(k, "1"); err != nil {
			t.Fatal(err)
		}
	}
	oldMAC, _ := l.Client.MAC(lab.ClientIf)
	if err := l.Node.SetNeigh(lab.NodeClientIf, lab.ClientIP6, oldMAC, "stale"); err != nil {
		t.Fatal(err)
	}
	sock := sockPath(t)
	a := startAgent(t, l.Node, sock, "--stale-threshold", "3s", "--tracer", "off")
	newMAC := lab.HostMAC(43, 9)
	if err := l.MoveClientMAC(newMAC); err != nil {
		t.Fatal(err)
	}
	if err := l.Client.AnnounceNDP(lab.ClientIf, lab.ClientIP6, newMAC); err != nil {
		t.Fatal(err)
	}
	var e control.Entry
	lab.WaitFor(t, 10*time.Second, "the IPv6 entry stuck", func() bool {
		e, _ = findEntry(statusJSON(t, sock), lab.NodeClientIf, lab.ClientIP6.String())
		return e.Class == "stuck"
	})
	if !e.Mismatch || e.SeenLLAddr != newMAC.String() || e.LLAddr != oldMAC.String() {
		t.Errorf("status: mismatch=%v seen=%s lladdr=%s", e.Mismatch, e.SeenLLAddr, e.LLAddr)
	}
	body := a.metrics(t)
	if v := metricValue(body, `neighwatch_ndp_packets_total{interface="n0",kind="unsolicited_advertisement"}`); v != "1" {
		t.Errorf("unsolicited advertisements counted: %q, want 1", v)
	}
	checkMetricsLint(t, body)
}
