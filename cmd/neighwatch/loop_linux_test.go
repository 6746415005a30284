package main

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/neighwatch/neighwatch/internal/control"
	"github.com/neighwatch/neighwatch/internal/lab"
	"github.com/neighwatch/neighwatch/internal/lab/fwd"
)

// TestBypassedHostFoundAndRepaired is the loop neighwatch exists for, as
// the kernel matrix runs it on every kernel: forwarders that are not the
// project's datapath (a TC one and an XDP one, bpf_fib_lookup() +
// bpf_redirect()) send the backend's replies to the client's STALE entry;
// the agent runs its tracer on the default, auto.
//   - Healthy, the client is never stuck; it is at-risk wherever the
//     running tracer mode counts that forwarder's bypass packets (xmit:
//     TC; fentry: TC and XDP), and the test says which mode that was.
//   - The client moves to a new MAC (no ARP reaches the node) and keeps
//     sending: its own packets make the entry stuck within the threshold
//     plus one tracer period.
//   - `remediation on` at runtime brings the traffic back.
func TestBypassedHostFoundAndRepaired(t *testing.T) {
	lab.Require(t)
	t.Parallel()
	for _, kind := range []fwd.Kind{fwd.TC, fwd.XDP} {
		for _, v6 := range []bool{false, true} {
			name := string(kind) + "/ipv4"
			if v6 {
				name = string(kind) + "/ipv6"
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				testLoop(t, kind, v6)
			})
		}
	}
}

func testLoop(t *testing.T, kind fwd.Kind, v6 bool) {
	const (
		threshold = 2 * time.Second
		period    = 2 * time.Second
		interval  = 200 * time.Millisecond
	)
	m := newMovedClient(t, "loop", v6)
	var f *fwd.Forwarder
	if err := m.Node.Do(func() (err error) { f, err = fwd.Attach(lab.NodeBackendIf, kind); return err }); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	sock := sockPath(t)
	a := startAgent(t, m.Node, sock, "--stale-threshold", threshold.String(), "--tracer.interval", interval.String(),
		"--tracer.window", period.String(), "--tracer.period", period.String())
	m.agent = a
	var tst control.TracerStatus
	if err := control.NewClient(sock).Get(context.Background(), "/v1/tracer", &tst); err != nil {
		t.Fatal(err)
	}
	xdpCounted := false
	for _, f := range tst.Features {
		xdpCounted = xdpCounted || (f.Feature == "xdp-bypass" && f.Working)
	}
	wantAtRisk := kind == fwd.TC || xdpCounted
	entry := func() control.Entry {
		e, ok := findEntry(statusJSON(t, sock), lab.NodeClientIf, m.ip.String())
		if !ok {
			t.Fatalf("no entry for %s on %s", m.ip, lab.NodeClientIf)
		}
		return e
	}

	// Healthy for twice the threshold.
	classes := map[string]int{}
	end := time.Now().Add(2*threshold + period)
	for time.Now().Before(end) {
		if sent, got, err := m.Client.Echo(m.backend, 2, 100*time.Millisecond, lab.Patience(time.Second)); err != nil || got != sent {
			t.Fatalf("healthy client: %d of %d answered (%v)", got, sent, err)
		}
		classes[entry().Class]++
	}
	if wantAtRisk {
		lab.WaitFor(t, 2*period, "the healthy host to be at-risk", func() bool {
			_ = m.Client.Ping(m.backend, 1, time.Second)
			return entry().Class == "at-risk"
		})
	}
	e := entry()
	t.Logf("tracer mode %s (xdp-bypass counted: %v): healthy behind the %s forwarder, classes %v, bypass packets %d",
		tst.Mode, xdpCounted, kind, classes, e.BypassPackets)
	if classes["stuck"] > 0 || e.Class == "stuck" {
		t.Fatalf("a healthy host was classed stuck (%v)", classes)
	}
	if !wantAtRisk && e.Class == "at-risk" {
		t.Errorf("at-risk behind %s in %s mode, which cannot count that bypass", kind, tst.Mode)
	}

	// The move: the client keeps sending, its replies black-hole.
	m.move(t)
	moved := time.Now()
	for entry().Class != "stuck" {
		if time.Since(moved) > lab.Patience(threshold+period+10*time.Second) {
			t.Fatalf("not stuck %v after the move: %+v", time.Since(moved), entry())
		}
		if _, got, err := m.Client.Echo(m.backend, 2, 100*time.Millisecond, 300*time.Millisecond); err != nil || got != 0 {
			t.Fatalf("%d replies reached the moved client through the stale MAC (%v): the failure does not reproduce", got, err)
		}
	}
	took := time.Since(moved)
	// The promise: within the threshold plus one period (the entry was
	// stale-long already), plus what observing it costs here.
	if bound := threshold + period + interval + lab.Patience(time.Second); took > bound {
		t.Errorf("stuck %v after the move, want within %v", took.Round(10*time.Millisecond), bound)
	}

	// Remediation on, at runtime.
	var st control.RemediationStatus
	if err := control.NewClient(sock).Post(context.Background(), "/v1/remediation", control.RemediationRequest{Mode: "on"}, &st); err != nil {
		t.Fatal(err)
	}
	back := m.waitTraffic(t, lab.Patience(15*time.Second))
	k := m.kernelEntry(t)
	if !strings.EqualFold(k.LLAddr, m.newMAC.String()) {
		t.Errorf("kernel entry at %s after the repair, want %s", k.LLAddr, m.newMAC)
	}
	t.Logf("stuck %v after the move; traffic back %v after remediation on; kernel entry %s %v",
		took.Round(10*time.Millisecond), back.Round(10*time.Millisecond), k.LLAddr, k.State)
}

// kernelKeepsManaged asks the kernel whether it keeps managed neighbours:
// it adds one in ns and reads it back (kernels before 5.16 drop the flag
// without an error).
func kernelKeepsManaged(t *testing.T, ns lab.NS) bool {
	t.Helper()
	if err := ns.IP("neigh", "replace", "192.0.2.77", "dev", lab.NodeClientIf, "managed"); err != nil {
		// ip(8) refuses the keyword only when the kernel rejects it.
		t.Logf("ip neigh ... managed: %v", err)
		return false
	}
	out, err := ns.IPOutput("-d", "neigh", "show", "192.0.2.77", "dev", lab.NodeClientIf)
	if err != nil {
		t.Fatal(err)
	}
	_ = ns.IP("neigh", "del", "192.0.2.77", "dev", lab.NodeClientIf)
	return strings.Contains(out, "managed")
}

// TestManagedCapabilityNamed: with remediation on and the manage strategy
// asked for, the agent says in one log line and in its metrics whether
// the kernel keeps managed neighbours, as the kernel itself answers: on
// 5.10 it does not, and manage is skipped.
func TestManagedCapabilityNamed(t *testing.T) {
	lab.Require(t)
	t.Parallel()
	l := lab.New(t, "mcap")
	kernel := kernelKeepsManaged(t, l.Node)
	sock := sockPath(t)
	a := startAgent(t, l.Node, sock, "--tracer", "off", "--remediation", "on", "--remediation.strategies", "manage,probe")
	body := a.metrics(t)
	want := "0"
	if kernel {
		want = "1"
	}
	for _, series := range []string{`neighwatch_manage_supported`, `neighwatch_detection_working{feature="managed",interface="n0"}`} {
		if v := metricValue(body, series); v != want {
			t.Errorf("%s = %q; the kernel keeps managed neighbours: %v", series, v, kernel)
		}
	}
	lines := 0
	for _, line := range strings.Split(a.logs(), "\n") {
		if strings.Contains(line, "managed neighbours unavailable") {
			lines++
		}
	}
	if (lines == 1) == kernel || lines > 1 {
		t.Errorf("%d log lines say managed neighbours are unavailable; the kernel keeps them: %v\n%s", lines, kernel, a.logs())
	}
	t.Logf("kernel keeps managed neighbours: %v; neighwatch_manage_supported %s", kernel, want)
}

// TestTableEqualsKernelFromStart: while the agent starts, the node keeps
// creating entries the kernel announces to nobody (a datagram to a new
// on-link address makes an INCOMPLETE entry; netlink hears of it only
// when it fails, seconds later). One second after the tracer is ready,
// the table must hold every entry the kernel has: those created before
// the first dump come with it, those after the neigh_create hook through
// it, and those in between through a second dump once the hook is there.
func TestTableEqualsKernelFromStart(t *testing.T) {
	lab.Require(t)
	t.Parallel()
	ns := lab.NewNS(t, "hole")
	for _, args := range [][]string{
		{"link", "add", "h0", "type", "veth", "peer", "name", "h1"},
		{"link", "set", "h0", "up"}, {"link", "set", "h1", "up"},
		{"addr", "add", "10.77.0.1/16", "dev", "h0"},
	} {
		ns.MustIP(t, args...)
	}
	var c *net.UDPConn
	if err := ns.Do(func() (err error) { c, err = net.ListenUDP("udp4", nil); return err }); err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	stop := make(chan struct{})
	created := make(chan int, 1)
	go func() {
		i := 0
		defer func() { created <- i }()
		for ; i < 400; i++ {
			select {
			case <-stop:
				return
			default:
			}
			to := &net.UDPAddr{IP: net.IPv4(10, 77, byte(1+i/250), byte(1+i%250)), Port: 9}
			_, _ = c.WriteToUDP([]byte("x"), to)
			time.Sleep(10 * time.Millisecond)
		}
	}()
	sock := sockPath(t)
	startAgent(t, ns, sock, "--tracer", "xmit")
	close(stop)
	n := <-created
	time.Sleep(time.Second)
	entries, err := ns.Neighbours()
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, e := range statusJSON(t, sock) {
		have[e.Interface+" "+e.IP] = true
	}
	var missing []string
	for _, e := range entries {
		if !have[e.Dev+" "+e.Dst] {
			missing = append(missing, e.Dst+" "+strings.Join(e.State, ","))
		}
	}
	t.Logf("%d entries created while the agent started; the kernel holds %d, the agent %d", n, len(entries), len(have))
	if len(missing) > 0 {
		t.Errorf("1 s after the tracer was ready, the table lacks %d of the kernel's %d entries: %v", len(missing), len(entries), missing)
	}
}
