package e2e

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/neighwatch/neighwatch/internal/dev/lab"
	"sigs.k8s.io/yaml"
)

// stuckSeries is what one node's agent exports of its stuck entries:
// neighwatch_stuck_neighbour_info, one series per entry, set by the test.
type stuckSeries struct {
	mu    sync.Mutex
	lines map[string]bool
}

func (s *stuckSeries) add(iface, family, ip, lladdr string) { s.addOn("", iface, family, ip, lladdr) }

// addOn adds a stuck entry on a segment (the agent's label: the subnet
// the node reaches the neighbour through).
func (s *stuckSeries) addOn(segment, iface, family, ip, lladdr string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lines[fmt.Sprintf(`neighwatch_stuck_neighbour_info{interface=%q,family=%q,ip=%q,lladdr=%q,seen_lladdr="",segment=%q} 1`, iface, family, ip, lladdr, segment)] = true
}

// serveSeries serves a node's stuck series at addr in ns, for the test.
func serveSeries(t *testing.T, ns lab.NS, addr string) *stuckSeries {
	t.Helper()
	s := &stuckSeries{lines: map[string]bool{}}
	var ln net.Listener
	if err := ns.Do(func() (err error) { ln, err = net.Listen("tcp", addr); return err }); err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: s, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { srv.Close() })
	return s
}

func (s *stuckSeries) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for l := range s.lines {
		out = append(out, l)
	}
	sort.Strings(out)
	fmt.Fprintf(w, "# TYPE neighwatch_stuck_neighbour_info gauge\n%s\n", strings.Join(out, "\n"))
}

// TestOnePagePerHost: the shipped rules, inhibition and route
// (deploy/prometheus/alertmanager-route.yml) in the real Prometheus and
// Alertmanager, their timings divided by 20. Four nodes find one moved
// host at 0, 3, 20 and 25 minutes (scaled: 0, 9, 60 and 75 s): the pager
// gets one group (one incident), its first notification from the first
// node's NeighbourEntryStuck, updated when the fleet alert joins it, and
// again when the fourth node doubles the count (nodes_at_least 4), with
// no notification of the group all resolved in between. Two hosts
// that share fe80::1 on different segments (different old MACs), each
// stuck on two nodes, get two groups; so do two VRRP routers with one
// address and one MAC on two segments. What the nodes export is set by the
// test (the series the agent exports, as TestFleetAlertGroupsNodes and
// the precision tests show it does); what is under test is the route.
func TestOnePagePerHost(t *testing.T) {
	lab.Require(t)
	requireProgram(t, "prometheus", "prometheus")
	requireProgram(t, "prometheus-alertmanager", "prometheus-alertmanager")
	t.Parallel()
	const scale = 20
	l := lab.New(t, "pg")
	nodes := make([]*stuckSeries, 4)
	targets := map[string]string{}
	for i := range nodes {
		addr := fmt.Sprintf("127.0.0.1:%d", 9201+i)
		nodes[i] = serveSeries(t, l.Node, addr)
		targets[addr] = fmt.Sprintf("node-%d", i+1)
	}
	const (
		moved    = "10.0.1.2"
		movedMAC = "02:00:00:00:0a:01"
		shared   = "fe80::1"
		routerA  = "02:00:00:00:0b:01"
		routerB  = "02:00:00:00:0b:02"
		vrrp     = "10.0.0.1"
		vrrpMAC  = "00:00:5e:00:01:01"
		vlan100  = "10.0.100.0/24"
		vlan200  = "10.0.200.0/24"
	)
	// The two routers are stuck from the start, each on two nodes.
	nodes[0].add("eth1", "inet6", shared, routerA)
	nodes[1].add("eth1", "inet6", shared, routerA)
	nodes[1].add("eth2", "inet6", shared, routerB)
	nodes[2].add("eth2", "inet6", shared, routerB)
	// Two VRRP routers in two VLANs: one address, one virtual MAC, two
	// segments, each stuck on two nodes of its own.
	nodes[0].addOn(vlan100, "vlan100", "inet", vrrp, vrrpMAC)
	nodes[1].addOn(vlan100, "vlan100", "inet", vrrp, vrrpMAC)
	nodes[2].addOn(vlan200, "vlan200", "inet", vrrp, vrrpMAC)
	nodes[3].addOn(vlan200, "vlan200", "inet", vrrp, vrrpMAC)
	// The moved host: the first node finds it now.
	nodes[0].add("eth0", "inet", moved, movedMAC)

	alerts := shippedAlerts(t)
	inhibit, err := os.ReadFile("../deploy/prometheus/alertmanager-inhibit.yml")
	if err != nil {
		t.Fatal(err)
	}
	route, err := os.ReadFile("../deploy/prometheus/alertmanager-route.yml")
	if err != nil {
		t.Fatal(err)
	}
	hooks := startAlertingWith(t, l.Node, alerts, alerting{forDivisor: scale, targets: targets,
		labels: map[string]string{"cluster": "lab"}, inhibit: string(inhibit), routes: string(route)})
	// Prometheus scrapes the nodes: the first node has found the host.
	start := time.Now()
	host := map[string]string{"ip": moved, "lladdr": movedMAC}

	// The first page, from the first node alone.
	lab.WaitFor(t, 120*time.Second, "the first node's NeighbourEntryStuck delivered", func() bool {
		_, ok := hooks.find("NeighbourEntryStuck", "firing", map[string]string{"ip": moved, "instance": "node-1"})
		return ok
	})
	first := time.Since(start)
	// 3 minutes later (scaled), the second node finds it: the fleet alert
	// fires and joins the group.
	time.Sleep(max(0, 3*time.Minute/scale-time.Since(start)))
	nodes[1].add("eth0", "inet", moved, movedMAC)
	lab.WaitFor(t, 120*time.Second, "NeighbourHostStuckOnNodes for the moved host delivered", func() bool {
		_, ok := hooks.find("NeighbourHostStuckOnNodes", "firing", host)
		return ok
	})
	// 20 minutes after the first (scaled), the third.
	time.Sleep(max(0, 20*time.Minute/scale-time.Since(start)))
	nodes[2].add("eth0", "inet", moved, movedMAC)
	lab.WaitFor(t, 120*time.Second, "the third node's NeighbourEntryStuck firing in Prometheus", func() bool {
		r, err := promQuery(l.Node, `ALERTS{alertname="NeighbourEntryStuck",alertstate="firing",ip="`+moved+`"}`)
		return err == nil && len(r) == 3
	})
	// The two routers' fleet alerts, each delivered, and the two VRRP
	// routers', each with its segment.
	for _, mac := range []string{routerA, routerB} {
		lab.WaitFor(t, 60*time.Second, "NeighbourHostStuckOnNodes for "+shared+" at "+mac, func() bool {
			_, ok := hooks.find("NeighbourHostStuckOnNodes", "firing", map[string]string{"ip": shared, "lladdr": mac})
			return ok
		})
	}
	for _, seg := range []string{vlan100, vlan200} {
		lab.WaitFor(t, 60*time.Second, "NeighbourHostStuckOnNodes for "+vrrp+" on "+seg, func() bool {
			_, ok := hooks.find("NeighbourHostStuckOnNodes", "firing", map[string]string{"ip": vrrp, "segment": seg, "nodes_at_least": "2"})
			return ok
		})
	}
	// 25 minutes after the first (scaled), the fourth: the count doubles,
	// and the pager hears it in the same group.
	time.Sleep(max(0, 25*time.Minute/scale-time.Since(start)))
	nodes[3].add("eth0", "inet", moved, movedMAC)
	// Meanwhile the fleet alert never stops firing: the step left behind
	// (nodes_at_least 2) keeps firing until the new one does, so the
	// inhibition of the per-node pages never lapses.
	polls, gaps := 0, 0
	lab.WaitFor(t, 120*time.Second, "NeighbourHostStuckOnNodes at nodes_at_least 4 delivered", func() bool {
		if r, err := promQuery(l.Node, `ALERTS{alertname="NeighbourHostStuckOnNodes",alertstate="firing",ip="`+moved+`"}`); err == nil {
			polls++
			if len(r) == 0 {
				gaps++
			}
		}
		_, ok := hooks.find("NeighbourHostStuckOnNodes", "firing", map[string]string{"ip": moved, "nodes_at_least": "4"})
		return ok
	})
	if polls == 0 || gaps > 0 {
		t.Errorf("NeighbourHostStuckOnNodes for the moved host was not firing at %d of %d looks while the count stepped from 2 to 4", gaps, polls)
	}
	// Past a whole group interval, so that any notification the fourth
	// node causes has come.
	time.Sleep(5*time.Minute/scale + 2*time.Second)
	for _, h := range hooks.matching(host) {
		if h.status == "resolved" {
			t.Errorf("the moved host's group got a notification with every alert resolved (%s at %s, nodes_at_least %q) while the host was stuck", h.a.Labels["alertname"], h.at.Sub(start).Round(100*time.Millisecond), h.a.Labels["nodes_at_least"])
		}
	}

	keys, n := hooks.groups(host)
	if len(keys) != 1 {
		t.Errorf("the moved host, found by four nodes at 0, 3, 20 and 25 minutes (scaled), reached the pager as %d groups (pages), want 1: %q", len(keys), keys)
	}
	if n < 3 {
		t.Errorf("the moved host's group got %d notifications, want the first node's page, its update with the fleet alert and the update at nodes_at_least 4", n)
	}
	a, _ := hooks.groups(map[string]string{"ip": shared, "lladdr": routerA})
	b, _ := hooks.groups(map[string]string{"ip": shared, "lladdr": routerB})
	all, _ := hooks.groups(map[string]string{"ip": shared})
	if len(a) != 1 || len(b) != 1 || len(all) != 2 {
		t.Errorf("two routers at %s with different MACs: groups %q and %q (all %q), want one each, two in all", shared, a, b, all)
	}
	v1, _ := hooks.groups(map[string]string{"ip": vrrp, "segment": vlan100})
	v2, _ := hooks.groups(map[string]string{"ip": vrrp, "segment": vlan200})
	vAll, _ := hooks.groups(map[string]string{"ip": vrrp})
	if len(v1) != 1 || len(v2) != 1 || len(vAll) != 2 {
		t.Errorf("two VRRP routers at %s with one MAC on two segments: groups %q and %q (all %q), want one each, two in all", vrrp, v1, v2, vAll)
	}
	t.Logf("the moved host: first page %v after the start, %d notifications in %d group(s); %s: %d groups",
		first.Round(100*time.Millisecond), n, len(keys), shared, len(all))
}

// TestOperatorRouteStopsTheCatchAll: the Alertmanager configuration
// prometheus-operator writes for the chart's AlertmanagerConfig (the
// route of deploy/prometheus/alertmanager-route.yml, first, with its
// receiver and continue: true), followed by the operator's own routes,
// the last a catch-all (no matchers, grouped by alertname) to a pager.
// With deploy/prometheus/alertmanager-operator-route.yml between the two,
// the neighbour pages reach the AlertmanagerConfig's receiver and not the
// catch-all; without it (the control), the catch-all gets them too.
func TestOperatorRouteStopsTheCatchAll(t *testing.T) {
	lab.Require(t)
	requireProgram(t, "prometheus", "prometheus")
	requireProgram(t, "prometheus-alertmanager", "prometheus-alertmanager")
	t.Parallel()
	var route, stop struct {
		Routes []map[string]any `json:"routes"`
	}
	for f, into := range map[string]any{"../deploy/prometheus/alertmanager-route.yml": &route, "../deploy/prometheus/alertmanager-operator-route.yml": &stop} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := yaml.Unmarshal(b, into); err != nil {
			t.Fatal(err)
		}
	}
	if len(route.Routes) != 1 || len(stop.Routes) != 1 {
		t.Fatalf("%d and %d routes, want one in each file", len(route.Routes), len(stop.Routes))
	}
	// As prometheus-operator writes the AlertmanagerConfig's route.
	route.Routes[0]["receiver"] = "pager"
	route.Routes[0]["continue"] = true
	catchAll := map[string]any{"receiver": "catchall", "group_by": []string{"alertname"}}
	inhibit, err := os.ReadFile("../deploy/prometheus/alertmanager-inhibit.yml")
	if err != nil {
		t.Fatal(err)
	}
	alerts := shippedAlerts(t)
	const (
		host = "10.0.1.2"
		mac  = "02:00:00:00:0a:01"
	)
	for _, tc := range []struct {
		name     string
		routes   []map[string]any
		catchAll bool
	}{
		{"with the stop route", append(append(slices.Clone(route.Routes), stop.Routes...), catchAll), false},
		{"control: without it", append(slices.Clone(route.Routes), catchAll), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			l := lab.New(t, "op")
			serveSeries(t, l.Node, "127.0.0.1:9201").add("eth0", "inet", host, mac)
			routes, err := yaml.Marshal(map[string]any{"routes": tc.routes})
			if err != nil {
				t.Fatal(err)
			}
			hooks := startAlertingWith(t, l.Node, alerts, alerting{forDivisor: 20, targets: map[string]string{"127.0.0.1:9201": "node-1"},
				labels: map[string]string{"cluster": "lab"}, inhibit: string(inhibit), routes: string(routes),
				receivers: "  - name: pager\n    webhook_configs:\n      - url: http://127.0.0.1:9099/pager\n        send_resolved: true\n" +
					"  - name: catchall\n    webhook_configs:\n      - url: http://127.0.0.1:9099/catchall\n        send_resolved: true\n  - name: \"null\"\n"})
			page := map[string]string{"alertname": "NeighbourEntryStuck", "ip": host}
			lab.WaitFor(t, 120*time.Second, "the page delivered to the AlertmanagerConfig's receiver", func() bool {
				for _, h := range hooks.matching(page) {
					if h.receiver == "pager" {
						return true
					}
				}
				return false
			})
			if tc.catchAll {
				lab.WaitFor(t, 60*time.Second, "the page delivered to the catch-all too (the control)", func() bool {
					for _, h := range hooks.matching(page) {
						if h.receiver == "catchall" {
							return true
						}
					}
					return false
				})
				return
			}
			// Past the catch-all's own group wait and interval (1 s each),
			// several times over.
			time.Sleep(5 * time.Second)
			for _, h := range hooks.matching(map[string]string{"ip": host}) {
				if h.receiver != "pager" {
					t.Errorf("%s for %s reached receiver %q: the stop route let it through to the catch-all", h.a.Labels["alertname"], host, h.receiver)
				}
			}
		})
	}
}
