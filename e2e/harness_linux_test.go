package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
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
	"github.com/neighwatch/neighwatch/internal/dev/lab"
	"github.com/neighwatch/neighwatch/internal/dev/manifests"
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
	version, err := manifests.Version("..")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if out, err := exec.Command("go", "build", "-ldflags", "-X github.com/prometheus/common/version.Version="+version, "-o", binPath, "../cmd/neighwatch").CombinedOutput(); err != nil {
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
// counted from their first packet. Under NEIGHWATCH_AS=daemonset or
// systemd (the kernel matrix sets it), the agent runs with only what that
// deployment gives it (deployedAs).
func startAgent(t testing.TB, ns lab.NS, sock string, args ...string) *agentProc {
	t.Helper()
	argv := append([]string{binPath, "agent", "--metrics.listen", metricsAddr, "--control.socket", sock, "--log.level", "debug"}, args...)
	if refuse := os.Getenv("NEIGHWATCH_REFUSE_PROGRAMS"); refuse != "" {
		// The kernel matrix's blind control: the agent with its counting
		// taken away must fail the tests that need it (nwkernels, the
		// "blind" step).
		argv = append(argv, "--debug.refuse-programs", refuse)
	}
	if p, ok := deployedAs(t); ok {
		argv = p.Wrap(argv...)
	}
	a := runAgentCmd(t, ns, sock, ns.Command(argv[0], argv[1:]...))
	waitReady(t, a)
	if code, _, err := ns.HTTPGet("http://" + metricsAddr + "/readyz/tracer"); err == nil && code != http.StatusNotFound {
		a.waitPart(t, "tracer")
	}
	return a
}

// deployedAs returns the deployment NEIGHWATCH_AS names (daemonset or
// systemd), read from the repository's own manifests; ok is false when it
// is not set (the agent runs as root).
func deployedAs(t testing.TB) (manifests.Privileges, bool) {
	t.Helper()
	var (
		p   manifests.Privileges
		err error
	)
	switch as := os.Getenv("NEIGHWATCH_AS"); as {
	case "", "root":
		return p, false
	case "daemonset":
		p, err = manifests.DaemonSetPrivileges("..")
	case "systemd":
		p, err = manifests.SystemdPrivileges("..")
	default:
		t.Fatalf("NEIGHWATCH_AS=%q: want daemonset, systemd or root", as)
	}
	if err != nil {
		t.Fatal(err)
	}
	return p, true
}

// waitPart waits until the agent reports one part ready (/readyz/PART).
// The tracer's part is the kernel verifying a dozen programs: about a
// second here, 3 minutes in a 7.3 guest under emulation with four agents
// loading at once and the host's suite beside it (seen under flakehunt).
func (a *agentProc) waitPart(t testing.TB, part string) {
	t.Helper()
	lab.WaitFor(t, 2*time.Minute, "part "+part+" of the agent to be ready", func() bool {
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
