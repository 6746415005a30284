package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/neighwatch/neighwatch/internal/control"
	"github.com/neighwatch/neighwatch/internal/lab"
	"github.com/neighwatch/neighwatch/internal/manifests"
)

// binPath is the neighwatch binary the integration tests run, built once.
var binPath string

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) == "watch" {
		watchHelper()
	}
	// The kernel matrix runs this test binary inside guests that have no
	// Go toolchain to build with: it passes the binary, built on the host.
	if bin := os.Getenv("NEIGHWATCH_BIN"); bin != "" {
		binPath = bin
		os.Exit(m.Run())
	}
	dir, err := os.MkdirTemp("", "neighwatch-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	// World-readable so tests can run it as an unprivileged user too.
	_ = os.Chmod(dir, 0o755)
	binPath = filepath.Join(dir, "neighwatch")
	// Built as make builds it: the version from the VERSION file.
	version, err := manifests.Version("../..")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if out, err := exec.Command("go", "build", "-ldflags", "-X github.com/neighwatch/neighwatch/metrics.Version="+version, "-o", binPath, ".").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build neighwatch: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// agentProc is a neighwatch agent running in a lab namespace.
type agentProc struct {
	cmd    *exec.Cmd
	ns     lab.NS
	sock   string
	mu     sync.Mutex
	stderr bytes.Buffer
	done   chan error
}

func (a *agentProc) Write(p []byte) (int, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.stderr.Write(p)
}

func (a *agentProc) logs() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.stderr.String()
}

const metricsAddr = "127.0.0.1:9947" // each namespace has its own loopback

// startAgent runs the agent in ns and waits for /readyz and, when the
// agent runs a tracer, for the tracer too: tests then see bypass traffic
// counted from their first packet.
func startAgent(t testing.TB, ns lab.NS, sock string, args ...string) *agentProc {
	t.Helper()
	full := append([]string{"agent", "--metrics.listen", metricsAddr, "--control.socket", sock, "--log.level", "debug"}, args...)
	a := runAgentCmd(t, ns, sock, ns.Command(binPath, full...))
	waitReady(t, a)
	if code, _, err := ns.HTTPGet("http://" + metricsAddr + "/readyz/tracer"); err == nil && code != http.StatusNotFound {
		a.waitPart(t, "tracer")
	}
	return a
}

// waitPart waits until the agent reports one part ready (/readyz/PART).
func (a *agentProc) waitPart(t testing.TB, part string) {
	t.Helper()
	lab.WaitFor(t, 30*time.Second, "part "+part+" of the agent to be ready", func() bool {
		code, _, err := a.ns.HTTPGet("http://" + metricsAddr + "/readyz/" + part)
		return err == nil && code == 200
	})
}

// runAgentCmd starts an agent command (run in ns) and stops it when the
// test ends.
func runAgentCmd(t testing.TB, ns lab.NS, sock string, cmd *exec.Cmd) *agentProc {
	t.Helper()
	a := &agentProc{ns: ns, sock: sock, done: make(chan error, 1), cmd: cmd}
	cmd.Stderr, cmd.Stdout = a, a
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { a.done <- cmd.Wait() }()
	t.Cleanup(func() {
		a.stop(t)
		if t.Failed() {
			t.Logf("agent log:\n%s", a.logs())
		}
	})
	return a
}

// stop sends SIGTERM and requires a clean exit.
func (a *agentProc) stop(t testing.TB) {
	t.Helper()
	if a.cmd.ProcessState != nil {
		return
	}
	_ = a.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-a.done:
		a.done <- err
		if err != nil {
			t.Errorf("agent did not exit cleanly on SIGTERM: %v\n%s", err, a.logs())
		}
	case <-time.After(lab.Patience(10 * time.Second)):
		_ = a.cmd.Process.Kill()
		t.Errorf("agent ignored SIGTERM for 10s\n%s", a.logs())
	}
}

func (a *agentProc) metrics(t testing.TB) string {
	t.Helper()
	code, body, err := a.ns.HTTPGet("http://" + metricsAddr + "/metrics")
	if err != nil || code != 200 {
		t.Fatalf("scrape: %d %v", code, err)
	}
	return body
}

// statusJSON runs `neighwatch status --json` like a user would.
func statusJSON(t testing.TB, sock string) []control.Entry {
	t.Helper()
	out, err := exec.Command(binPath, "status", "--json", "--control.socket", sock).Output()
	if err != nil {
		t.Fatalf("neighwatch status --json: %v", err)
	}
	var entries []control.Entry
	if err := json.Unmarshal(out, &entries); err != nil {
		t.Fatalf("status --json is not a JSON array of entries: %v\n%s", err, out)
	}
	return entries
}

func findEntry(entries []control.Entry, dev, ip string) (control.Entry, bool) {
	for _, e := range entries {
		if e.Interface == dev && e.IP == ip {
			return e, true
		}
	}
	return control.Entry{}, false
}

func sockPath(t testing.TB) string { return filepath.Join(t.TempDir(), "nw.sock") }

func TestStateAgeFromCacheinfoSurvivesRestart(t *testing.T) {
	lab.Require(t)
	t.Parallel()
	l := lab.New(t, "age")
	l.Node.MustIP(t, "neigh", "add", "10.0.1.77", "lladdr", "02:00:00:00:00:77", "dev", lab.NodeClientIf, "nud", "stale")
	time.Sleep(10 * time.Second)
	sock := sockPath(t)
	a := startAgent(t, l.Node, sock)
	e, ok := findEntry(statusJSON(t, sock), lab.NodeClientIf, "10.0.1.77")
	if !ok {
		t.Fatal("10.0.1.77 missing from status --json")
	}
	if e.State != "stale" || e.StateAgeSeconds < 10 {
		t.Fatalf("first agent: state %s age %.2fs, want stale and >= 10s", e.State, e.StateAgeSeconds)
	}
	first := e.StateAgeSeconds
	a.stop(t)

	startAgent(t, l.Node, sock)
	e, ok = findEntry(statusJSON(t, sock), lab.NodeClientIf, "10.0.1.77")
	if !ok {
		t.Fatal("10.0.1.77 missing after restart")
	}
	if e.StateAgeSeconds < first {
		t.Fatalf("after restart the age went from %.2fs back to %.2fs", first, e.StateAgeSeconds)
	}
	t.Logf("state age %.2fs, after restart %.2fs", first, e.StateAgeSeconds)
}

// TestMismatchBecomesStuck is the black-hole signature: the client moves
// to a new MAC, its gratuitous ARP reaches the listener but not the
// node's table (drop_gratuitous_arp=1), so the node still sends to the old
// MAC. The entry must be reported mismatched, then stuck once past the
// threshold, in status and metrics.
func TestMismatchBecomesStuck(t *testing.T) {
	lab.Require(t)
	t.Parallel()
	l := lab.New(t, "mis")
	if err := l.PinClientToNode(); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"net.ipv4.conf.all.drop_gratuitous_arp", "net.ipv4.conf." + lab.NodeClientIf + ".drop_gratuitous_arp"} {
		if err := l.Node.Sysctl(k, "1"); err != nil {
			t.Fatal(err)
		}
	}
	oldMAC, err := l.Client.MAC(lab.ClientIf)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Node.SetNeigh(lab.NodeClientIf, lab.ClientIP, oldMAC, "stale"); err != nil {
		t.Fatal(err)
	}
	sock := sockPath(t)
	a := startAgent(t, l.Node, sock, "--stale-threshold", "3s")

	newMAC := lab.HostMAC(42, 9)
	if err := l.MoveClientMAC(newMAC); err != nil {
		t.Fatal(err)
	}
	if err := l.Client.AnnounceARP(lab.ClientIf, lab.ClientIP, newMAC, 2); err != nil {
		t.Fatal(err)
	}
	ke, err := l.Node.Entry(lab.NodeClientIf, lab.ClientIP)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.EqualFold(ke.LLAddr, oldMAC.String()) {
		t.Fatalf("lab broken: the node's kernel entry moved to %s, want it stuck at %s", ke.LLAddr, oldMAC)
	}

	deadline := time.Now().Add(10 * time.Second)
	var e control.Entry
	for {
		e, _ = findEntry(statusJSON(t, sock), lab.NodeClientIf, lab.ClientIP.String())
		if e.Class == "stuck" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("entry not stuck after 10s: %+v\n%s", e, a.logs())
		}
		time.Sleep(200 * time.Millisecond)
	}
	if !e.Mismatch || e.SeenLLAddr != newMAC.String() || e.LLAddr != oldMAC.String() {
		t.Errorf("status: mismatch=%v seen=%s lladdr=%s, want mismatch, seen %s, lladdr %s", e.Mismatch, e.SeenLLAddr, e.LLAddr, newMAC, oldMAC)
	}
	body := a.metrics(t)
	for _, want := range []string{
		`neighwatch_neighbours_stuck{family="inet",interface="n0"} 1`,
		`neighwatch_neighbours_mismatched{family="inet",interface="n0"} 1`,
		fmt.Sprintf(`neighwatch_stuck_neighbour_info{family="inet",interface="n0",ip="10.0.1.2",lladdr="%s",seen_lladdr="%s"} 1`, oldMAC, newMAC),
		`neighwatch_arp_packets_total{interface="n0",kind="gratuitous"} 2`,
		`neighwatch_arp_mismatches_total{interface="n0"} 1`,
	} {
		if !strings.Contains(body, want+"\n") {
			t.Errorf("metrics lack %s", want)
		}
	}
	checkMetricsLint(t, body)
}

// checkMetricsLint runs promtool check metrics on a scrape. promtool must
// be there in CI.
func checkMetricsLint(t *testing.T, body string) {
	t.Helper()
	if _, err := exec.LookPath("promtool"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("promtool missing in CI: install the prometheus package")
		}
		t.Log("promtool not installed: metrics lint skipped")
		return
	}
	cmd := exec.Command("promtool", "check", "metrics")
	cmd.Stdin = strings.NewReader(body)
	out, err := cmd.CombinedOutput()
	if err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Errorf("promtool check metrics: %v\n%s", err, out)
	}
}

func TestEventsJSONAndHealth(t *testing.T) {
	lab.Require(t)
	t.Parallel()
	l := lab.New(t, "evt")
	sock := sockPath(t)
	a := startAgent(t, l.Node, sock)
	for _, p := range []string{"/healthz", "/readyz"} {
		if code, _, err := l.Node.HTTPGet("http://" + metricsAddr + p); err != nil || code != 200 {
			t.Errorf("%s: %d %v", p, code, err)
		}
	}
	ev := exec.Command(binPath, "events", "--json", "--control.socket", sock)
	out, err := ev.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := ev.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ev.Process.Kill(); _ = ev.Wait() }()
	lines := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	// The stream is open once the agent has a subscriber; make changes
	// until one shows up.
	mac := "02:00:00:00:00:99"
	deadline := time.After(lab.Patience(10 * time.Second))
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for i := 0; ; i++ {
		select {
		case line, ok := <-lines:
			if !ok {
				t.Fatalf("events exited\n%s", a.logs())
			}
			var m map[string]any
			if err := json.Unmarshal([]byte(line), &m); err != nil {
				t.Fatalf("event line is not JSON: %q", line)
			}
			for _, k := range []string{"time", "interface", "family", "ip", "from", "to", "lladdr", "cause"} {
				if _, ok := m[k]; !ok {
					t.Errorf("event lacks %q: %s", k, line)
				}
			}
			ts, _ := m["time"].(string)
			if _, err := time.Parse(time.RFC3339Nano, ts); err != nil || !strings.Contains(ts, ".") {
				t.Errorf("time %q is not RFC 3339 with fractions", ts)
			}
			if m["ip"] == "10.0.1.99" && m["interface"] == lab.NodeClientIf && m["cause"] == "netlink" && m["lladdr"] == mac {
				checkMetricsLint(t, a.metrics(t))
				return
			}
		case <-tick.C:
			l.Node.MustIP(t, "neigh", "replace", "10.0.1.99", "lladdr", mac, "dev", lab.NodeClientIf, "nud", []string{"stale", "reachable"}[i%2])
		case <-deadline:
			t.Fatalf("no event for 10.0.1.99 within 10s\n%s", a.logs())
		}
	}
}

// TestUnprivilegedAgent runs the agent as nobody: the netlink mirror and
// metrics work, and each disabled part is named in one log line.
func TestUnprivilegedAgent(t *testing.T) {
	lab.Require(t)
	if _, err := exec.LookPath("setpriv"); err != nil {
		t.Fatal("setpriv (util-linux) is needed to drop privileges")
	}
	t.Parallel()
	ns := lab.NewNS(t, "unp")
	ns.MustIP(t, "link", "add", "d0", "type", "veth", "peer", "name", "d1")
	ns.MustIP(t, "link", "set", "d0", "up")
	ns.MustIP(t, "neigh", "add", "192.0.2.9", "lladdr", "02:00:00:00:00:09", "dev", "d0", "nud", "stale")
	dir, err := os.MkdirTemp("", "nw-unpriv-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	_ = os.Chmod(dir, 0o777)
	sock := filepath.Join(dir, "nw.sock")
	a := runAgentCmd(t, ns, sock, ns.Command("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--inh-caps=-all",
		binPath, "agent", "--metrics.listen", metricsAddr, "--control.socket", sock))
	waitReady(t, a)
	body := a.metrics(t)
	if !strings.Contains(body, `neighwatch_neighbours{family="inet",interface="d0",state="stale"} 1`) {
		t.Errorf("unprivileged agent does not export the stale entry:\n%s", grep(body, "neighwatch_neighbours{"))
	}
	logs := a.logs()
	for _, want := range []string{"ARP listener disabled", "CAP_NET_RAW", "CAP_NET_ADMIN", "tracer disabled: needs CAP_BPF"} {
		if !strings.Contains(logs, want) {
			t.Errorf("log does not say %q:\n%s", want, logs)
		}
	}
}

func waitReady(t testing.TB, a *agentProc) {
	t.Helper()
	lab.WaitFor(t, 60*time.Second, "the agent's /readyz", func() bool {
		select {
		case err := <-a.done:
			a.done <- err
			t.Fatalf("agent exited before ready: %v\n%s", err, a.logs())
		default:
		}
		code, _, err := a.ns.HTTPGet("http://" + metricsAddr + "/readyz")
		return err == nil && code == 200
	})
}

func grep(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

func TestCLIErrors(t *testing.T) {
	t.Parallel()
	missing := filepath.Join(t.TempDir(), "none.sock")
	// A socket file nobody listens on.
	stale := filepath.Join(t.TempDir(), "stale.sock")
	ln, err := net.Listen("unix", stale)
	if err != nil {
		t.Fatal(err)
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	ln.Close()
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{}, 2, "no command"},
		{[]string{"frobnicate"}, 2, "unknown command"},
		{[]string{"agent", "--bogus"}, 2, "flag provided but not defined: -bogus"},
		{[]string{"agent", "--interfaces", "eth(0"}, 2, "bad interface regex"},
		{[]string{"agent", "--stale-threshold", "-5s"}, 2, "--stale-threshold -5s is out of range"},
		{[]string{"agent", "--log.format", "xml"}, 2, "--log.format"},
		{[]string{"agent", "--metrics.listen", "nonsense"}, 2, "--metrics.listen"},
		{[]string{"agent", "--web.config.file", "/nonexistent/web.yml"}, 2, "--web.config.file"},
		{[]string{"status", "--control.socket", missing}, 1, "no agent at"},
		{[]string{"status", "--control.socket", stale}, 1, "connection refused"},
		{[]string{"events", "--json", "--control.socket", missing}, 1, "no agent at"},
		{[]string{"status", "extra"}, 2, "unexpected argument"},
	} {
		cmd := exec.Command(binPath, tc.args...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		}
		msg := stderr.String()
		if code != tc.code || !strings.Contains(msg, tc.want) {
			t.Errorf("neighwatch %v: exit %d, stderr %q; want exit %d mentioning %q", tc.args, code, msg, tc.code, tc.want)
		}
		if len(tc.args) > 0 && strings.Count(strings.TrimSpace(msg), "\n") > 0 {
			t.Errorf("neighwatch %v: error is not one line: %q", tc.args, msg)
		}
	}
}

// TestNDPMismatchBecomesStuck is the IPv6 version of the black-hole
// signature: the client moves and announces itself with an unsolicited
// Neighbor Advertisement that the node's kernel ignores
// (drop_unsolicited_na=1) but the NDP listener sees.
func TestNDPMismatchBecomesStuck(t *testing.T) {
	lab.Require(t)
	t.Parallel()
	l := lab.New(t, "ndm")
	if err := l.PinClientToNode(); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"net.ipv6.conf.all.drop_unsolicited_na", "net.ipv6.conf." + lab.NodeClientIf + ".drop_unsolicited_na"} {
		if err := l.Node.Sysctl(k, "1"); err != nil {
			t.Fatal(err)
		}
	}
	oldMAC, _ := l.Client.MAC(lab.ClientIf)
	if err := l.Node.SetNeigh(lab.NodeClientIf, lab.ClientIP6, oldMAC, "stale"); err != nil {
		t.Fatal(err)
	}
	sock := sockPath(t)
	a := startAgent(t, l.Node, sock, "--stale-threshold", "3s", "--tracer", "off")
	newMAC := lab.HostMAC(43, 9)
	if err := l.MoveClientMAC(newMAC); err != nil {
		t.Fatal(err)
	}
	if err := l.Client.AnnounceNDP(lab.ClientIf, lab.ClientIP6, newMAC); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	var e control.Entry
	for {
		e, _ = findEntry(statusJSON(t, sock), lab.NodeClientIf, lab.ClientIP6.String())
		if e.Class == "stuck" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("IPv6 entry not stuck after 10s: %+v\n%s", e, a.logs())
		}
		time.Sleep(200 * time.Millisecond)
	}
	if !e.Mismatch || e.SeenLLAddr != newMAC.String() || e.LLAddr != oldMAC.String() {
		t.Errorf("status: mismatch=%v seen=%s lladdr=%s", e.Mismatch, e.SeenLLAddr, e.LLAddr)
	}
	body := a.metrics(t)
	if v := metricValue(body, `neighwatch_ndp_packets_total{interface="n0",kind="unsolicited_advertisement"}`); v != "1" {
		t.Errorf("unsolicited advertisements counted: %q, want 1", v)
	}
	checkMetricsLint(t, body)
}
