package e2e

import (
	"bytes"
	"encoding/binary"
	"net"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/neighwatch/neighwatch/internal/control"
	"github.com/neighwatch/neighwatch/internal/dev/lab"
	"github.com/neighwatch/neighwatch/internal/dev/lab/fwd"
	"github.com/neighwatch/neighwatch/remediate"
	"golang.org/x/sys/unix"
)

// resolutionsFor matches what the node sends to resolve ip: ARP requests
// for it (IPv4) or Neighbor Solicitations for it (IPv6), from src.
func resolutionsFor(ip netip.Addr, src net.HardwareAddr) func([]byte) bool {
	return func(f []byte) bool {
		if len(f) < 14 || !bytes.Equal(f[6:12], src) {
			return false
		}
		switch binary.BigEndian.Uint16(f[12:14]) {
		case unix.ETH_P_ARP:
			return ip.Is4() && len(f) >= 42 && binary.BigEndian.Uint16(f[20:22]) == 1 && netip.AddrFrom4([4]byte(f[38:42])) == ip
		case unix.ETH_P_IPV6:
			// ICMPv6 (58) type 135, target address after 8 bytes.
			return ip.Is6() && len(f) >= 14+40+24 && f[14+6] == 58 && f[14+40] == 135 && netip.AddrFrom16([16]byte(f[14+48:14+64])) == ip
		}
		return false
	}
}

// TestAtRiskThenStuck is issue 8's evidence on the lab: a healthy client
// whose replies a bpf_redirect() datapath keeps sending to its STALE entry
// for four times the threshold is at-risk and never stuck, and
// NeighbourEntryStuck's expression stays empty; once the client moves to a
// new MAC, with no ARP or NDP reaching the node, and keeps sending, its
// own packets make the entry suspect (evidence source-mac), and the
// confirmation's unicast requests to its MAC, unanswered, make it stuck
// in dry-run; the node sends no other ARP request or solicitation for it. With the
// project's legacy datapath, with an independent TC forwarder written for
// the tests, and with kernel forwarding (neither class); IPv4 and IPv6.
func TestAtRiskThenStuck(t *testing.T) {
	lab.Require(t)
	t.Parallel()
	for _, dp := range []string{"project", "independent", "kernel"} {
		for _, v6 := range []bool{false, true} {
			name := dp + "/ipv4"
			if v6 {
				name = dp + "/ipv6"
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				testAtRiskThenStuck(t, dp, v6)
			})
		}
	}
}

func testAtRiskThenStuck(t *testing.T, datapath string, v6 bool) {
	const threshold = 2 * time.Second
	l := lab.New(t, "ars")
	client, backend, nodeBackend := lab.ClientIP, lab.BackendIP, lab.NodeBackendIP
	if v6 {
		client, backend, nodeBackend = lab.ClientIP6, lab.BackendIP6, lab.NodeBackendIP6
	}
	if err := l.PinClientToNode(); err != nil {
		t.Fatal(err)
	}
	// Other tests may fill the host-wide table: keep this STALE entry
	// from the garbage collector.
	for _, fam := range []string{"ipv4", "ipv6"} {
		if err := l.Node.Sysctl("net."+fam+".neigh."+lab.NodeClientIf+".gc_stale_time", "3600"); err != nil {
			t.Fatal(err)
		}
	}
	mac, err := l.Client.MAC(lab.ClientIf)
	if err != nil {
		t.Fatal(err)
	}
	nodeMAC, err := l.Node.MAC(lab.NodeClientIf)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Node.SetNeigh(lab.NodeClientIf, client, mac, "stale"); err != nil {
		t.Fatal(err)
	}
	if err := l.Backend.Ping(nodeBackend, 1, 2*time.Second); err != nil {
		t.Fatal(err)
	}
	args := []string{"--stale-threshold", threshold.String(), "--tracer", "xmit", "--tracer.interval", "200ms",
		"--tracer.window", "500ms", "--tracer.period", "2s"} // hooks attached a quarter of the time
	switch datapath {
	case "project":
		args = append(args, "--datapath.interfaces", lab.NodeBackendIf, "--datapath.mode", "legacy")
	case "independent":
		var f *fwd.Forwarder
		if err := l.Node.Do(func() error {
			var err error
			f, err = fwd.Attach(lab.NodeBackendIf, fwd.TC)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
	}
	// What the node sends to resolve the client: in dry-run, only the
	// confirmation's unicast requests to the entry's MAC (counted apart),
	// never a broadcast or multicast one, nor anything from the kernel.
	isResolution := resolutionsFor(client, nodeMAC)
	var toEntry atomic.Int64
	stop, err := l.Node.Capture(lab.NodeClientIf, func(f []byte) bool {
		if !isResolution(f) {
			return false
		}
		if bytes.Equal(f[0:6], mac) {
			toEntry.Add(1)
			return false
		}
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
	sock := sockPath(t)
	a := startAgent(t, l.Node, sock, args...)

	// Healthy: the client talks to the backend for four thresholds; its
	// replies leave through the datapath to its (right) MAC.
	entry := func() control.Entry {
		e, ok := findEntry(statusJSON(t, sock), lab.NodeClientIf, client.String())
		if !ok {
			t.Fatalf("no entry for %s on n0", client)
		}
		return e
	}
	classes := map[string]int{}
	end := time.Now().Add(4 * threshold)
	for time.Now().Before(end) {
		if sent, got, err := l.Client.Echo(backend, 2, 100*time.Millisecond, time.Second); err != nil || got != sent {
			t.Fatalf("healthy client: %d of %d answered (%v)", got, sent, err)
		}
		classes[entry().Class]++
	}
	e := entry()
	t.Logf("healthy for %v: classes seen %v; now %s, evidence %+v", 4*threshold, classes, e.Class, e.Evidence)
	if classes["stuck"] > 0 {
		t.Errorf("a healthy host was classed stuck %d times", classes["stuck"])
	}
	body := a.metrics(t)
	if strings.Contains(body, "neighwatch_stuck_neighbour_info{") {
		t.Errorf("NeighbourEntryStuck's series exist for a healthy host:\n%s", grep(body, "stuck_neighbour_info"))
	}
	if datapath == "kernel" {
		if classes["at-risk"] > 0 || e.Class == "at-risk" || e.BypassPackets > 0 {
			t.Errorf("kernel forwarding: at-risk %d times, %d bypass packets; want neither", classes["at-risk"], e.BypassPackets)
		}
		stop()
		return
	}
	if e.Class != "at-risk" || len(e.Evidence) != 1 || e.Evidence[0].Signal != "bypass" {
		t.Fatalf("healthy host behind a bypassing datapath: class %s, evidence %+v; want at-risk from bypass", e.Class, e.Evidence)
	}
	if v := metricValue(body, `neighwatch_neighbours_at_risk{family="`+e.Family+`",interface="n0"}`); v != "1" {
		t.Errorf("neighwatch_neighbours_at_risk = %q, want 1", v)
	}

	// The client moves behind the node's back and keeps sending.
	newMAC := lab.HostMAC(88, 8)
	if err := l.MoveClientMAC(newMAC); err != nil {
		t.Fatal(err)
	}
	lab.WaitFor(t, 30*time.Second, "the entry to be stuck by its source MAC", func() bool {
		if _, got, err := l.Client.Echo(backend, 2, 100*time.Millisecond, 300*time.Millisecond); err != nil || got != 0 {
			t.Fatalf("%d replies reached the moved client through the stale MAC (%v): the failure does not reproduce", got, err)
		}
		e = entry()
		return e.Class == "stuck"
	})
	var src *control.Signal
	for i := range e.Evidence {
		if e.Evidence[i].Signal == "source-mac" {
			src = &e.Evidence[i]
		}
	}
	if src == nil || src.MAC != newMAC.String() || e.LLAddr != mac.String() {
		t.Errorf("stuck entry at %s with evidence %+v; want source-mac %s", e.LLAddr, e.Evidence, newMAC)
	}
	body = a.metrics(t)
	if !strings.Contains(body, `neighwatch_stuck_neighbour_info{family="`+e.Family+`",interface="n0",ip="`+client.String()+`"`) {
		t.Errorf("NeighbourEntryStuck's series missing for the moved host:\n%s", grep(body, "stuck"))
	}
	// Dry-run: decided, and sent nothing but the confirmation's unicast
	// requests to the entry's MAC; nor did the kernel ask.
	if n := len(stop()); n != 0 {
		t.Errorf("the node sent %d address resolutions for %s that were not to the entry's MAC", n, client)
	}
	if n := toEntry.Load(); n == 0 || n > remediate.ConfirmProbes {
		t.Errorf("the node sent %d unicast requests to the entry's MAC, want 1 to %d (the confirmation)", n, remediate.ConfirmProbes)
	}
}
