package e2e

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/neighwatch/neighwatch/internal/dev/lab"
)

// enableBPFStats turns on the kernel's per-program run counts until the test ends. It takes the
// kernel's reference-counted switch (BPF_ENABLE_STATS) rather than writing
// the sysctl, so two holders never turn it off under each other, and it
// goes back off by itself when the last one lets go.
func enableBPFStats(t *testing.T) {
	t.Helper()
	c, err := ebpf.EnableStats(unix.BPF_STATS_RUN_TIME)
	if err != nil {
		t.Fatalf("enable BPF statistics: %v", err)
	}
	// The sysctl keeps reading what was last written to it, not whether
	// statistics are on: programRuns finds out from the counts instead.
	t.Cleanup(func() { c.Close() })
}

// labPackets sums the packets the lab's interfaces transmitted (every one
// of them passes net_dev_start_xmit) and the node received on n0 (where
// the source-MAC program attaches).
func labPackets(t *testing.T, l *lab.Lab) (tx, rxN0 uint64) {
	t.Helper()
	for _, d := range []struct {
		ns  lab.NS
		dev string
	}{{l.Client, lab.ClientIf}, {l.Node, lab.NodeClientIf}, {l.Node, lab.NodeBackendIf}, {l.Backend, lab.BackendIf}} {
		rx, txd, err := d.ns.LinkStats(d.dev)
		if err != nil {
			t.Fatal(err)
		}
		tx += txd
		if d.dev == lab.NodeClientIf {
			rxN0 = rx
		}
	}
	return tx, rxN0
}

func programRuns(t *testing.T, a *agentProc) (xmit, source float64) {
	t.Helper()
	body := a.metrics(t)
	v := func(p string) float64 {
		s := metricValue(body, `neighwatch_tracer_program_runs_total{program="`+p+`"}`)
		if s == "" {
			t.Fatalf("no run count for %s: is kernel.bpf_stats_enabled on?\n%s", p, grep(body, "program_runs"))
		}
		f, _ := strconv.ParseFloat(s, 64)
		return f
	}
	return v("tr_xmit"), v("tr_source")
}

// TestPerPacketRunsOnlyWhenNeeded counts the tracer's per-packet program
// runs with the kernel's own statistics while traffic flows through the
// lab's legacy datapath (runs per packet the lab's interfaces sent, or n0
// received, for the source-MAC program): with no STALE entry in the agent's namespace,
// none (at most 0.02 per packet); with a stale-long bypassed entry, at
// most 1.2 times the share of the time the agent says its hooks were
// attached plus 0.02 per packet, that share well under half (the configured duty is a
// tenth: a busy machine stretches windows, never to half the period),
// and bypass evidence still gathered.
func TestPerPacketRunsOnlyWhenNeeded(t *testing.T) {
	lab.Require(t)
	enableBPFStats(t)
	l := lab.New(t, "pps")
	// IPv4 only: IPv6 would give the node STALE link-local entries of its
	// own (router and multicast listener traffic) that the test does not
	// control.
	for _, ns := range []lab.NS{l.Client, l.Node, l.Backend} {
		if err := ns.Sysctl("net.ipv6.conf.all.disable_ipv6", "1"); err != nil {
			t.Fatal(err)
		}
	}
	n0mac, _ := l.Node.MAC(lab.NodeClientIf)
	cmac, _ := l.Client.MAC(lab.ClientIf)
	bmac, _ := l.Backend.MAC(lab.BackendIf)
	n1mac, _ := l.Node.MAC(lab.NodeBackendIf)
	for _, e := range []struct {
		ns  lab.NS
		dev string
		ip  string
		mac string
		nud string
	}{
		{l.Node, lab.NodeClientIf, lab.ClientIP.String(), cmac.String(), "permanent"},
		{l.Node, lab.NodeBackendIf, lab.BackendIP.String(), bmac.String(), "permanent"},
		{l.Backend, lab.BackendIf, lab.NodeBackendIP.String(), n1mac.String(), "permanent"},
		{l.Client, lab.ClientIf, lab.NodeClientIP.String(), n0mac.String(), "permanent"},
	} {
		e.ns.MustIP(t, "neigh", "replace", e.ip, "lladdr", e.mac, "dev", e.dev, "nud", e.nud)
	}
	const window, period = 250 * time.Millisecond, 2500 * time.Millisecond
	const duty = float64(window) / float64(period)
	sock := sockPath(t)
	a := startAgent(t, l.Node, sock, "--interfaces", "n0,n1", "--stale-threshold", "1s", "--tracer", "xmit", "--tracer.interval", "200ms",
		"--tracer.window", window.String(), "--tracer.period", period.String(),
		"--datapath.interfaces", lab.NodeBackendIf, "--datapath.mode", "legacy")
	for _, e := range statusJSON(t, sock) {
		if e.State == "stale" {
			t.Fatalf("the node has a STALE entry before the first measurement: %+v", e)
		}
	}
	// The agent exports run counts once any of its programs has one (a
	// process holding statistics on is not visible otherwise): a
	// neighbour update runs the update tracepoint's program.
	lab.WaitFor(t, 10*time.Second, "a tracer program counted by the kernel", func() bool {
		l.Node.MustIP(t, "neigh", "replace", lab.ClientIP.String(), "lladdr", cmac.String(), "dev", lab.NodeClientIf, "nud", "permanent")
		return metricValue(a.metrics(t), `neighwatch_tracer_program_runs_total{program="tr_xmit"}`) != ""
	})
	// The transmit hook runs for every packet of the host, other tests'
	// too: a UDP flood of 20,000 packets a second through the node keeps
	// the lab's own packets the overwhelming majority; echo requests keep
	// the bypassed replies flowing.
	attachedSeconds := func() float64 {
		t.Helper()
		v := metricValue(a.metrics(t), "neighwatch_tracer_hooks_attached_seconds_total")
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			t.Fatalf("neighwatch_tracer_hooks_attached_seconds_total: %q: %v", v, err)
		}
		return f
	}
	// measure returns the programs' runs per packet and the share of the
	// measurement the agent kept its per-packet hooks attached.
	measure := func(what string, d time.Duration) (perTx, perRx, attached float64) {
		t.Helper()
		x0, s0 := programRuns(t, a)
		tx0, rx0 := labPackets(t, l)
		a0, start := attachedSeconds(), time.Now()
		flood := make(chan error, 1)
		go func() {
			_, err := l.Client.Flood(lab.BackendIP, 9, d, 20000)
			flood <- err
		}()
		n := int(d / (2 * time.Millisecond))
		if sent, got, err := l.Client.Echo(lab.BackendIP, n, 2*time.Millisecond, time.Second); err != nil || got < sent*9/10 {
			t.Fatalf("%s: %d of %d echo requests answered (%v)", what, got, sent, err)
		}
		if err := <-flood; err != nil {
			t.Fatal(err)
		}
		x1, s1 := programRuns(t, a)
		tx1, rx1 := labPackets(t, l)
		attached = (attachedSeconds() - a0) / time.Since(start).Seconds()
		perTx, perRx = (x1-x0)/float64(tx1-tx0), (s1-s0)/float64(rx1-rx0)
		t.Logf("%s: %d packets sent and %d received by n0; tr_xmit ran %.0f times (%.4f per packet), tr_source %.0f (%.4f); hooks attached %.3f of the time",
			what, tx1-tx0, rx1-rx0, x1-x0, perTx, s1-s0, perRx, attached)
		return perTx, perRx, attached
	}
	if x, s, _ := measure("no STALE entry", 3*time.Second); x > 0.02 || s > 0.02 {
		t.Errorf("with no STALE entry the per-packet programs ran %.4f and %.4f times per packet, want <= 0.02", x, s)
	}
	if v := metricValue(a.metrics(t), "neighwatch_tracer_hooks_attached_seconds_total"); v != "0" {
		t.Errorf("hooks attached for %ss with no STALE entry", v)
	}

	// The client's entry goes STALE; the legacy datapath keeps sending the
	// replies to it: stale-long and bypassed after a second.
	l.Node.MustIP(t, "neigh", "replace", lab.ClientIP.String(), "lladdr", cmac.String(), "dev", lab.NodeClientIf, "nud", "stale")
	lab.WaitFor(t, 30*time.Second, "the client's entry to be at-risk", func() bool {
		_ = l.Client.Ping(lab.BackendIP, 2, time.Second)
		e, _ := findEntry(statusJSON(t, sock), lab.NodeClientIf, lab.ClientIP.String())
		return e.Class == "at-risk"
	})
	before, _ := findEntry(statusJSON(t, sock), lab.NodeClientIf, lab.ClientIP.String())
	x, s, att := measure("a stale-long bypassed entry", 8*period)
	if att <= 0 || att >= 0.5 {
		t.Errorf("with a stale-long entry the agent kept its hooks attached %.3f of the time, want some and under half (configured duty %.2f)", att, duty)
	}
	// Packets are not spread evenly over time (the flood's sender is
	// scheduled too): a fifth over the attached share, plus 0.02.
	if lim := att*1.2 + 0.02; x > lim || s > lim {
		t.Errorf("with a stale-long entry the per-packet programs ran %.4f and %.4f times per packet, want <= %.3f (1.2 times the share of the time the hooks were attached, + 0.02)", x, s, lim)
	}
	if x == 0 || s == 0 {
		t.Errorf("with a stale-long entry the per-packet programs never ran (%.0f, %.0f): nothing sampled", x, s)
	}
	after, _ := findEntry(statusJSON(t, sock), lab.NodeClientIf, lab.ClientIP.String())
	if after.BypassPackets <= before.BypassPackets || after.Class != "at-risk" {
		t.Errorf("bypass evidence not gathered while sampling: %d -> %d packets, class %s", before.BypassPackets, after.BypassPackets, after.Class)
	}
	body := a.metrics(t)
	t.Logf("hooks attached for %ss in all", metricValue(body, "neighwatch_tracer_hooks_attached_seconds_total"))
	if !strings.Contains(body, "neighwatch_tracer_hooks_attached ") {
		t.Error("no neighwatch_tracer_hooks_attached")
	}
}
