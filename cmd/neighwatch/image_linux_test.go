package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/neighwatch/neighwatch/internal/lab"
	"github.com/neighwatch/neighwatch/internal/manifests"
	corev1 "k8s.io/api/core/v1"
)

// TestVersionFromOnePlace: `neighwatch version` and build_info show the
// VERSION file.
func TestVersionFromOnePlace(t *testing.T) {
	v, err := manifests.Version("../..")
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(binPath, "version").Output()
	if err != nil || !strings.HasPrefix(string(out), "neighwatch "+v+" ") {
		t.Fatalf("neighwatch version: %q (%v), want version %s", out, err, v)
	}
}

// requirePodman fails in CI and skips elsewhere when podman is missing.
func requirePodman(t *testing.T) {
	t.Helper()
	lab.Require(t)
	if _, err := exec.LookPath("podman"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("podman missing in CI: scripts/install-deps.sh installs it")
		}
		t.Skip("podman not installed")
	}
}

// buildImage runs make image once per test binary and returns the tag,
// which is the DaemonSet's image.
func buildImage(t *testing.T) string {
	t.Helper()
	imageOnce.Do(func() {
		out, err := exec.Command("make", "-C", "../..", "image").CombinedOutput()
		if err != nil {
			imageErr = fmt.Errorf("make image: %v\n%s", err, out)
		}
	})
	if imageErr != nil {
		t.Fatal(imageErr)
	}
	ds, err := manifests.DaemonSet("../..")
	if err != nil {
		t.Fatal(err)
	}
	return ds.Spec.Template.Spec.Containers[0].Image
}

// podmanArgs turns the DaemonSet container's securityContext into podman
// flags: the same capabilities, read-only root, privilege escalation and
// seccomp profile. seccomp overrides the profile when not empty.
func podmanArgs(t *testing.T, c corev1.Container, seccomp string) []string {
	t.Helper()
	sc := c.SecurityContext
	if sc == nil || sc.Capabilities == nil {
		t.Fatal("the DaemonSet's container has no securityContext capabilities")
	}
	var args []string
	for _, d := range sc.Capabilities.Drop {
		args = append(args, "--cap-drop", string(d))
	}
	for _, a := range sc.Capabilities.Add {
		args = append(args, "--cap-add", "CAP_"+string(a))
	}
	if sc.ReadOnlyRootFilesystem != nil && *sc.ReadOnlyRootFilesystem {
		args = append(args, "--read-only")
	}
	if sc.AllowPrivilegeEscalation != nil && !*sc.AllowPrivilegeEscalation {
		args = append(args, "--security-opt", "no-new-privileges")
	}
	if seccomp == "" {
		switch p := sc.SeccompProfile; {
		case p == nil || p.Type == corev1.SeccompProfileTypeRuntimeDefault:
		case p.Type == corev1.SeccompProfileTypeUnconfined:
			seccomp = "unconfined"
		default:
			t.Fatalf("seccomp profile %+v: teach the test how to pass it to podman", p)
		}
	}
	if seccomp != "" && seccomp != "default" {
		args = append(args, "--security-opt", "seccomp="+seccomp)
	}
	return args
}

// runImage runs the image in the lab's node namespace under the
// DaemonSet's securityContext and arguments, with the control socket's
// directory mounted where the DaemonSet mounts its hostPath.
func runImage(t *testing.T, l *lab.Lab, seccomp string) (*agentProc, string) {
	t.Helper()
	image := buildImage(t)
	ds, err := manifests.DaemonSet("../..")
	if err != nil {
		t.Fatal(err)
	}
	c := ds.Spec.Template.Spec.Containers[0]
	var runDir string
	for _, m := range c.VolumeMounts {
		if m.Name == "run" {
			runDir = m.MountPath
		}
	}
	if runDir == "" {
		t.Fatal("the DaemonSet mounts no run directory for the control socket")
	}
	host := t.TempDir()
	name := lab.Unique("nwimg")
	t.Cleanup(func() { _ = exec.Command("podman", "rm", "-f", "--ignore", name).Run() })
	args := []string{"--runtime", "runc", "run", "--rm", "--name", name,
		"--network", "ns:/run/netns/" + l.Node.Name,
		"--ulimit", "nofile=4096:4096", "--ulimit", "nproc=4096:4096",
		"-v", host + ":" + runDir}
	args = append(args, podmanArgs(t, c, seccomp)...)
	args = append(args, image)
	args = append(args, c.Args...)
	a := runAgentCmd(t, l.Node, filepath.Join(host, "neighwatch.sock"), exec.Command("podman", args...))
	waitReady(t, a)
	return a, filepath.Join(host, "neighwatch.sock")
}

// TestImageRunsUnderDaemonSetContext builds the image and runs it as the
// DaemonSet does: it gets ready, its tracer runs, and the lab's entries
// are in its metrics and status.
func TestImageRunsUnderDaemonSetContext(t *testing.T) {
	requirePodman(t)
	l := lab.New(t, "img")
	if sent, got, err := l.Client.Echo(lab.BackendIP, 5, 20*time.Millisecond, time.Second); err != nil || got != sent {
		t.Fatalf("lab traffic: %d of %d answered (%v)", got, sent, err)
	}
	a, sock := runImage(t, l, "")
	a.waitPart(t, "tracer")
	body := a.metrics(t)
	if v := metricValue(body, `neighwatch_tracer_mode{mode="off"}`); v != "0" {
		t.Errorf("tracer mode off = %q under the DaemonSet's context\n%s", v, a.logs())
	}
	for _, dev := range []string{lab.NodeClientIf, lab.NodeBackendIf} {
		if !strings.Contains(body, `interface="`+dev+`"`) {
			t.Errorf("no series for the lab's interface %s in /metrics", dev)
		}
	}
	if _, ok := findEntry(statusJSON(t, sock), lab.NodeClientIf, lab.ClientIP.String()); !ok {
		t.Errorf("status has no entry for the lab's client %s", lab.ClientIP)
	}
}

// TestImageUnderDefaultSeccompNamesIt: under the runtime's default
// seccomp profile bpf(2) is refused, and the log line says seccomp, not
// MEMLOCK; the agent runs on without its tracer.
func TestImageUnderDefaultSeccompNamesIt(t *testing.T) {
	requirePodman(t)
	l := lab.New(t, "sec")
	a, _ := runImage(t, l, "default")
	lab.WaitFor(t, 30*time.Second, "the tracer to be disabled", func() bool {
		return strings.Contains(a.logs(), "tracer disabled")
	})
	logs := a.logs()
	if !strings.Contains(logs, "a seccomp filter is on") || strings.Contains(logs, "MEMLOCK may be too low") {
		t.Fatalf("the refusal does not name seccomp, or still blames MEMLOCK:\n%s", logs)
	}
	if v := metricValue(a.metrics(t), `neighwatch_tracer_mode{mode="off"}`); v != "1" {
		t.Errorf("tracer mode off = %q with bpf(2) refused", v)
	}
}

var (
	imageOnce sync.Once
	imageErr  error
)
