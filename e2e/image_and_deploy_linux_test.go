package e2e

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/neighwatch/neighwatch/internal/dev/lab"
	"github.com/neighwatch/neighwatch/internal/dev/manifests"
	corev1 "k8s.io/api/core/v1"
)

// TestVersionFromOnePlace: `neighwatch version` and build_info show the
// VERSION file.
func TestVersionFromOnePlace(t *testing.T) {
	v, err := manifests.Version("..")
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(binPath, "version").Output()
	if err != nil || !strings.HasPrefix(string(out), "neighwatch "+v+" ") {
		t.Fatalf("neighwatch version: %q (%v), want version %s", out, err, v)
	}
	// Built with go build alone (no -X for the revision): the revision
	// comes from what the toolchain recorded of the git work tree.
	// -buildvcs=true because some machines (this CI's) turn it off in
	// GOFLAGS; go build's default, auto, records it in a git checkout.
	head, err := exec.Command("git", "-C", "..", "rev-parse", "HEAD").Output()
	if err != nil {
		t.Fatalf("git rev-parse HEAD: %v (the tests run in a git checkout)", err)
	}
	plain := filepath.Join(t.TempDir(), "neighwatch")
	if b, err := exec.Command("go", "build", "-buildvcs=true", "-o", plain, "../cmd/neighwatch").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, b)
	}
	out, err = exec.Command(plain, "version").Output()
	if want := "(revision " + string(head[:7]); err != nil || !strings.Contains(string(out), want) {
		t.Errorf("go build alone: neighwatch version: %q (%v), want %s...", out, err, want)
	}
	// make build sets promu's fields in prometheus/common/version: the
	// branch and the build date reach `neighwatch version`.
	branch, err := exec.Command("git", "-C", "..", "rev-parse", "--abbrev-ref", "HEAD").Output()
	if err != nil {
		t.Fatal(err)
	}
	made := filepath.Join(t.TempDir(), "neighwatch")
	if b, err := exec.Command("make", "-C", "..", "build", "BIN="+made).CombinedOutput(); err != nil {
		t.Fatalf("make build: %v\n%s", err, b)
	}
	out, err = exec.Command(made, "version").Output()
	if want := "branch " + strings.TrimSpace(string(branch)) + ", built "; err != nil || !strings.Contains(string(out), want) {
		t.Errorf("make build: neighwatch version: %q (%v), want %s...", out, err, want)
	}
}

// requirePodman fails in CI and skips elsewhere when podman is missing.
func requirePodman(t *testing.T) {
	t.Helper()
	lab.Require(t)
	requireProgram(t, "podman", "podman")
}

// buildImage runs make image once per test binary and returns the tag,
// which is the DaemonSet's image.
func buildImage(t *testing.T) string {
	t.Helper()
	imageOnce.Do(func() {
		out, err := exec.Command("make", "-C", "..", "image").CombinedOutput()
		if err != nil {
			imageErr = fmt.Errorf("make image: %v\n%s", err, out)
		}
	})
	if imageErr != nil {
		t.Fatal(imageErr)
	}
	ds, err := manifests.DaemonSet("..")
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
	// AppArmor and SELinux: the options podman takes for them; where the
	// host enforces neither (this one), podman leaves them unused.
	if p := sc.AppArmorProfile; p != nil {
		switch p.Type {
		case corev1.AppArmorProfileTypeUnconfined:
			args = append(args, "--security-opt", "apparmor=unconfined")
		default:
			t.Fatalf("AppArmor profile %+v: teach the test how to pass it to podman", p)
		}
	}
	if o := sc.SELinuxOptions; o != nil && o.Type != "" {
		args = append(args, "--security-opt", "label=type:"+o.Type)
	}
	return args
}

// runImage runs the image in the lab's node namespace under the
// DaemonSet's securityContext and arguments, with the control socket's
// directory mounted where the DaemonSet mounts its hostPath.
func runImage(t *testing.T, l *lab.Lab, seccomp string) (*agentProc, string) {
	t.Helper()
	image := buildImage(t)
	ds, err := manifests.DaemonSet("..")
	if err != nil {
		t.Fatal(err)
	}
	c := ds.Spec.Template.Spec.Containers[0]
	// The DaemonSet's volumes: the run directory (hostPath) becomes a
	// directory here, a ConfigMap its files from the manifest.
	host := t.TempDir()
	var volumes []string
	runDir := ""
	for _, m := range c.VolumeMounts {
		var vol *corev1.Volume
		for i := range ds.Spec.Template.Spec.Volumes {
			if ds.Spec.Template.Spec.Volumes[i].Name == m.Name {
				vol = &ds.Spec.Template.Spec.Volumes[i]
			}
		}
		switch {
		case vol == nil:
			t.Fatalf("volume mount %s has no volume", m.Name)
		case vol.HostPath != nil && m.Name == "run":
			runDir = m.MountPath
			volumes = append(volumes, "-v", host+":"+m.MountPath)
		case vol.ConfigMap != nil:
			dir := t.TempDir()
			for name, body := range configMapData(t, vol.ConfigMap.Name) {
				lab.WriteFile(t, filepath.Join(dir, name), body)
			}
			volumes = append(volumes, "-v", dir+":"+m.MountPath+":ro")
		default:
			t.Fatalf("volume %s: teach the test how to mount it", m.Name)
		}
	}
	if runDir == "" {
		t.Fatal("the DaemonSet mounts no run directory for the control socket")
	}
	name := lab.Unique("nwimg")
	t.Cleanup(func() { _ = exec.Command("podman", "rm", "-f", "--ignore", name).Run() })
	args := []string{"--runtime", "runc", "run", "--rm", "--name", name,
		"--network", "ns:/run/netns/" + l.Node.Name,
		"--ulimit", "nofile=4096:4096", "--ulimit", "nproc=4096:4096"}
	args = append(args, volumes...)
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

// configMapData returns the data of a ConfigMap in deploy/kubernetes.
func configMapData(t *testing.T, name string) map[string]string {
	t.Helper()
	data, err := manifests.ConfigMapData("..", name)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

var (
	imageOnce sync.Once
	imageErr  error
)
