package e2e

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/neighwatch/neighwatch/internal/control"
	"github.com/neighwatch/neighwatch/internal/dev/lab"
	"github.com/neighwatch/neighwatch/internal/dev/lab/fwd"
	"golang.org/x/sys/unix"
)

// The precision scenarios: hosts that send from more than one MAC and are
// healthy, and hosts that moved, behind an independent TC
// bpf_fib_lookup() + bpf_redirect() forwarder, with the agent on its
// defaults (dry-run, scope stuck, tracer auto) but for shorter timers. A
// healthy host is never stuck over at least three thresholds, and all its
// replies arrive; a moved one is stuck within the threshold plus one
// period, plus the confirmation (the verify timeout). Every probe the
// agent sends in dry-run is a unicast ARP request to the entry's own MAC.
// Each scenario logs a row of the precision table (README.md).
const (
	precThreshold = 2 * time.Second
	precPeriod    = 2 * time.Second
	precInterval  = 200 * time.Millisecond
	precVerify    = 2 * time.Second // the default --remediation.verify-timeout
)

// precisionAgent runs the agent on the fabric's node with the defaults
// but for the timers.
func precisionAgent(t *testing.T, f *lab.Fabric) (*agentProc, string) {
	t.Helper()
	var fw *fwd.Forwarder
	if err := f.Node.Do(func() (err error) { fw, err = fwd.Attach(lab.NodeBackendIf, fwd.TC); return err }); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fw.Close() })
	sock := sockPath(t)
	a := startAgent(t, f.Node, sock, "--stale-threshold", precThreshold.String(), "--tracer.interval", precInterval.String(),
		"--tracer.window", "1s", "--tracer.period", precPeriod.String())
	return a, sock
}

// probeWatch counts the ARP requests the node sends on the segment: to
// the entry's MAC for its IP (the confirmation), and any other (a
// broadcast, another MAC).
type probeWatch struct {
	unicast, other atomic.Int64
	stop           func() []time.Time
}

func watchProbes(t *testing.T, f *lab.Fabric, ip netip.Addr, entryMAC func() net.HardwareAddr) *probeWatch {
	t.Helper()
	nodeMAC, err := f.Node.MAC(lab.FabricBridge)
	if err != nil {
		t.Fatal(err)
	}
	w := &probeWatch{}
	target := ip.As4()
	stop, err := f.Node.Capture(lab.FabricBridge, func(fr []byte) bool {
		if len(fr) < 42 || binary.BigEndian.Uint16(fr[12:14]) != unix.ETH_P_ARP || !bytes.Equal(fr[6:12], nodeMAC) ||
			binary.BigEndian.Uint16(fr[20:22]) != 1 || !bytes.Equal(fr[38:42], target[:]) {
			return false
		}
		if bytes.Equal(fr[0:6], entryMAC()) {
			w.unicast.Add(1)
		} else {
			w.other.Add(1)
		}
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
	w.stop = stop
	t.Cleanup(func() { w.stop() })
	return w
}

// precisionRun follows one entry while traffic flows: its class over
// time, when it was first stuck, how many replies came back.
type precisionRun struct {
	t        *testing.T
	sock     string
	ip       netip.Addr
	start    time.Time
	mu       sync.Mutex
	timeline []string // "0.0s ok", "2.1s stale-long", ...
	last     string
	stuckAt  time.Duration // since start; -1: never
	sent     int
	got      int
}

func newRun(t *testing.T, sock string, ip netip.Addr) *precisionRun {
	return &precisionRun{t: t, sock: sock, ip: ip, start: time.Now(), stuckAt: -1}
}

// sample reads the entry's class and records a change.
func (r *precisionRun) sample() control.Entry {
	e, ok := findEntry(statusJSON(r.t, r.sock), lab.FabricBridge, r.ip.String())
	if !ok {
		return e
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	at := time.Since(r.start)
	if e.Class != r.last {
		r.timeline = append(r.timeline, fmt.Sprintf("%.1fs %s", at.Seconds(), e.Class))
		r.last = e.Class
	}
	if e.Class == "stuck" && r.stuckAt < 0 {
		r.stuckAt = at
	}
	return e
}

// run samples while traffic() sends, at least once and for d; it
// returns the last entry.
func (r *precisionRun) run(d time.Duration, traffic func() (sent, got int)) control.Entry {
	var e control.Entry
	for end := time.Now().Add(d); ; {
		if traffic != nil {
			s, g := traffic()
			r.sent, r.got = r.sent+s, r.got+g
		}
		e = r.sample()
		if !time.Now().Before(end) {
			return e
		}
	}
}

// echoFrom pings each destination once from ns and counts the replies.
func echoFrom(t *testing.T, ns lab.NS, dsts ...netip.Addr) func() (int, int) {
	return func() (sent, got int) {
		for _, d := range dsts {
			s, g, err := ns.Echo(d, 1, 0, 300*time.Millisecond)
			if err != nil {
				t.Fatal(err)
			}
			sent, got = sent+s, got+g
		}
		return sent, got
	}
}

// confirmations reads the agent's confirmation counts.
func confirmations(t *testing.T, a *agentProc) (answered, unanswered int) {
	body := a.metrics(t)
	answered, _ = strconv.Atoi(metricValue(body, `neighwatch_remediation_confirmations_total{outcome="answered"}`))
	unanswered, _ = strconv.Atoi(metricValue(body, `neighwatch_remediation_confirmations_total{outcome="unanswered"}`))
	return answered, unanswered
}

// healthy checks a healthy scenario over three thresholds and a period
// after its entry turned stale-long, and logs its row. Where the node's
// kernel resolves the host itself (kernelARPs), its own requests are
// among those counted, so only the agent's confirmations say what it
// sent.
func healthy(t *testing.T, name string, a *agentProc, r *precisionRun, w *probeWatch, traffic func() (int, int), wantOther, kernelARPs bool) {
	t.Helper()
	lab.WaitFor(t, 30*time.Second, "the entry stale-long", func() bool {
		s, g := traffic()
		r.sent, r.got = r.sent+s, r.got+g
		c := r.sample().Class
		return c != "ok" && c != ""
	})
	e := r.run(3*precThreshold+precPeriod, traffic)
	ans, unans := confirmations(t, a)
	t.Logf("precision | %s | healthy | %s | never | stuck samples: none | %d/%d replies | confirmations answered %d, unanswered %d; ARP requests to the entry's MAC %d, other %d | other MACs %v",
		name, strings.Join(r.timeline, ", "), r.got, r.sent, ans, unans, w.unicast.Load(), w.other.Load(), e.OtherMACs)
	if r.stuckAt >= 0 {
		t.Errorf("%s: a healthy host was classed stuck %v in: %v", name, r.stuckAt, r.timeline)
	}
	if r.got != r.sent {
		t.Errorf("%s: %d of %d replies arrived: the host was not healthy", name, r.got, r.sent)
	}
	if w.other.Load() != 0 && !kernelARPs {
		t.Errorf("%s: in dry-run the agent sent %d ARP requests that were not to the entry's MAC", name, w.other.Load())
	}
	if wantOther && len(e.OtherMACs) == 0 {
		t.Errorf("%s: the host's other MAC is not remembered: %+v", name, e)
	}
}

// moved checks that an entry whose host is gone from its MAC is stuck
// within the threshold plus one period plus the confirmation, counted
// from from (the entry already stale-long), and logs its row.
func moved(t *testing.T, name string, a *agentProc, r *precisionRun, w *probeWatch, traffic func() (int, int), from time.Time) {
	t.Helper()
	// The promise is the sum; a guest under emulation, which shares the
	// machine's CPUs with the host's suite, runs every timer of it late,
	// so there it is stretched like any other wait (lab.Patience).
	bound := lab.Patience(precThreshold + precPeriod + precInterval + precVerify + time.Second)
	for r.stuckAt < 0 {
		if time.Since(from) > 3*bound {
			t.Fatalf("%s: not stuck %v after the host left its MAC: %v", name, time.Since(from), r.timeline)
		}
		r.run(0, traffic)
	}
	took := r.start.Add(r.stuckAt).Sub(from)
	ans, unans := confirmations(t, a)
	t.Logf("precision | %s | moved | %s | %.1fs after the host left | %d/%d replies | confirmations answered %d, unanswered %d; ARP requests to the entry's MAC %d, other %d",
		name, strings.Join(r.timeline, ", "), took.Seconds(), r.got, r.sent, ans, unans, w.unicast.Load(), w.other.Load())
	if took > bound {
		t.Errorf("%s: stuck %v after the host left its MAC, want within %v", name, took.Round(10*time.Millisecond), bound)
	}
	if w.other.Load() != 0 {
		t.Errorf("%s: in dry-run the agent sent %d ARP requests that were not to the entry's MAC", name, w.other.Load())
	}
}

// pinStale makes the node's entry for ip STALE at mac.
func pinStale(t *testing.T, f *lab.Fabric, ip netip.Addr, mac net.HardwareAddr) {
	t.Helper()
	if err := f.Node.SetNeigh(lab.FabricBridge, ip, mac, "stale"); err != nil {
		t.Fatal(err)
	}
}

// secondMACHost is a host at M1 (c0, its address, answering ARP) with a
// second interface c1 at M2 on the same segment that never answers ARP
// and receives nothing: a balance-tlb bond's second slave. Its packets
// to the backends in via1 leave from M2.
func secondMACHost(t *testing.T, f *lab.Fabric, name string, via1 ...netip.Addr) (h lab.NS, m1, m2 net.HardwareAddr) {
	t.Helper()
	h = f.Host(t, name)
	m1, m2 = lab.HostMAC(1, 0x71), lab.HostMAC(2, 0x71)
	f.Plug(t, h, "c0", m1)
	f.Plug(t, h, "c1", m2)
	h.MustIP(t, "addr", "add", lab.ClientIP.String()+"/24", "dev", "c0")
	h.MustIP(t, "route", "add", "default", "via", lab.NodeClientIP.String(), "dev", "c0")
	if err := h.Sysctl("net.ipv4.conf.c1.arp_ignore", "8"); err != nil {
		t.Fatal(err)
	}
	f.PinNode(t, h, "c0")
	f.PinNode(t, h, "c1")
	for _, d := range via1 {
		h.MustIP(t, "route", "add", d.String()+"/32", "via", lab.NodeClientIP.String(), "dev", "c1", "src", lab.ClientIP.String(), "onlink")
	}
	return h, m1, m2
}

// TestPrecisionSecondMAC: a host whose packets leave partly (or only)
// from a second MAC, as a balance-tlb bond's do, while it answers and
// receives at its own. Never stuck; the other MAC is remembered.
func TestPrecisionSecondMAC(t *testing.T) {
	lab.Require(t)
	t.Parallel()
	for _, tc := range []struct {
		name string
		only bool // every packet from the second MAC
	}{{"both MACs", false}, {"second MAC only", true}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := lab.NewFabric(t, "psm")
			via1 := []netip.Addr{lab.BackendIP2}
			if tc.only {
				via1 = append(via1, lab.BackendIP)
			}
			h, m1, _ := secondMACHost(t, f, "psmh", via1...)
			pinStale(t, f, lab.ClientIP, m1)
			w := watchProbes(t, f, lab.ClientIP, func() net.HardwareAddr { return m1 })
			a, sock := precisionAgent(t, f)
			r := newRun(t, sock, lab.ClientIP)
			healthy(t, "second MAC ("+tc.name+")", a, r, w, echoFrom(t, h, lab.BackendIP, lab.BackendIP2), true, false)
		})
	}
}

// TestPrecisionARPFlux: a host with two NICs on the node's segment,
// both answering ARP for its address (arp_ignore=0, Linux's default), its
// packets to one backend leaving from the second. Never stuck, whichever
// MAC the node's kernel holds; two MACs answering may make it a conflict,
// a warning.
func TestPrecisionARPFlux(t *testing.T) {
	lab.Require(t)
	t.Parallel()
	f := lab.NewFabric(t, "pfx")
	h := f.Host(t, "pfxh")
	m1, m2 := lab.HostMAC(1, 0x72), lab.HostMAC(2, 0x72)
	f.Plug(t, h, "c0", m1)
	f.Plug(t, h, "c1", m2)
	h.MustIP(t, "addr", "add", lab.ClientIP.String()+"/24", "dev", "c0")
	h.MustIP(t, "addr", "add", "10.0.1.3/24", "dev", "c1")
	h.MustIP(t, "route", "add", "default", "via", lab.NodeClientIP.String(), "dev", "c0")
	h.MustIP(t, "route", "add", lab.BackendIP2.String()+"/32", "via", lab.NodeClientIP.String(), "dev", "c1", "src", lab.ClientIP.String())
	for _, k := range []string{"all", "c0", "c1"} {
		if err := h.Sysctl("net.ipv4.conf."+k+".arp_ignore", "0"); err != nil {
			t.Fatal(err)
		}
	}
	// The node resolves the host as a kernel does: by broadcast, which
	// both NICs answer.
	if err := f.Node.Ping(lab.ClientIP, 1, 2*time.Second); err != nil {
		t.Fatal(err)
	}
	entryMAC := func() net.HardwareAddr {
		k, err := f.Node.KernelEntry(lab.FabricBridge, lab.ClientIP)
		if err != nil {
			return nil
		}
		return k.LLAddr
	}
	w := watchProbes(t, f, lab.ClientIP, entryMAC)
	a, sock := precisionAgent(t, f)
	r := newRun(t, sock, lab.ClientIP)
	healthy(t, "ARP flux (two NICs, arp_ignore=0)", a, r, w, echoFrom(t, h, lab.BackendIP, lab.BackendIP2), false, true)
}

// TestPrecisionRouter: an on-link host whose packets reach the node
// through a router on the segment, so they come from the router's MAC;
// the node answers it directly. Never stuck.
func TestPrecisionRouter(t *testing.T) {
	lab.Require(t)
	t.Parallel()
	f := lab.NewFabric(t, "prt")
	h, rt := f.Host(t, "prth"), f.Host(t, "prtr")
	m1, mr := lab.HostMAC(1, 0x73), lab.HostMAC(9, 0x73)
	f.Plug(t, h, "c0", m1)
	f.Plug(t, rt, "r0", mr)
	routerIP := "10.0.1.5"
	h.MustIP(t, "addr", "add", lab.ClientIP.String()+"/24", "dev", "c0")
	rt.MustIP(t, "addr", "add", routerIP+"/24", "dev", "r0")
	h.MustIP(t, "route", "add", "10.0.2.0/24", "via", routerIP)
	rt.MustIP(t, "route", "add", "10.0.2.0/24", "via", lab.NodeClientIP.String())
	for ns, kv := range map[lab.NS][][2]string{
		rt: {{"net.ipv4.ip_forward", "1"}, {"net.ipv4.conf.all.send_redirects", "0"}, {"net.ipv4.conf.r0.send_redirects", "0"}},
		h:  {{"net.ipv4.conf.all.accept_redirects", "0"}, {"net.ipv4.conf.c0.accept_redirects", "0"}},
	} {
		for _, x := range kv {
			if err := ns.Sysctl(x[0], x[1]); err != nil {
				t.Fatal(err)
			}
		}
	}
	f.PinNode(t, h, "c0")
	f.PinNode(t, rt, "r0")
	pinStale(t, f, lab.ClientIP, m1)
	w := watchProbes(t, f, lab.ClientIP, func() net.HardwareAddr { return m1 })
	a, sock := precisionAgent(t, f)
	r := newRun(t, sock, lab.ClientIP)
	healthy(t, "router relaying an on-link host", a, r, w, echoFrom(t, h, lab.BackendIP, lab.BackendIP2), true, false)
}

// TestPrecisionMoved is the control: the host keeps its IP and moves to
// a new MAC behind the node's back. Stuck within the threshold plus one
// period plus the confirmation.
func TestPrecisionMoved(t *testing.T) {
	lab.Require(t)
	t.Parallel()
	f := lab.NewFabric(t, "pmv")
	h := f.Host(t, "pmvh")
	m1 := lab.HostMAC(1, 0x74)
	f.Plug(t, h, "c0", m1)
	h.MustIP(t, "addr", "add", lab.ClientIP.String()+"/24", "dev", "c0")
	h.MustIP(t, "route", "add", "default", "via", lab.NodeClientIP.String())
	f.PinNode(t, h, "c0")
	pinStale(t, f, lab.ClientIP, m1)
	w := watchProbes(t, f, lab.ClientIP, func() net.HardwareAddr { return m1 })
	a, sock := precisionAgent(t, f)
	r := newRun(t, sock, lab.ClientIP)
	traffic := echoFrom(t, h, lab.BackendIP)
	lab.WaitFor(t, 30*time.Second, "the entry stale-long", func() bool {
		traffic()
		c := r.sample().Class
		return c != "ok" && c != ""
	})
	h.MustIP(t, "link", "set", "c0", "address", lab.HostMAC(2, 0x74).String())
	f.PinNode(t, h, "c0")
	left := time.Now()
	moved(t, "moved host", a, r, w, traffic, left)
	if r.got == r.sent {
		t.Errorf("every reply reached the moved host: the failure did not reproduce")
	}
}

// TestPrecisionBlueGreen: the seed's own upgrade. A new VM (M2) takes the
// IP while the old one (M1) still answers there: not stuck while the old
// one answers. The old one then goes away: stuck within the threshold
// plus one period plus the confirmation of the entry turning STALE again
// (an answer to a confirmation makes the kernel hold it REACHABLE for a
// while).
func TestPrecisionBlueGreen(t *testing.T) {
	lab.Require(t)
	t.Parallel()
	f := lab.NewFabric(t, "pbg")
	old, nw := f.Host(t, "pbgo"), f.Host(t, "pbgn")
	m1, m2 := lab.HostMAC(1, 0x75), lab.HostMAC(2, 0x75)
	for i, h := range []lab.NS{old, nw} {
		f.Plug(t, h, "c0", []net.HardwareAddr{m1, m2}[i])
		h.MustIP(t, "addr", "add", lab.ClientIP.String()+"/24", "dev", "c0")
		h.MustIP(t, "route", "add", "default", "via", lab.NodeClientIP.String())
		f.PinNode(t, h, "c0")
	}
	pinStale(t, f, lab.ClientIP, m1)
	w := watchProbes(t, f, lab.ClientIP, func() net.HardwareAddr { return m1 })
	a, sock := precisionAgent(t, f)
	r := newRun(t, sock, lab.ClientIP)
	// The new VM talks (its replies go to the old one meanwhile: that is
	// the upgrade's own overlap, not what neighwatch pages for).
	traffic := func() (int, int) { echoFrom(t, nw, lab.BackendIP)(); return 0, 0 }
	lab.WaitFor(t, 30*time.Second, "the entry stale-long", func() bool {
		traffic()
		c := r.sample().Class
		return c != "ok" && c != ""
	})
	r.run(3*precThreshold+precPeriod, traffic)
	if r.stuckAt >= 0 {
		t.Fatalf("stuck while the old VM still answers at the entry's MAC: %v", r.timeline)
	}
	overlap := strings.Join(r.timeline, ", ")
	old.MustIP(t, "link", "set", "c0", "down") // the old VM shuts down
	gone := time.Now()
	// The kernel held the entry REACHABLE since the old VM's last answer:
	// count from when it is STALE again.
	var stale time.Time
	lab.WaitFor(t, 30*time.Second, "the entry STALE again", func() bool {
		traffic()
		k, err := f.Node.KernelEntry(lab.FabricBridge, lab.ClientIP)
		if err == nil && k.State == 0x04 {
			stale = time.Now()
			return true
		}
		return false
	})
	moved(t, "blue-green: old VM gone", a, r, w, traffic, stale)
	t.Logf("precision | blue-green overlap | healthy while the old VM answers | %s | never", overlap)
	t.Logf("old VM gone %v before its entry was STALE again", stale.Sub(gone).Round(10*time.Millisecond))
}

// keepalived runs keepalived in ns with a VRRP instance for vip on dev,
// until the test ends or the returned stop is called.
func keepalived(t *testing.T, ns lab.NS, dev string, prio int, vip netip.Addr) (stop func()) {
	t.Helper()
	bin := requireProgram(t, "keepalived", "keepalived")
	dir := t.TempDir()
	conf := fmt.Sprintf(`global_defs {
  vrrp_garp_master_delay 1
  vrrp_garp_master_repeat 2
}
vrrp_instance nw {
  state BACKUP
  interface %s
  virtual_router_id 51
  priority %d
  advert_int 1
  virtual_ipaddress {
    %s/24
  }
}
`, dev, prio, vip)
	cfg := filepath.Join(dir, "keepalived.conf")
	if err := os.WriteFile(cfg, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := ns.Command(bin, "--dont-fork", "--log-console", "--vrrp", "--use-file", cfg,
		"--pid", filepath.Join(dir, "k.pid"), "--vrrp_pid", filepath.Join(dir, "v.pid"), "--no-syslog")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	stop = func() {
		once.Do(func() {
			_ = cmd.Process.Signal(unix.SIGTERM)
			done := make(chan struct{})
			go func() { _ = cmd.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				_ = cmd.Process.Kill()
				<-done
			}
		})
	}
	t.Cleanup(func() {
		stop()
		if t.Failed() {
			t.Logf("keepalived in %s:\n%s", ns.Name, out.String())
		}
	})
	return stop
}

// hasAddr reports whether ns holds addr.
func hasAddr(ns lab.NS, addr netip.Addr) bool {
	var has bool
	_ = ns.Do(func() error {
		as, err := net.InterfaceAddrs()
		for _, a := range as {
			if p, err := netip.ParsePrefix(a.String()); err == nil && p.Addr() == addr {
				has = true
			}
		}
		return err
	})
	return has
}

// TestPrecisionVRRP: keepalived (no use_vmac) on two hosts of the
// segment. A failover whose gratuitous ARPs the node never hears (ARP
// suppression) is a real move: the virtual IP is at the backup's own MAC,
// and the entry at the master's is stuck. A failback within the conflict
// window, its gratuitous ARPs heard, is two MACs in turn: not stuck.
func TestPrecisionVRRP(t *testing.T) {
	lab.Require(t)
	requireProgram(t, "keepalived", "keepalived")
	t.Parallel()
	vip := netip.MustParseAddr("10.0.1.100")
	for _, tc := range []struct {
		name     string
		failback bool
	}{{"failover, gratuitous ARP suppressed", false}, {"failback within the conflict window", true}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := lab.NewFabric(t, "pvr")
			f.Node.MustIP(t, "link", "set", lab.FabricBridge, "type", "bridge", "mcast_snooping", "0")
			a, b := f.Host(t, "pvra"), f.Host(t, "pvrb")
			ma, mb := lab.HostMAC(1, 0x76), lab.HostMAC(2, 0x76)
			f.Plug(t, a, "v0", ma)
			f.Plug(t, b, "v0", mb)
			a.MustIP(t, "addr", "add", "10.0.1.11/24", "dev", "v0")
			b.MustIP(t, "addr", "add", "10.0.1.12/24", "dev", "v0")
			f.PinNode(t, a, "v0")
			f.PinNode(t, b, "v0")
			if !tc.failback {
				// ARP suppression, for the backup's gratuitous ARPs for
				// the virtual IP: dropped where they enter the segment
				// (b's port, plugged second). Its answers still pass.
				var sup *fwd.Suppressor
				if err := f.Node.Do(func() (err error) { sup, err = fwd.SuppressGratuitousARP("fp2", vip); return err }); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { sup.Close() })
			}
			stopA := keepalived(t, a, "v0", 150, vip)
			keepalived(t, b, "v0", 100, vip)
			lab.WaitFor(t, 30*time.Second, "the first host master of the virtual IP", func() bool { return hasAddr(a, vip) && !hasAddr(b, vip) })
			route := func(ns lab.NS) {
				ns.MustIP(t, "route", "replace", "10.0.2.0/24", "via", lab.NodeClientIP.String(), "src", vip.String())
			}
			route(a)
			pinStale(t, f, vip, ma)
			w := watchProbes(t, f, vip, func() net.HardwareAddr { return ma })
			ag, sock := precisionAgent(t, f)
			r := newRun(t, sock, vip)
			master := a
			traffic := func() (int, int) { return echoFrom(t, master, lab.BackendIP)() }
			lab.WaitFor(t, 30*time.Second, "the virtual IP's entry stale-long", func() bool {
				traffic()
				c := r.sample().Class
				return c != "ok" && c != ""
			})
			stopA() // priority 0 advertisement: the backup takes over at once
			lab.WaitFor(t, 30*time.Second, "the backup master", func() bool { return hasAddr(b, vip) })
			failover := time.Now()
			route(b)
			master = b
			if !tc.failback {
				moved(t, "VRRP failover, gratuitous ARP suppressed", ag, r, w, traffic, failover)
				return
			}
			// Failback inside the conflict window (5 s): the first host
			// comes back with its higher priority and preempts.
			keepalived(t, a, "v0", 150, vip)
			lab.WaitFor(t, 30*time.Second, "the first host master again", func() bool { return hasAddr(a, vip) && !hasAddr(b, vip) })
			back := time.Since(failover)
			route(a)
			master = a
			healthy(t, fmt.Sprintf("VRRP failback %.1fs after the failover", back.Seconds()), ag, r, w, traffic, false, true)
		})
	}
}

// requireBonding reports whether the kernel has the bonding driver. This
// machine's kernel has none; the kernel matrix's Debian kernels do, and
// run this test there (in a guest, NEIGHWATCH_KERNEL is set and a
// missing driver is a failure).
func requireBonding(t *testing.T, ns lab.NS) {
	t.Helper()
	err := ns.IP("link", "add", "nwbondprobe", "type", "bond")
	if err == nil {
		_ = ns.IP("link", "del", "nwbondprobe")
		return
	}
	if os.Getenv("NEIGHWATCH_KERNEL") != "" && os.Getenv("NEIGHWATCH_KERNEL") != "host" {
		t.Fatalf("the bonding driver is missing in this guest: %v", err)
	}
	// CI too: the matrix's guests run it (make test), this kernel cannot.
	t.Skipf("this kernel has no bonding driver (%v): the kernel matrix runs this test in its guests", err)
}

// TestPrecisionBond: a host bonded in balance-tlb and balance-alb mode
// with the kernel's own driver, two slaves on the segment, talking to
// four backend addresses. Each slave transmits with its own MAC; the
// bond answers and receives at its active slave's (tlb) or hands the node
// one slave's (alb). Never stuck, all replies arrive.
func TestPrecisionBond(t *testing.T) {
	lab.Require(t)
	t.Parallel()
	for _, mode := range []string{"balance-tlb", "balance-alb"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			f := lab.NewFabric(t, "pbd")
			h := f.Host(t, "pbdh")
			requireBonding(t, h)
			m1, m2 := lab.HostMAC(1, 0x77), lab.HostMAC(2, 0x77)
			h.MustIP(t, "link", "add", "bond0", "address", m1.String(), "type", "bond", "mode", mode, "miimon", "100")
			f.Plug(t, h, "s0", m1)
			f.Plug(t, h, "s1", m2)
			for _, s := range []string{"s0", "s1"} {
				h.MustIP(t, "link", "set", s, "down")
				h.MustIP(t, "link", "set", s, "master", "bond0")
			}
			h.MustIP(t, "link", "set", "bond0", "up")
			h.MustIP(t, "addr", "add", lab.ClientIP.String()+"/24", "dev", "bond0")
			h.MustIP(t, "route", "add", "default", "via", lab.NodeClientIP.String())
			f.PinNode(t, h, "bond0")
			backends := []netip.Addr{lab.BackendIP, lab.BackendIP2, netip.MustParseAddr("10.0.2.4"), netip.MustParseAddr("10.0.2.5")}
			for _, b := range backends[2:] {
				f.Backend.MustIP(t, "addr", "add", b.String()+"/24", "dev", lab.BackendIf)
			}
			// The node learns the bond as the kernel does (its ARP).
			if err := f.Node.Ping(lab.ClientIP, 1, 2*time.Second); err != nil {
				t.Fatal(err)
			}
			entryMAC := func() net.HardwareAddr {
				k, err := f.Node.KernelEntry(lab.FabricBridge, lab.ClientIP)
				if err != nil {
					return nil
				}
				return k.LLAddr
			}
			w := watchProbes(t, f, lab.ClientIP, entryMAC)
			// Which MACs the bond sends from, as the node receives them.
			var fromM1, fromM2 atomic.Int64
			stop, err := f.Node.Capture(lab.FabricBridge, func(fr []byte) bool {
				if len(fr) < 34 || binary.BigEndian.Uint16(fr[12:14]) != unix.ETH_P_IP || !bytes.Equal(fr[26:30], lab.ClientIP.AsSlice()) {
					return false
				}
				switch {
				case bytes.Equal(fr[6:12], m1):
					fromM1.Add(1)
				case bytes.Equal(fr[6:12], m2):
					fromM2.Add(1)
				}
				return true
			})
			if err != nil {
				t.Fatal(err)
			}
			defer stop()
			a, sock := precisionAgent(t, f)
			r := newRun(t, sock, lab.ClientIP)
			traffic := echoFrom(t, h, backends...)
			if mode == "balance-tlb" {
				// tlb hands its flows to the less loaded slave when it
				// rebalances, every 10 s of the kernel's clock: talk (and
				// watch the entry) until it has, or the scenario did not
				// happen. A slow guest sends few frames in 10 s.
				lab.WaitFor(t, 40*time.Second, "the tlb bond to send from its second slave", func() bool {
					r.run(0, traffic)
					return fromM2.Load() > 0
				})
			}
			healthy(t, "bond "+mode, a, r, w, traffic, false, true)
			t.Logf("%s: the node received %d frames from %s and %d from %s", mode, fromM1.Load(), m1, fromM2.Load(), m2)
		})
	}
}
