package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/neighwatch/neighwatch/internal/control"
	"github.com/neighwatch/neighwatch/internal/lab"
)

// TestARPPoisoningIsConflict: on one Ethernet segment a spoofer claims the
// victim's IP and the node's kernel takes its MAC; the victim announces
// itself (seen by the listener; the node drops gratuitous ARP, so its
// kernel keeps the spoofer's MAC). With remediation on, the engine probes
// by broadcast, both answer, and the outcome is conflict: never fixed,
// and the entry stays stuck with the conflict as evidence.
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

	lab.WaitFor(t, 30*time.Second, "a remediation outcome of conflict", func() bool {
		return strings.Contains(events(), "outcome=conflict")
	})
	// Give the engine time to do whatever else it would (other strategies,
	// later rounds), then look.
	time.Sleep(3 * time.Second)
	evs := events()
	if strings.Contains(evs, "outcome=fixed") {
		t.Errorf("a remediation outcome was fixed with a spoofer answering:\n%s", grep(evs, "remediation"))
	}
	body := a.metrics(t)
	if v := metricValue(body, `neighwatch_remediation_actions_total{outcome="conflict",strategy="probe"}`); v == "" || v == "0" {
		t.Errorf("probe conflict actions %q\n%s", v, grep(body, "remediation_actions_total"))
	}
	for _, s := range []string{"probe", "kick", "flush"} {
		if v := metricValue(body, `neighwatch_remediation_actions_total{outcome="fixed",strategy="`+s+`"}`); v != "0" {
			t.Errorf("%s fixed = %q, want 0", s, v)
		}
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
	if e.Class != "stuck" || conflict == nil || !macs[conflict.MAC] || !macs[e.LLAddr] || conflict.MAC == e.LLAddr {
		t.Fatalf("entry %+v, want stuck with conflict evidence naming the other of %v", e, macs)
	}
	t.Logf("kernel at %s, conflict with %s; spoofer answered %d requests; %s", e.LLAddr, conflict.MAC, sp.Stop(),
		grep(body, `remediation_actions_total{outcome="conflict"`))
}
