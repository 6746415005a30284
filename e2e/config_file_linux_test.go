package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/neighwatch/neighwatch/internal/control"
	"github.com/neighwatch/neighwatch/internal/dev/lab"
)

// configMapDir lays out a directory as the kubelet mounts a ConfigMap:
// config.yaml -> ..data/config.yaml, ..data -> a timestamped directory,
// swapped atomically by renaming a new ..data symlink over the old one.
type configMapDir struct {
	t   *testing.T
	dir string
	gen int
}

func newConfigMapDir(t *testing.T, body string) *configMapDir {
	c := &configMapDir{t: t, dir: t.TempDir()}
	c.swap(body)
	if err := os.Symlink("..data/config.yaml", filepath.Join(c.dir, "config.yaml")); err != nil {
		t.Fatal(err)
	}
	return c
}

func (c *configMapDir) path() string { return filepath.Join(c.dir, "config.yaml") }

func (c *configMapDir) swap(body string) {
	c.gen++
	ts := filepath.Join(c.dir, "..2026_12_01_"+strings.Repeat("x", c.gen))
	if err := os.Mkdir(ts, 0o755); err != nil {
		c.t.Fatal(err)
	}
	lab.WriteFile(c.t, filepath.Join(ts, "config.yaml"), body)
	tmp := filepath.Join(c.dir, "..data_tmp")
	if err := os.Symlink(filepath.Base(ts), tmp); err != nil {
		c.t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(c.dir, "..data")); err != nil {
		c.t.Fatal(err)
	}
}

func remediationStatus(t *testing.T, sock string) control.RemediationStatus {
	t.Helper()
	out, err := exec.Command(binPath, "remediation", "status", "--json", "--control.socket", sock).Output()
	if err != nil {
		t.Fatalf("remediation status: %v", err)
	}
	var st control.RemediationStatus
	if err := json.Unmarshal(out, &st); err != nil {
		t.Fatal(err)
	}
	return st
}

// TestConfigReload: the agent follows a ConfigMap-style file: remediation
// and the stale threshold apply live when the ..data symlink is swapped;
// a key that needs a restart is named in one line; a runtime switch
// holds until the next reload; a broken file keeps the running
// configuration and the reload metrics say so; SIGHUP reloads.
func TestConfigReload(t *testing.T) {
	lab.Require(t)
	t.Parallel()
	l := lab.New(t, "cfg")
	if err := l.Node.Sysctl("net.ipv4.neigh."+lab.NodeClientIf+".gc_stale_time", "3600"); err != nil {
		t.Fatal(err)
	}
	l.Node.MustIP(t, "neigh", "replace", "10.0.1.60", "lladdr", "02:00:00:00:00:60", "dev", lab.NodeClientIf, "nud", "stale")
	cm := newConfigMapDir(t, "remediation: dry-run\nstale-threshold: 1h\n")
	sock := sockPath(t)
	a := startAgent(t, l.Node, sock, "--config.file", cm.path(), "--tracer", "off")
	class := func() string {
		e, _ := findEntry(statusJSON(t, sock), lab.NodeClientIf, "10.0.1.60")
		return e.Class
	}
	if st := remediationStatus(t, sock); st.Mode != "dry-run" || st.ModeSource != "file" || class() != "ok" {
		t.Fatalf("at start: mode %s from %s, class %s", st.Mode, st.ModeSource, class())
	}

	cm.swap("remediation: \"off\"\nstale-threshold: 1s\nlog.format: json\n")
	lab.WaitFor(t, 30*time.Second, "the swapped ConfigMap applied", func() bool {
		return remediationStatus(t, sock).Mode == "off" && class() == "stale-long"
	})
	if !strings.Contains(a.logs(), "need a restart were not applied: log.format") {
		t.Errorf("the restart-only key is not named:\n%s", grep(a.logs(), "config"))
	}
	if v := metricValue(a.metrics(t), "neighwatch_config_last_reload_successful"); v != "1" {
		t.Errorf("config_last_reload_successful = %q", v)
	}

	out, err := exec.Command(binPath, "remediation", "dry-run", "--control.socket", sock).CombinedOutput()
	if err != nil {
		t.Fatalf("remediation dry-run: %v\n%s", err, out)
	}
	if st := remediationStatus(t, sock); st.Mode != "dry-run" || st.ModeSource != "runtime" {
		t.Errorf("after the runtime switch: %s from %s", st.Mode, st.ModeSource)
	}

	cm.swap("remediation: [\n")
	lab.WaitFor(t, 30*time.Second, "the broken file reported", func() bool {
		return metricValue(a.metrics(t), "neighwatch_config_last_reload_successful") == "0"
	})
	if st := remediationStatus(t, sock); st.Mode != "dry-run" || st.ModeSource != "runtime" || class() != "stale-long" {
		t.Errorf("a broken file changed the running configuration: %s from %s, class %s", st.Mode, st.ModeSource, class())
	}
	if n := strings.Count(a.logs(), "configuration reload failed"); n != 1 {
		t.Errorf("the broken file was reported %d times, want once", n)
	}

	// Fixed in place and SIGHUP: the file's mode replaces the runtime one.
	cm.swap("remediation: \"off\"\nstale-threshold: 1h\n")
	lab.WaitFor(t, 30*time.Second, "the fixed file applied", func() bool {
		return metricValue(a.metrics(t), "neighwatch_config_last_reload_successful") == "1"
	})
	if st := remediationStatus(t, sock); st.Mode != "off" || st.ModeSource != "file" || class() != "ok" {
		t.Errorf("after the fix: %s from %s, class %s", st.Mode, st.ModeSource, class())
	}
	// A runtime switch holds until the next reload; the file does not
	// change again, so only SIGHUP can bring its mode back.
	if out, err := exec.Command(binPath, "remediation", "on", "--control.socket", sock).CombinedOutput(); err != nil {
		t.Fatalf("remediation on: %v\n%s", err, out)
	}
	if st := remediationStatus(t, sock); st.Mode != "on" || st.ModeSource != "runtime" {
		t.Fatalf("after the runtime switch to on: %s from %s", st.Mode, st.ModeSource)
	}
	reloads := reloadCount(a, "SIGHUP")
	if err := a.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	lab.WaitFor(t, 30*time.Second, "SIGHUP's reload", func() bool {
		st := remediationStatus(t, sock)
		return st.Mode == "off" && st.ModeSource == "file"
	})
	// The agent applies a reload, then logs it: wait for the line. Then a
	// barrier, a later reload by a change of the file that changes no
	// value: the loop takes its triggers in turn, so once that one is
	// logged, every reload the SIGHUP made is logged too.
	lab.WaitFor(t, 30*time.Second, "SIGHUP's reload logged", func() bool { return reloadCount(a, "SIGHUP") > reloads })
	changed := reloadCount(a, "file changed")
	cm.swap("remediation: \"off\"\nstale-threshold: 1h\n# a comment: no value changes\n")
	lab.WaitFor(t, 30*time.Second, "the file's reload logged", func() bool { return reloadCount(a, "file changed") > changed })
	if n := reloadCount(a, "SIGHUP"); n != reloads+1 {
		t.Errorf("one SIGHUP logged %d reloads, want 1", n-reloads)
	}
}

// reloadCount counts the reloads a trigger made, as the agent logged them.
func reloadCount(a *agentProc, trigger string) int {
	n := 0
	for _, l := range strings.Split(a.logs(), "\n") {
		if strings.Contains(l, "configuration reloaded") && (strings.Contains(l, "trigger="+trigger+" ") || strings.Contains(l, `trigger="`+trigger+`"`)) {
			n++
		}
	}
	return n
}
