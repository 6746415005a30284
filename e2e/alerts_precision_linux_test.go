package e2e

import (
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/neighwatch/neighwatch/internal/dev/lab"
)

// TestAlertsPrecision: on the real Prometheus and Alertmanager, with the
// project's own rules (for: shortened), a healthy host whose packets all
// leave from a second MAC (the worst case of a balance-tlb bond) never
// fires NeighbourEntryStuck, while a host that moves on the same node
// does. Both behind an independent TC forwarder, the agent on its
// defaults but for the timers.
func TestAlertsPrecision(t *testing.T) {
	lab.Require(t)
	requireProgram(t, "prometheus", "prometheus")
	requireProgram(t, "prometheus-alertmanager", "prometheus-alertmanager")
	t.Parallel()
	f := lab.NewFabric(t, "apr")
	healthyIP := lab.ClientIP
	multi, m1, _ := secondMACHost(t, f, "aprh", lab.BackendIP, lab.BackendIP2) // every packet from M2
	movedIP := netip.MustParseAddr("10.0.1.4")
	mover := f.Host(t, "aprm")
	mm1 := lab.HostMAC(1, 0x78)
	f.Plug(t, mover, "c0", mm1)
	mover.MustIP(t, "addr", "add", movedIP.String()+"/24", "dev", "c0")
	mover.MustIP(t, "route", "add", "default", "via", lab.NodeClientIP.String())
	f.PinNode(t, mover, "c0")
	pinStale(t, f, healthyIP, m1)
	pinStale(t, f, movedIP, mm1)
	a, sock := precisionAgent(t, f)
	alerts, err := os.ReadFile("../deploy/prometheus/alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	hooks := startAlerting(t, f.Node, alerts)
	traffic := func() {
		echoFrom(t, multi, lab.BackendIP, lab.BackendIP2)()
		echoFrom(t, mover, lab.BackendIP)()
	}
	// Three thresholds and a period of the healthy host, at-risk both.
	rh, rm := newRun(t, sock, healthyIP), newRun(t, sock, movedIP)
	for end := time.Now().Add(3*precThreshold + precPeriod + 2*time.Second); time.Now().Before(end); {
		traffic()
		rh.sample()
		rm.sample()
	}
	mover.MustIP(t, "link", "set", "c0", "address", lab.HostMAC(2, 0x78).String())
	f.PinNode(t, mover, "c0")
	moved := time.Now()
	lab.WaitFor(t, 60*time.Second, "NeighbourEntryStuck for the moved host", func() bool {
		traffic()
		rh.sample()
		rm.sample()
		_, ok := hooks.find("NeighbourEntryStuck", "firing", map[string]string{"ip": movedIP.String()})
		return ok
	})
	fired, _ := hooks.find("NeighbourEntryStuck", "firing", map[string]string{"ip": movedIP.String()})
	// The healthy host a while longer, then what Alertmanager delivered.
	for end := time.Now().Add(precThreshold + precPeriod); time.Now().Before(end); {
		traffic()
		rh.sample()
	}
	for _, al := range hooks.all("NeighbourEntryStuck") {
		if al.Labels["ip"] != movedIP.String() {
			t.Errorf("NeighbourEntryStuck for a host that did not move: %v", al.Labels)
		}
	}
	ans, unans := confirmations(t, a)
	t.Logf("pages: healthy host with a second MAC %d (classes %v); moved host 1, %v after the move (classes %v); confirmations answered %d, unanswered %d",
		len(hooks.all("NeighbourEntryStuck"))-1, rh.timeline, fired.Sub(moved).Round(100*time.Millisecond), rm.timeline, ans, unans)
	if rh.stuckAt >= 0 {
		t.Errorf("the healthy host was classed stuck: %v", rh.timeline)
	}
}

// TestFleetAlertGroupsNodes: one host, stuck on two nodes at once (two
// labs, the same client address moved on both), is one
// NeighbourHostStuckOnNodes from the real Prometheus, and Alertmanager,
// with the inhibition of the README, delivers no per-node
// NeighbourEntryStuck for it, though Prometheus holds both firing.
func TestFleetAlertGroupsNodes(t *testing.T) {
	lab.Require(t)
	requireProgram(t, "prometheus", "prometheus")
	requireProgram(t, "prometheus-alertmanager", "prometheus-alertmanager")
	t.Parallel()
	ma, mb := newMovedClient(t, "fla", false), newMovedClient(t, "flb", false)
	// A link between the two nodes for the scrape of the second.
	ma.Node.MustIP(t, "link", "add", "fl0", "type", "veth", "peer", "name", "fl1", "netns", mb.Node.Name)
	ma.Node.MustIP(t, "addr", "add", "10.99.0.1/30", "dev", "fl0")
	mb.Node.MustIP(t, "addr", "add", "10.99.0.2/30", "dev", "fl1")
	ma.Node.MustIP(t, "link", "set", "fl0", "up")
	mb.Node.MustIP(t, "link", "set", "fl1", "up")
	args := remediationArgs("--datapath.mode", "legacy")
	ma.agent = startAgent(t, ma.Node, sockPath(t), args...)
	mb.agent = startAgent(t, mb.Node, sockPath(t), append(args, "--metrics.listen", "0.0.0.0:9947")...)
	alerts, err := os.ReadFile("../deploy/prometheus/alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	inhibit, err := os.ReadFile("../deploy/prometheus/alertmanager-inhibit.yml")
	if err != nil {
		t.Fatal(err)
	}
	// for: a quarter of the rule file's: the fleet rule's (1m) shorter than
	// the per-node one's (2m), as in production, so nodes that find the
	// move within 15 s of each other page once.
	hooks := startAlertingWith(t, ma.Node, alerts, alerting{forDivisor: 4,
		targets: map[string]string{metricsAddr: "node-a", "10.99.0.2:9947": "node-b"},
		labels:  map[string]string{"cluster": "lab"}, inhibit: string(inhibit)})
	// The host moves on both nodes at once, and keeps talking.
	ma.move(t)
	mb.move(t)
	moved := time.Now()
	ip := ma.ip.String()
	var stuck [2]time.Duration
	lab.WaitFor(t, 120*time.Second, "NeighbourHostStuckOnNodes", func() bool {
		for i, m := range []*movedClient{ma, mb} {
			_ = m.Client.Ping(m.backend, 1, 300*time.Millisecond)
			if e, ok := findEntry(statusJSON(t, m.agent.sock), lab.NodeClientIf, ip); ok && e.Class == "stuck" && stuck[i] == 0 {
				stuck[i] = time.Since(moved)
			}
		}
		_, ok := hooks.find("NeighbourHostStuckOnNodes", "firing", map[string]string{"ip": ip, "cluster": "lab"})
		return ok
	})
	fired, _ := hooks.find("NeighbourHostStuckOnNodes", "firing", map[string]string{"ip": ip})
	// Prometheus holds the per-node alert firing on both nodes...
	lab.WaitFor(t, 60*time.Second, "NeighbourEntryStuck firing in Prometheus on both nodes", func() bool {
		r, err := promQuery(ma.Node, `ALERTS{alertname="NeighbourEntryStuck",alertstate="firing",ip="`+ip+`"}`)
		return err == nil && len(r) == 2
	})
	// ... and Alertmanager, past its group wait, delivers neither.
	time.Sleep(3 * time.Second)
	fleet := hooks.all("NeighbourHostStuckOnNodes")
	if len(fleet) != 1 || !strings.Contains(fleet[0].Annotations["description"], "stuck on 2 nodes of lab") {
		t.Errorf("NeighbourHostStuckOnNodes delivered %d times: %+v", len(fleet), fleet)
	}
	if per := hooks.all("NeighbourEntryStuck"); len(per) != 0 {
		t.Errorf("per-node NeighbourEntryStuck delivered under the fleet alert (inhibition): %+v", per)
	}
	t.Logf("one host stuck on two nodes (%v and %v after the move): one page, %v after the move: %s", stuck[0].Round(100*time.Millisecond),
		stuck[1].Round(100*time.Millisecond), fired.Sub(moved).Round(100*time.Millisecond), fleet[0].Annotations["description"])
}
