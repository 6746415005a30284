package e2e

import (
	"net"
	"net/netip"
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
	w := newWatchedSegment(t, "spf", 2, false, func(seg *lab.Segment) {
		for _, k := range []string{"net.ipv4.conf.all.drop_gratuitous_arp", "net.ipv4.conf." + lab.SegmentBridge + ".drop_gratuitous_arp"} {
			if err := seg.Node.Sysctl(k, "1"); err != nil {
				t.Fatal(err)
			}
		}
	}, "--stale-threshold", "1s", "--remediation.strategies", "probe,kick,flush")
	seg, sock, events, a := w.seg, w.sock, w.events, w.agent
	victim, attacker := seg.Hosts[0], seg.Hosts[1]
	victimIP, victimMAC, nodeMAC := w.ip, w.mac, w.nodeMAC

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

// watchedSegment is a segment whose node knows host 0 at its real MAC (a
// ping from the node) and runs an agent on it: tracer off, remediation
// on with a 1 s verify timeout, the evidence and remediation ready, its
// events collected.
type watchedSegment struct {
	seg          *lab.Segment
	ip           netip.Addr       // host 0's address of the family
	mac, nodeMAC net.HardwareAddr // host 0's and the node's (its bridge's)
	agent        *agentProc
	sock         string
	events       func() string
}

// newWatchedSegment makes one of n hosts (name: the namespaces' prefix);
// prepare, if not nil, runs before the node's ping; extra are more
// arguments for the agent.
func newWatchedSegment(t *testing.T, name string, n int, v6 bool, prepare func(seg *lab.Segment), extra ...string) *watchedSegment {
	t.Helper()
	w := &watchedSegment{seg: lab.NewSegment(t, name, n), ip: pick(v6, lab.SegmentHostIP6(0), lab.SegmentHostIP(0))}
	var err error
	if w.mac, err = w.seg.Hosts[0].MAC(lab.SegmentHostIf); err != nil {
		t.Fatal(err)
	}
	if w.nodeMAC, err = w.seg.Node.MAC(lab.SegmentBridge); err != nil {
		t.Fatal(err)
	}
	if prepare != nil {
		prepare(w.seg)
	}
	if err := w.seg.Node.Ping(w.ip, 1, 2*time.Second); err != nil {
		t.Fatal(err)
	}
	w.sock = sockPath(t)
	w.agent = startAgent(t, w.seg.Node, w.sock, append([]string{"--tracer", "off", "--remediation", "on", "--remediation.verify-timeout", "1s"}, extra...)...)
	w.agent.waitPart(t, "evidence")
	w.agent.waitPart(t, "remediation")
	w.events = collectEvents(t, w.sock)
	return w
}
