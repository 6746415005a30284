package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/neighwatch/neighwatch/internal/control"
	"github.com/neighwatch/neighwatch/internal/dev/lab"
)

// TestARPPoisoningIsConflict: on one Ethernet segment a spoofer claims the
// victim's IP and the node's kernel takes its MAC; the victim announces
// itself (seen by the listener; the node drops gratuitous ARP, so its
// kernel keeps the spoofer's MAC). The victim at another MAC is a
// suspicion; its confirmation asks the entry's MAC, the spoofer answers,
// and two MACs answer for the IP: a conflict, a warning class of its own.
// With remediation on, nothing acts on it: no strategy can tell which
// MAC is right, and a flush or a repoint might hand the IP to the
// spoofer. It is never fixed, never stuck, and the kernel's entry is left
// as it is.
func TestARPPoisoningIsConflict(t *testing.T) {
	lab.Require(t)
	t.Parallel()
	seg := lab.NewSegment(t, "spf", 2)
	victim, attacker := seg.Hosts[0], seg.Hosts[1]
	victimIP := lab.SegmentHostIP(0)
	for _, k := range []string{"net.ipv4.conf.all.drop_gratuitous_arp", "net.ipv4.conf." + lab.SegmentBridge + ".drop_gratuitous_arp"} {
		if err := seg.Node.Sysctl(k, "1"); err != nil {
			t.Fatal(err)
		}
	}
	victimMAC, err := victim.MAC(lab.SegmentHostIf)
	if err != nil {
		t.Fatal(err)
	}
	nodeMAC, err := seg.Node.MAC(lab.SegmentBridge)
	if err != nil {
		t.Fatal(err)
	}
	// The node knows the victim at its real MAC.
	if err := seg.Node.Ping(victimIP, 1, 2*time.Second); err != nil {
		t.Fatal(err)
	}
	sock := sockPath(t)
	a := startAgent(t, seg.Node, sock, "--tracer", "off", "--stale-threshold", "1s", "--remediation", "on",
		"--remediation.strategies", "probe,kick,flush", "--remediation.verify-timeout", "1s")
	a.waitPart(t, "evidence")
	events := collectEvents(t, sock)

	sp, err := attacker.Spoof(lab.SegmentHostIf, victimIP)
	if err != nil {
		t.Fatal(err)
	}
	defer sp.Stop()
	// Wait past the kernel's ARP locktime (1 s) since the ping's reply, so
	// the poison overrides the victim's MAC.
	lab.WaitFor(t, 10*time.Second, "the node's kernel to take the spoofer's MAC", func() bool {
		if err := sp.Poison(nodeMAC, lab.SegmentNodeIP); err != nil {
			t.Fatal(err)
		}
		time.Sleep(200 * time.Millisecond)
		e, err := seg.Node.Entry(lab.SegmentBridge, victimIP)
		return err == nil && strings.EqualFold(e.LLAddr, sp.MAC().String())
	})
	// The victim speaks up; the node's kernel ignores it, the listener sees it.
	if err := victim.AnnounceARP(lab.SegmentHostIf, victimIP, victimMAC, 1); err != nil {
		t.Fatal(err)
	}

	var e control.Entry
	lab.WaitFor(t, 30*time.Second, "the entry a conflict", func() bool {
		e, _ = findEntry(statusJSON(t, sock), lab.SegmentBridge, victimIP.String())
		return e.Class == "conflict"
	})
	// Give the engine time to do whatever else it would (later sweeps,
	// other strategies), then look.
	time.Sleep(3 * time.Second)
	evs := events()
	for _, o := range []string{"outcome=fixed", "outcome=moved", "outcome=flushed"} {
		if strings.Contains(evs, o) {
			t.Errorf("remediation acted on a conflict (%s):\n%s", o, grep(evs, "remediation"))
		}
	}
	body := a.metrics(t)
	if v := metricValue(body, `neighwatch_remediation_confirmations_total{outcome="answered"}`); v == "" || v == "0" {
		t.Errorf("answered confirmations %q: the conflict came from elsewhere\n%s", v, grep(body, "confirmations_total"))
	}
	if v := metricValue(body, `neighwatch_neighbours_conflict{family="inet",interface="`+lab.SegmentBridge+`"}`); v != "1" {
		t.Errorf("neighwatch_neighbours_conflict = %q, want 1", v)
	}
	e, ok := findEntry(statusJSON(t, sock), lab.SegmentBridge, victimIP.String())
	if !ok {
		t.Fatal("the victim's entry is missing from status")
	}
	var conflict *control.Signal
	for i := range e.Evidence {
		if e.Evidence[i].Signal == "conflict" {
			conflict = &e.Evidence[i]
		}
	}
	macs := map[string]bool{victimMAC.String(): true, sp.MAC().String(): true}
	if e.Class != "conflict" || conflict == nil || !macs[conflict.MAC] || !macs[e.LLAddr] || conflict.MAC == e.LLAddr {
		t.Fatalf("entry %+v, want a conflict with evidence naming the other of %v", e, macs)
	}
	if k, err := seg.Node.Entry(lab.SegmentBridge, victimIP); err != nil || !strings.EqualFold(k.LLAddr, sp.MAC().String()) {
		t.Errorf("the kernel's entry moved (%v, %v): remediation must leave a conflict alone", k.LLAddr, err)
	}
	t.Logf("kernel at %s, conflict with %s; spoofer answered %d requests; %s", e.LLAddr, conflict.MAC, sp.Stop(),
		grep(body, "confirmations_total"))
}
