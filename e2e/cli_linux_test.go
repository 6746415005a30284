package e2e

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/neighwatch/neighwatch/internal/control"
	"github.com/neighwatch/neighwatch/internal/dev/lab"
)

// TestHelpExitsZero: --help of the command and of every subcommand, and
// of nwlab, prints a usage line and exits 0.
func TestHelpExitsZero(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"help"}, {"agent", "--help"}, {"status", "--help"}, {"events", "--help"},
		{"datapath", "--help"}, {"remediation", "--help"}, {"remediation", "status", "--help"}} {
		out, err := exec.Command(binPath, args...).Output()
		if err != nil {
			t.Errorf("neighwatch %s: %v", strings.Join(args, " "), err)
			continue
		}
		if !strings.HasPrefix(string(out), "usage: neighwatch") {
			t.Errorf("neighwatch %s prints no usage line:\n%s", strings.Join(args, " "), out)
		}
		if args[0] != "--help" && args[0] != "help" && !strings.Contains(string(out), "-control.socket") {
			t.Errorf("neighwatch %s lists no flags:\n%s", strings.Join(args, " "), out)
		}
	}
	nwlab := filepath.Join(t.TempDir(), "nwlab")
	if out, err := exec.Command("go", "build", "-o", nwlab, "../internal/dev/lab/cmd/nwlab").CombinedOutput(); err != nil {
		t.Fatalf("build nwlab: %v\n%s", err, out)
	}
	if out, err := exec.Command(nwlab, "--help").Output(); err != nil || !strings.HasPrefix(string(out), "usage: nwlab") {
		t.Errorf("nwlab --help: %v\n%s", err, out)
	}
	// A wrong flag is still a usage error (exit 2), in one line.
	var ee *exec.ExitError
	out, err := exec.Command(binPath, "status", "--no-such-flag").CombinedOutput()
	if !errors.As(err, &ee) || ee.ExitCode() != 2 || strings.Count(strings.TrimSpace(string(out)), "\n") != 0 {
		t.Errorf("status --no-such-flag: %v, %q; want exit 2 and one line", err, out)
	}
}

// TestCLIFlagsAnywhere: flags after the subcommand's words, status
// filters and its family column, --json for datapath and remediation
// status, and the landing page at /.
func TestCLIFlagsAnywhere(t *testing.T) {
	lab.Require(t)
	t.Parallel()
	l := lab.New(t, "cli")
	l.Node.MustIP(t, "neigh", "replace", "10.0.1.50", "lladdr", "02:00:00:00:00:50", "dev", lab.NodeClientIf, "nud", "permanent")
	l.Node.MustIP(t, "neigh", "replace", "fd00:1::50", "lladdr", "02:00:00:00:00:51", "dev", lab.NodeClientIf, "nud", "permanent")
	sock := sockPath(t)
	a := startAgent(t, l.Node, sock, "--tracer", "off", "--datapath.interfaces", lab.NodeBackendIf)

	run := func(args ...string) []byte {
		t.Helper()
		out, err := exec.Command(binPath, args...).Output()
		if err != nil {
			t.Fatalf("neighwatch %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return out
	}
	var st control.RemediationStatus
	if err := json.Unmarshal(run("remediation", "status", "--control.socket", sock, "--json"), &st); err != nil || st.Mode != "dry-run" {
		t.Errorf("remediation status --json after the word: %+v %v", st, err)
	}
	var modes map[string]string
	if err := json.Unmarshal(run("datapath", "--json", "--control.socket", sock), &modes); err != nil || modes[lab.NodeBackendIf] != "legacy" {
		t.Errorf("datapath --json: %v %v", modes, err)
	}
	var entries []control.Entry
	if err := json.Unmarshal(run("status", "--json", "--control.socket", sock, "--state", "permanent", "--interface", lab.NodeClientIf), &entries); err != nil {
		t.Fatal(err)
	}
	if len(entries) != 2 {
		t.Fatalf("status --state permanent --interface n0: %d entries, want the 2 made here: %+v", len(entries), entries)
	}
	text := string(run("status", "--control.socket", sock, "--state", "permanent", "--interface", lab.NodeClientIf))
	if !strings.Contains(text, "FAMILY") || !strings.Contains(text, "inet6") {
		t.Errorf("status shows no family column:\n%s", text)
	}
	if out := run("status", "--control.socket", sock, "--class", "stuck", "--json"); !bytes.Equal(bytes.TrimSpace(out), []byte("[]")) {
		t.Errorf("status --class stuck on a healthy lab: %s", out)
	}
	code, body, err := a.ns.HTTPGet("http://" + metricsAddr + "/")
	if err != nil || code != 200 || !strings.Contains(body, "neighwatch") || !strings.Contains(body, `href="/metrics"`) {
		t.Errorf("landing page: %d %v\n%s", code, err, body)
	}
}

// TestMakeInstall: make install into a temporary root, then
// systemd-analyze verify of the unit there says nothing.
func TestMakeInstall(t *testing.T) {
	requireProgram(t, "systemd-analyze", "systemd")
	root := t.TempDir()
	if out, err := exec.Command("make", "-C", "..", "install", "DESTDIR="+root).CombinedOutput(); err != nil {
		t.Fatalf("make install: %v\n%s", err, out)
	}
	for _, f := range []string{"usr/local/bin/neighwatch", "etc/systemd/system/neighwatch.service", "etc/default/neighwatch"} {
		if _, err := os.Stat(filepath.Join(root, f)); err != nil {
			t.Errorf("make install did not install %s", f)
		}
	}
	// verify resolves the unit's dependencies in the root: give it the
	// system's units.
	if err := os.MkdirAll(filepath.Join(root, "usr/lib"), 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("cp", "-a", "/usr/lib/systemd", filepath.Join(root, "usr/lib/")).CombinedOutput(); err != nil {
		t.Fatalf("copy units: %v\n%s", err, out)
	}
	out, err := exec.Command("systemd-analyze", "verify", "--root="+root, filepath.Join(root, "etc/systemd/system/neighwatch.service")).CombinedOutput()
	if err != nil || len(bytes.TrimSpace(out)) != 0 {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
}
