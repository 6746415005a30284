package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/neighwatch/neighwatch/internal/dev/lab"
)

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
	// The unprivileged agent's own directory: the agent refuses a socket
	// directory that other users may write.
	if err := os.Chown(dir, 65534, 65534); err != nil {
		t.Fatal(err)
	}
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
