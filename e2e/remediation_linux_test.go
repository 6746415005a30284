package e2e

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net"
	"net/netip"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/neighwatch/neighwatch/internal/control"
	"github.com/neighwatch/neighwatch/internal/dev/lab"
	"golang.org/x/sys/unix"
)

// movedClient is problem.md's failure on a lab: the node's entry for the
// client is STALE at the old MAC and the client moved behind the node's
// back. ipv6 selects the IPv6 version.
type movedClient struct {
	*lab.Lab
	ip             netip.Addr
	backend        netip.Addr
	oldMAC, newMAC net.HardwareAddr
	agent          *agentProc // for its log when something fails
}

func newMovedClient(t *testing.T, prefix string, ipv6 bool) *movedClient {
	t.Helper()
	l := lab.New(t, prefix)
	m := &movedClient{Lab: l, ip: lab.ClientIP, backend: lab.BackendIP}
	if ipv6 {
		m.ip, m.backend = lab.ClientIP6, lab.BackendIP6
	}
	if err := l.PinClientToNode(); err != nil {
		t.Fatal(err)
	}
	// The client's entry must stay STALE: keep it from the periodic
	// garbage collector.
	for _, fam := range []string{"ipv4", "ipv6"} {
		if err := l.Node.Sysctl("net."+fam+".neigh."+lab.NodeClientIf+".gc_stale_time", "3600"); err != nil {
			t.Fatal(err)
		}
	}
	var err error
	if m.oldMAC, err = l.Client.MAC(lab.ClientIf); err != nil {
		t.Fatal(err)
	}
	if err := l.Node.SetNeigh(lab.NodeClientIf, m.ip, m.oldMAC, "stale"); err != nil {
		t.Fatal(err)
	}
	// Let the backend know the node, so replies do not wait on resolution.
	if err := l.Backend.Ping(lab.NodeBackendIP, 1, 2*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := l.Backend.Ping(lab.NodeBackendIP6, 1, 2*time.Second); err != nil {
		t.Fatal(err)
	}
	return m
}

func (m *movedClient) move(t *testing.T) {
	t.Helper()
	m.newMAC = lab.HostMAC(61, 1)
	if err := m.MoveClientMAC(m.newMAC); err != nil {
		t.Fatal(err)
	}
}

// waitTraffic pings until replies come back or d passes; it returns how
// long that took. One request waits 200 ms for its reply (a veth answers
// in well under a millisecond), so the time returned is within 200 ms of
// the repair: a wait of a second per request had used up a second of a
// bound that is itself a few seconds.
func (m *movedClient) waitTraffic(t *testing.T, d time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	for time.Since(start) < d {
		if err := m.Client.Ping(m.backend, 1, 200*time.Millisecond); err == nil {
			return time.Since(start)
		}
	}
	logs := ""
	if m.agent != nil {
		logs = m.agent.logs()
	}
	t.Fatalf("no traffic client <-> backend within %v; node: %v\n%s", d, m.kernelEntryOrErr(), logs)
	return 0
}

func (m *movedClient) kernelEntryOrErr() any {
	e, err := m.Node.Entry(lab.NodeClientIf, m.ip)
	if err != nil {
		return err
	}
	return e
}

func (m *movedClient) kernelEntry(t *testing.T) lab.NeighJSON {
	t.Helper()
	e, err := m.Node.Entry(lab.NodeClientIf, m.ip)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// collectEvents subscribes to the agent's events until the test ends; the
// returned func gives what arrived so far, one JSON object per line as
// 'neighwatch events --json' prints it. It returns once subscribed.
func collectEvents(t *testing.T, sock string) func() string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	stream, err := control.NewClient(sock).OpenEvents(ctx)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	var buf syncBuffer
	done := make(chan struct{})
	go func() {
		defer close(done)
		enc := json.NewEncoder(&buf)
		for {
			ev, err := stream.Next()
			if err != nil {
				return
			}
			_ = enc.Encode(ev)
		}
	}()
	t.Cleanup(func() { cancel(); stream.Close(); <-done })
	return buf.String
}

type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func metricValue(body, series string) string {
	for _, l := range strings.Split(body, "\n") {
		if strings.HasPrefix(l, series+" ") {
			return strings.TrimPrefix(l, series+" ")
		}
	}
	return ""
}

const staleThreshold = 2 * time.Second

// waitAction waits until the agent counts n actions of a strategy with an
// outcome. Traffic can come back before the action is recorded: a probe of
// a disputed entry listens for every answer before it judges.
func (a *agentProc) waitAction(t *testing.T, strategy, outcome string, n int) {
	t.Helper()
	series := fmt.Sprintf(`neighwatch_remediation_actions_total{outcome=%q,strategy=%q}`, outcome, strategy)
	lab.WaitFor(t, 20*time.Second, series+" to reach "+fmt.Sprint(n), func() bool {
		return metricValue(a.metrics(t), series) == fmt.Sprint(n)
	})
}

// remediationArgs run the tracer's per-packet hooks all the time while an
// entry is stale-long (window = period), so tests see evidence at once.
func remediationArgs(extra ...string) []string {
	return append([]string{"--tracer", "xmit", "--tracer.interval", "200ms", "--tracer.window", "1s", "--tracer.period", "1s",
		"--stale-threshold", staleThreshold.String(), "--datapath.interfaces", lab.NodeBackendIf, "--remediation.verify-timeout", "1s"}, extra...)
}

// TestRemediationProbeRepairsMovedClient: the failure, legacy datapath,
// remediation on with probe. Traffic must work again within the stale
// threshold + 3 s and the metrics record one moved action. The IPv6
// version is repaired by NDP probes.
func TestRemediationProbeRepairsMovedClient(t *testing.T) {
	lab.Require(t)
	t.Parallel()
	for _, v6 := range []bool{false, true} {
		name := "ipv4-arp"
		if v6 {
			name = "ipv6-ndp"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			m := newMovedClient(t, "rpr", v6)
			sock := sockPath(t)
			a := startAgent(t, m.Node, sock, remediationArgs("--datapath.mode", "legacy", "--remediation", "on", "--remediation.strategies", "probe")...)
			m.agent = a
			events := collectEvents(t, sock)
			m.move(t)
			took := m.waitTraffic(t, lab.Patience(staleThreshold+3*time.Second))
			a.waitAction(t, "probe", "moved", 1)
			e := m.kernelEntry(t)
			if !strings.EqualFold(e.LLAddr, m.newMAC.String()) {
				t.Errorf("kernel entry at %s, want the new MAC %s", e.LLAddr, m.newMAC)
			}
			body := a.metrics(t)
			if v := metricValue(body, `neighwatch_remediation_actions_total{outcome="moved",strategy="probe"}`); v != "1" {
				t.Errorf("moved probe actions = %q, want 1\n%s", v, grep(body, "remediation_actions_total"))
			}
			if v := metricValue(body, `neighwatch_remediation_detection_to_fix_seconds_count`); v != "1" {
				t.Errorf("detection-to-fix count = %q, want 1", v)
			}
			t.Logf("traffic back after %v; kernel entry %v %s", took.Round(100*time.Millisecond), e.State, e.LLAddr)
			if !strings.Contains(grep(events(), `"cause":"remediation"`), "strategy=probe outcome=moved") {
				t.Errorf("no remediation event with the outcome in the event stream")
			}
			if !strings.Contains(grep(a.logs(), "component=remediation"), "outcome=moved") {
				t.Errorf("the action is not in the log")
			}
			checkMetricsLint(t, body)
		})
	}
}

// TestRemediationKick: kick (NTF_USE) repairs an entry at-risk from bypass
// traffic whose host did not move (the kernel's unicast probe reaches it);
// scope at-risk.
// When the host moved, the kernel's probes go to the old MAC and the entry
// goes FAILED; only the next packet, which the legacy datapath then sends
// through bpf_redirect_neigh (NO_NEIGH), resolves the host afresh (see
// docs/remediation.md). The events must show that detour through FAILED.
func TestRemediationKick(t *testing.T) {
	lab.Require(t)
	t.Parallel()
	for _, moved := range []bool{false, true} {
		name := "host-in-place"
		if moved {
			name = "host-moved"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			m := newMovedClient(t, "rkk", false)
			if err := m.Node.QuickNeighTimers(lab.NodeClientIf); err != nil {
				t.Fatal(err)
			}
			sock := sockPath(t)
			a := startAgent(t, m.Node, sock, remediationArgs("--datapath.mode", "legacy", "--remediation", "on", "--remediation.scope", "at-risk",
				"--remediation.strategies", "kick", "--remediation.kernel-timeout", "4s")...)
			m.agent = a
			events := collectEvents(t, sock)
			if moved {
				m.move(t)
			}
			want := `neighwatch_remediation_actions_total{outcome="fixed",strategy="kick"}`
			if moved {
				want = `neighwatch_remediation_actions_total{outcome="moved",strategy="kick"}`
			}
			deadline := time.Now().Add(15 * time.Second)
			for metricValue(a.metrics(t), want) != "1" {
				if time.Now().After(deadline) {
					t.Fatalf("%s not 1\n%s\n%s", want, grep(a.metrics(t), "remediation_actions_total"), grep(a.logs(), "remediation"))
				}
				_ = m.Client.Ping(m.backend, 1, 1*time.Second) // bypass traffic keeps it stuck
			}
			failed := strings.Contains(grep(events(), `"ip":"10.0.1.2"`), `"to":"failed"`)
			if failed != moved {
				t.Errorf("entry went through FAILED: %v, want %v\n%s", failed, moved, grep(events(), `"ip":"10.0.1.2"`))
			}
			t.Logf("kernel entry after the kick: %v", m.kernelEntryOrErr())
		})
	}
}

// TestRemediationSwapsDatapath: --datapath.mode=auto; the stuck entry with
// bypass traffic makes remediation swap the interface to neigh, and the
// kernel then re-resolves the client.
func TestRemediationSwapsDatapath(t *testing.T) {
	lab.Require(t)
	t.Parallel()
	m := newMovedClient(t, "rsw", false)
	if err := m.Node.QuickNeighTimers(lab.NodeClientIf); err != nil {
		t.Fatal(err)
	}
	sock := sockPath(t)
	a := startAgent(t, m.Node, sock, remediationArgs("--datapath.mode", "auto", "--remediation", "on", "--remediation.strategies", "swap")...)
	m.agent = a
	m.move(t)
	took := m.waitTraffic(t, 15*time.Second)
	body := a.metrics(t)
	for _, want := range []string{
		`neighwatch_datapath_mode{interface="n1",mode="neigh"} 1`,
		`neighwatch_datapath_swaps_total 1`,
	} {
		if !strings.Contains(body, want+"\n") {
			t.Errorf("metrics lack %s", want)
		}
	}
	if !strings.Contains(a.logs(), "datapath swapped to neigh") {
		t.Errorf("the swap was not logged")
	}
	t.Logf("traffic back %v after the move", took.Round(100*time.Millisecond))
}

// TestRemediationDryRunThenOn: dry-run counts would-be actions and leaves
// the kernel alone; 'neighwatch remediation on' repairs without a restart.
func TestRemediationDryRunThenOn(t *testing.T) {
	lab.Require(t)
	t.Parallel()
	m := newMovedClient(t, "rdr", false)
	sock := sockPath(t)
	a := startAgent(t, m.Node, sock, remediationArgs("--datapath.mode", "legacy", "--remediation", "dry-run", "--remediation.strategies", "probe")...)
	m.move(t)
	deadline := time.Now().Add(10 * time.Second)
	for {
		_ = m.Client.Ping(m.backend, 1, 1*time.Second) // keep bypass traffic flowing
		if metricValue(a.metrics(t), `neighwatch_remediation_actions_total{outcome="dry-run",strategy="probe"}`) == "1" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no dry-run action counted\n%s", grep(a.metrics(t), "remediation"))
		}
	}
	time.Sleep(2 * time.Second)
	if e := m.kernelEntry(t); e.State[0] != "STALE" || !strings.EqualFold(e.LLAddr, m.oldMAC.String()) {
		t.Fatalf("dry-run changed the kernel entry: %v %s", e.State, e.LLAddr)
	}
	out, err := exec.Command(binPath, "remediation", "--control.socket", sock, "on").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "mode on") {
		t.Fatalf("neighwatch remediation on: %v\n%s", err, out)
	}
	m.waitTraffic(t, 10*time.Second)
	a.waitAction(t, "probe", "moved", 1)
	if v := metricValue(a.metrics(t), `neighwatch_remediation_mode{mode="on"}`); v != "1" {
		t.Errorf("mode metric on = %q", v)
	}
	out, _ = exec.Command(binPath, "remediation", "--control.socket", sock, "status").CombinedOutput()
	if !strings.Contains(string(out), "probe moved: 1") {
		t.Errorf("remediation status:\n%s", out)
	}
}

// TestRemediationLeavesOwnedEntries: with all-stale, on and flush (the
// bluntest strategy), PERMANENT, NOARP, managed and extern_learn entries
// stay, while a plain STALE entry beside them is flushed.
func TestRemediationLeavesOwnedEntries(t *testing.T) {
	lab.Require(t)
	t.Parallel()
	l := lab.New(t, "rown")
	mac := "02:00:00:00:00:aa"
	l.Node.MustIP(t, "neigh", "add", "10.0.1.60", "lladdr", mac, "dev", lab.NodeClientIf, "nud", "permanent")
	l.Node.MustIP(t, "neigh", "add", "10.0.1.61", "lladdr", mac, "dev", lab.NodeClientIf, "nud", "noarp")
	l.Node.MustIP(t, "neigh", "add", "10.0.1.62", "lladdr", mac, "dev", lab.NodeClientIf, "extern_learn")
	l.Node.MustIP(t, "neigh", "add", "10.0.1.63", "dev", lab.NodeClientIf, "managed")
	l.Node.MustIP(t, "neigh", "add", "10.0.1.64", "lladdr", mac, "dev", lab.NodeClientIf, "nud", "stale")
	sock := sockPath(t)
	a := startAgent(t, l.Node, sock, "--stale-threshold", "1s", "--remediation", "on", "--remediation.scope", "all-stale",
		"--remediation.strategies", "flush", "--tracer", "off")
	lab.WaitFor(t, 10*time.Second, "the plain STALE entry flushed", func() bool {
		_, err := l.Node.Entry(lab.NodeClientIf, netip.MustParseAddr("10.0.1.64"))
		return errors.Is(err, lab.ErrNoEntry)
	})
	time.Sleep(2 * time.Second) // several more sweeps
	for _, ip := range []string{"10.0.1.60", "10.0.1.61", "10.0.1.62", "10.0.1.63"} {
		if _, err := l.Node.Entry(lab.NodeClientIf, netip.MustParseAddr(ip)); err != nil {
			t.Errorf("%s was touched: %v", ip, err)
		}
	}
	for _, ip := range []string{"10.0.1.60", "10.0.1.61", "10.0.1.62", "10.0.1.63"} {
		if strings.Contains(grep(a.logs(), "component=remediation"), "ip="+ip+" ") {
			t.Errorf("remediation acted on %s:\n%s", ip, grep(a.logs(), "component=remediation"))
		}
	}
}

// arpRequestsFrom matches ARP requests sent from src.
func arpRequestsFrom(src net.HardwareAddr) func([]byte) bool {
	return func(f []byte) bool {
		return len(f) >= 42 && binary.BigEndian.Uint16(f[12:14]) == unix.ETH_P_ARP &&
			bytes.Equal(f[6:12], src) && binary.BigEndian.Uint16(f[20:22]) == 1
	}
}

// TestRemediationRateBound: 10,000 STALE entries in scope (all-stale,
// probe): the ARP requests the node sends per second never exceed what
// --remediation.rate allows, and status answers meanwhile with every
// entry.
func TestRemediationRateBound(t *testing.T) {
	lab.Require(t)
	lab.RaiseGCThresh(t, 40000)
	l := lab.New(t, "rrt")
	const n, ratePerSec = 10000, 10
	lines := make([]string, n)
	for i := range lines {
		lines[i] = fmt.Sprintf("neigh add %s lladdr %s dev %s nud stale", lab.HostIP(50, i), lab.HostMAC(i, 7), lab.NodeClientIf)
	}
	if err := l.Node.Batch(lines); err != nil {
		t.Fatal(err)
	}
	nodeMAC, _ := l.Node.MAC(lab.NodeClientIf)
	stop, err := l.Node.Capture(lab.NodeClientIf, arpRequestsFrom(nodeMAC))
	if err != nil {
		t.Fatal(err)
	}
	sock := sockPath(t)
	begin := time.Now() // the agent's rate limiters are made after this
	a := startAgent(t, l.Node, sock, "--stale-threshold", "1s", "--remediation", "on", "--remediation.scope", "all-stale",
		"--remediation.strategies", "probe", "--remediation.rate", fmt.Sprint(ratePerSec), "--remediation.interface-rate", fmt.Sprint(ratePerSec),
		"--remediation.verify-timeout", "200ms", "--remediation.concurrency", "16", "--tracer", "off")
	window := 6 * time.Second
	end := time.Now().Add(window)
	for time.Now().Before(end) {
		if entries := statusJSON(t, sock); len(entries) < n {
			t.Errorf("status listed %d entries, want at least %d", len(entries), n)
		}
		time.Sleep(500 * time.Millisecond)
	}
	// Every request the agent sent until now was captured (the capture
	// began before the agent).
	times := stop()
	elapsed := time.Since(begin)
	// One action sends at most two probes, and the bucket grants rate
	// tokens a second plus a burst of one, from its making (after begin)
	// on. Sends that lag behind their tokens (a busy CPU) bunch up within
	// a second, but never add to the total: the bound is on the total,
	// which a limiter that does not work (16 workers, about 64 probes a
	// second here) exceeds by far.
	limit := 2 * (1 + int(math.Ceil(ratePerSec*elapsed.Seconds())))
	worst := lab.MaxInWindow(times, time.Second)
	if len(times) < ratePerSec {
		t.Fatalf("only %d probes in %v: remediation did not run\n%s\n%s", len(times), window, grep(a.metrics(t), "remediation"), a.logs())
	}
	if len(times) > limit {
		t.Fatalf("%d ARP requests in %v since the agent started, limit %d (rate %d/s, two probes per action, a burst of one)", len(times), elapsed.Round(time.Millisecond), limit, ratePerSec)
	}
	body := a.metrics(t)
	t.Logf("%d probes in %v (limit %d), at most %d in any second; dropped %s, rate-limited %s", len(times), elapsed.Round(time.Millisecond), limit, worst,
		metricValue(body, "neighwatch_remediation_dropped_total"), metricValue(body, "neighwatch_remediation_rate_limited_total"))
}

// TestRemediationScopeAtRisk: the moved client of issue 8 with remediation
// on and scope at-risk: repaired, outcome moved.
func TestRemediationScopeAtRisk(t *testing.T) {
	lab.Require(t)
	t.Parallel()
	m := newMovedClient(t, "rar", false)
	sock := sockPath(t)
	a := startAgent(t, m.Node, sock, remediationArgs("--datapath.mode", "legacy", "--remediation", "on",
		"--remediation.scope", "at-risk", "--remediation.strategies", "probe")...)
	m.agent = a
	m.move(t)
	took := m.waitTraffic(t, 20*time.Second)
	a.waitAction(t, "probe", "moved", 1)
	body := a.metrics(t)
	if v := metricValue(body, `neighwatch_remediation_actions_total{outcome="moved",strategy="probe"}`); v != "1" {
		t.Errorf("moved probe actions = %q, want 1\n%s", v, grep(body, "remediation_actions_total"))
	}
	if e := m.kernelEntry(t); !strings.EqualFold(e.LLAddr, m.newMAC.String()) {
		t.Errorf("kernel entry at %s, want the new MAC %s", e.LLAddr, m.newMAC)
	}
	t.Logf("traffic back %v after the move", took.Round(100*time.Millisecond))
}
