//go:build cluster

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/neighwatch/neighwatch/internal/control"
	"github.com/neighwatch/neighwatch/internal/dev/cluster"
	"github.com/neighwatch/neighwatch/internal/dev/lab"
	"github.com/neighwatch/neighwatch/internal/dev/manifests"
	corev1 "k8s.io/api/core/v1"
)

// kube is a single-node Kubernetes (internal/dev/cluster) whose node's
// host network is a lab's node namespace: the moved client and the
// backend are on its wire. make test-cluster runs the tests of this
// file, and only those (build tag cluster).
type kube struct {
	*movedClient
	node    *cluster.Node
	tools   cluster.Tools
	helm    map[string]string // "3", "4": the helm executables
	chart   string            // oci://REGISTRY/neighwatch/charts/neighwatch
	version string            // the chart's and the image's
	digest  string            // the published image list's
	ctx     context.Context
	figures *figures
}

// figures are the measurements make test-cluster prints at its end
// (README and BENCHMARKS.md carry them).
type figures struct {
	mu    sync.Mutex
	lines []string
}

func (f *figures) add(t *testing.T, format string, args ...any) {
	t.Helper()
	line := fmt.Sprintf(format, args...)
	t.Log("figure: " + line)
	f.mu.Lock()
	f.lines = append(f.lines, line)
	f.mu.Unlock()
}

// kubePublish publishes the release to the node's registry as make
// publish does (image list, chart, release files, signed), and returns
// the image list's digest.
func (k *kube) publish(t *testing.T) {
	t.Helper()
	bin := t.TempDir()
	cosign, err := manifests.GoInstall(bin, manifests.CosignModule)
	if err != nil {
		t.Fatal(err)
	}
	keys := t.TempDir()
	gen := exec.Command(cosign, "generate-key-pair")
	gen.Dir, gen.Env = keys, append(os.Environ(), "COSIGN_PASSWORD=neighwatch-test")
	if out, err := gen.CombinedOutput(); err != nil {
		t.Fatalf("cosign generate-key-pair: %v\n%s", err, out)
	}
	push := exec.Command("make", "-C", "..", "push", "REGISTRY="+k.node.Registry(), "TLS_VERIFY=false", "COSIGN_KEY="+filepath.Join(keys, "cosign.key"))
	push.Env = append(os.Environ(), "COSIGN_PASSWORD=neighwatch-test")
	if out, err := push.CombinedOutput(); err != nil {
		t.Fatalf("make push: %v\n%s", err, out)
	}
	d, err := os.ReadFile("../bin/publish/image.digest")
	if err != nil {
		t.Fatal(err)
	}
	k.digest = strings.TrimSpace(string(d))
	k.chart = "oci://" + k.node.Registry() + "/neighwatch/charts/neighwatch"
}

// startKube builds the cluster's tools (cached in .cluster), the image,
// a lab whose node is the Kubernetes node, and the cluster; it publishes
// the release to the node's registry. Everything is undone when the test
// ends, and the host checked to be as it was.
func startKube(t *testing.T) *kube {
	t.Helper()
	lab.Require(t)
	requirePodman(t)
	reg := requireProgram(t, "docker-registry", "docker-registry")
	requireProgram(t, "containerd", "containerd")
	k := &kube{ctx: context.Background(), helm: map[string]string{}, figures: &figures{}}
	t.Cleanup(func() {
		k.figures.mu.Lock()
		defer k.figures.mu.Unlock()
		t.Logf("make test-cluster figures:\n  %s", strings.Join(k.figures.lines, "\n  "))
	})
	var err error
	if k.version, err = manifests.Version(".."); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if k.tools, err = cluster.Build("..", "../.cluster", testWriter{t}); err != nil {
		t.Fatal(err)
	}
	k.figures.add(t, "the cluster's tools ready in %v (built, or found in .cluster)", time.Since(start).Round(time.Second))
	for v, module := range map[string]string{"3": manifests.HelmModule, "4": manifests.Helm4Module} {
		if k.helm[v], err = manifests.GoInstall(t.TempDir(), module); err != nil {
			t.Fatal(err)
		}
	}
	// The image before the node: podman's storage is the host's, and
	// the node must leave the host as it found it.
	buildImage(t)
	// The host-wide neighbour thresholds, for the 100,000 entries, held
	// from before the node (the lock file is the host's too).
	raise := lab.HoldGCThresh(t)
	raise(262144)
	k.movedClient = newMovedClient(t, "k8s", false)
	dir, err := os.MkdirTemp("", "nwk8s-")
	if err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	k.node, err = cluster.Start(k.ctx, cluster.Options{Tools: k.tools, Registry: reg, NetNS: k.Node.Name, Dir: dir,
		Subnet: netip.MustParsePrefix("10.254.0.0/30"), Log: testWriter{t}})
	if err != nil {
		os.RemoveAll(dir)
		t.Fatal(err)
	}
	k.figures.add(t, "the node (etcd to Ready): %v", time.Since(start).Round(time.Second))
	t.Cleanup(func() {
		if t.Failed() {
			for _, part := range []string{"kubelet", "containerd", "kube-apiserver", "kube-controller-manager", "kube-scheduler"} {
				t.Logf("%s, last lines:\n%s", part, k.node.Logs(part, 40))
			}
		}
		if err := k.node.Close(); err != nil {
			t.Errorf("tearing the node down: %v", err)
		}
	})
	k.installCRDs(t)
	start = time.Now()
	k.publish(t)
	k.figures.add(t, "make push to the node's registry: %v", time.Since(start).Round(time.Second))
	return k
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// operatorModule carries prometheus-operator's CRDs: with them the API
// server serves monitoring.coreos.com, and the chart renders its
// PodMonitor and PrometheusRule, which the API server validates.
const operatorModule = "github.com/prometheus-operator/prometheus-operator@v0.85.0"

func (k *kube) installCRDs(t *testing.T) {
	t.Helper()
	out, err := exec.Command("go", "mod", "download", "-json", operatorModule).Output()
	if err != nil {
		t.Fatalf("go mod download %s: %v", operatorModule, err)
	}
	var mod struct{ Dir string }
	if err := json.Unmarshal(out, &mod); err != nil || mod.Dir == "" {
		t.Fatalf("go mod download %s: %v: %s", operatorModule, err, out)
	}
	if _, err := k.kubectl(nil, "apply", "--server-side", "-f", filepath.Join(mod.Dir, "example/prometheus-operator-crd")); err != nil {
		t.Fatal(err)
	}
	if _, err := k.kubectl(nil, "wait", "--for", "condition=Established", "--timeout", "120s", "crd/podmonitors.monitoring.coreos.com",
		"crd/prometheusrules.monitoring.coreos.com", "crd/servicemonitors.monitoring.coreos.com", "crd/alertmanagerconfigs.monitoring.coreos.com"); err != nil {
		t.Fatal(err)
	}
}

func (k *kube) kubectl(in []byte, args ...string) ([]byte, error) {
	return k.node.Kubectl(k.ctx, in, args...)
}

func (k *kube) mustKubectl(t *testing.T, in []byte, args ...string) []byte {
	t.Helper()
	out, err := k.kubectl(in, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// helmRun runs helm version v ("3" or "4") against the node.
func (k *kube) helmRun(t *testing.T, v string, args ...string) ([]byte, error) {
	t.Helper()
	cmd := exec.Command(k.helm[v], append([]string{"--kubeconfig", k.node.Kubeconfig()}, args...)...)
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+t.TempDir(), "HELM_CONFIG_HOME="+t.TempDir(), "HELM_DATA_HOME="+t.TempDir())
	out, err := cmd.CombinedOutput()
	if err != nil {
		return out, fmt.Errorf("helm %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return out, nil
}

// namespace makes a namespace with labels (Pod Security's).
func (k *kube) namespace(t *testing.T, name string, labels map[string]string) {
	t.Helper()
	ns := corev1.Namespace{}
	ns.APIVersion, ns.Kind, ns.Name, ns.Labels = "v1", "Namespace", name, labels
	b, err := json.Marshal(ns)
	if err != nil {
		t.Fatal(err)
	}
	k.mustKubectl(t, b, "apply", "-f", "-")
	t.Cleanup(func() { _, _ = k.kubectl(nil, "delete", "namespace", name, "--wait=false") })
}

// getJSON reads one object, or a list, into into.
func (k *kube) getJSON(t *testing.T, into any, args ...string) {
	t.Helper()
	out := k.mustKubectl(t, nil, append([]string{"get", "-o", "json"}, args...)...)
	if err := json.Unmarshal(out, into); err != nil {
		t.Fatalf("kubectl get %v: %v", args, err)
	}
}

// agentPods returns the agent's pods in ns, by the chart's selector.
func (k *kube) agentPods(t *testing.T, ns string) []corev1.Pod {
	t.Helper()
	var l corev1.PodList
	k.getJSON(t, &l, "pods", "-n", ns, "-l", "app.kubernetes.io/name=neighwatch")
	return l.Items
}

func podReady(p corev1.Pod) bool {
	if p.DeletionTimestamp != nil {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// waitReadyPod waits for one Ready agent pod in ns other than not (a
// uid), and returns it.
func (k *kube) waitReadyPod(t *testing.T, ns string, limit time.Duration, not string) corev1.Pod {
	t.Helper()
	var ready corev1.Pod
	var seen []corev1.Pod
	deadline := time.Now().Add(lab.Patience(limit))
	for {
		seen = k.agentPods(t, ns)
		for _, p := range seen {
			if podReady(p) && string(p.UID) != not {
				return p
			}
		}
		if time.Now().After(deadline) {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	events, _ := k.kubectl(nil, "get", "events", "-n", ns, "--sort-by", ".lastTimestamp")
	logs, _ := k.kubectl(nil, "logs", "-n", ns, "-l", "app.kubernetes.io/name=neighwatch", "--tail", "30")
	t.Fatalf("no Ready agent pod in %s within %v: %d pods %+v\nevents:\n%s\nlogs:\n%s", ns, lab.Patience(limit), len(seen), podSummary(seen), events, logs)
	return ready
}

func podSummary(pods []corev1.Pod) []string {
	var s []string
	for _, p := range pods {
		line := p.Name + " " + string(p.Status.Phase)
		for _, c := range p.Status.ContainerStatuses {
			line += fmt.Sprintf(" restarts=%d", c.RestartCount)
			if w := c.State.Waiting; w != nil {
				line += " waiting: " + w.Reason + ": " + w.Message
			}
			if x := c.LastTerminationState.Terminated; x != nil {
				line += fmt.Sprintf(" last exit %d %s: %s", x.ExitCode, x.Reason, x.Message)
			}
		}
		s = append(s, line)
	}
	return s
}

// nodePath is a path on the node as its pods' host paths see it.
func (k *kube) nodePath(p string) string {
	return filepath.Join("/proc", strconv.Itoa(k.node.Holder()), "root", p)
}

// sock is the control socket on the node's hostPath, as the host sees
// it (for its mode: a client walks the path component by component and
// does not follow /proc's magic link into the node's mount namespace;
// agentCLI runs the client there).
func (k *kube) sock() string { return k.nodePath("/run/neighwatch/neighwatch.sock") }

// agentCLI runs the neighwatch client in the node's namespaces against
// the socket on the hostPath, as a node-local tool would, and decodes
// its --json output into into.
func (k *kube) agentCLI(t *testing.T, into any, args ...string) error {
	t.Helper()
	argv := append([]string{"--target", strconv.Itoa(k.node.Holder()), "--mount", "--net", "--", binPath}, args...)
	argv = append(argv, "--json", "--control.socket", "/run/neighwatch/neighwatch.sock")
	var stderr bytes.Buffer
	cmd := exec.Command("nsenter", argv...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("neighwatch %s on the node: %v: %s", strings.Join(args, " "), err, bytes.TrimSpace(stderr.Bytes()))
	}
	return json.Unmarshal(out, into)
}

func (k *kube) entries(t *testing.T) []control.Entry {
	t.Helper()
	var es []control.Entry
	if err := k.agentCLI(t, &es, "status"); err != nil {
		t.Fatal(err)
	}
	return es
}

func (k *kube) remediation(t *testing.T) (control.RemediationStatus, error) {
	t.Helper()
	var st control.RemediationStatus
	err := k.agentCLI(t, &st, "remediation", "status")
	return st, err
}

// agentPID finds the agent's process on the host: the one neighwatch
// whose network namespace is the node's.
func (k *kube) agentPID(t *testing.T) int {
	t.Helper()
	node, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/net", k.node.Holder()))
	if err != nil {
		t.Fatal(err)
	}
	var found []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
		ns, _ := os.Readlink(fmt.Sprintf("/proc/%d/ns/net", pid))
		if strings.TrimSpace(string(comm)) == "neighwatch" && ns == node {
			found = append(found, pid)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d neighwatch processes in the node's network namespace, want 1: %v", len(found), found)
	}
	return found[0]
}

// capSet reads a capability set (CapEff, CapPrm...) of a process as
// names.
func capSet(t *testing.T, pid int, set string) []string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		v, ok := strings.CutPrefix(l, set+":\t")
		if !ok {
			continue
		}
		bits, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for i := 0; i < 64; i++ {
			if bits&(1<<i) != 0 {
				names = append(names, capName(i))
			}
		}
		return names
	}
	t.Fatalf("no %s in /proc/%d/status", set, pid)
	return nil
}

// capNames are the capabilities by number, as securityContext names them.
var capNames = []string{"CHOWN", "DAC_OVERRIDE", "DAC_READ_SEARCH", "FOWNER", "FSETID", "KILL", "SETGID", "SETUID", "SETPCAP",
	"LINUX_IMMUTABLE", "NET_BIND_SERVICE", "NET_BROADCAST", "NET_ADMIN", "NET_RAW", "IPC_LOCK", "IPC_OWNER", "SYS_MODULE",
	"SYS_RAWIO", "SYS_CHROOT", "SYS_PTRACE", "SYS_PACCT", "SYS_ADMIN", "SYS_BOOT", "SYS_NICE", "SYS_RESOURCE", "SYS_TIME",
	"SYS_TTY_CONFIG", "MKNOD", "LEASE", "AUDIT_WRITE", "AUDIT_CONTROL", "SETFCAP", "MAC_OVERRIDE", "MAC_ADMIN", "SYSLOG",
	"WAKE_ALARM", "BLOCK_SUSPEND", "AUDIT_READ", "PERFMON", "BPF", "CHECKPOINT_RESTORE"}

func capName(i int) string {
	if i < len(capNames) {
		return capNames[i]
	}
	return fmt.Sprintf("CAP_%d", i)
}

// hostBounding is the capabilities this machine can give a container at
// all: the test's own bounding set (a container's is a subset).
func hostBounding(t *testing.T) []string { return capSet(t, os.Getpid(), "CapBnd") }

// clusterValues are the values an operator of this node writes, as the
// docs/kubernetes.md documents them, plus what the test
// shortens: the stale threshold, the tracer's period, the alerts' for.
func clusterValues(t *testing.T, extra string) string {
	t.Helper()
	v := `# The namespace is labelled for Pod Security by the operator (NOTES).
config:
  stale-threshold: 5s
  tracer.interval: 500ms
  tracer.window: 2s
  tracer.period: 2s
  remediation.verify-timeout: 1s
  # The agent's own datapath on the client's side, so that a rollout
  # shows it detached.
  datapath.interfaces: [n0]
prometheusRule:
  alerts:
    NeighbourEntryStuck: {for: 5s}
    NeighwatchConfigReloadFailed: {for: 5s}
`
	// This machine's bounding set lacks SYS_RESOURCE (the agent needs it
	// only before Linux 5.11): a runtime cannot grant it, and runc fails
	// the container with "unable to apply caps: operation not
	// permitted". The README's troubleshooting names the value.
	if !slices.Contains(hostBounding(t), "SYS_RESOURCE") {
		v += "capabilities: [NET_ADMIN, NET_RAW, BPF, PERFMON]\n"
	}
	return v + extra
}

func writeValues(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "values.yaml")
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestCluster installs the chart on a real single-node Kubernetes as an
// operator would and checks what the issue "Run where operators run it"
// asks: Helm 4 and Helm 3 from the published registry, the pod's
// privileges and parts, Prometheus through Kubernetes service discovery,
// the moved host paged and repaired, ConfigMap edits reaching the agent
// through the kubelet, a rollout to a new image, Pod Security, an
// uninstall that leaves the node clean, and the pod's memory and CPU.
func TestCluster(t *testing.T) {
	k := startKube(t)
	t.Run("corpus-admitted", k.corpusAdmitted)
	t.Run("helm4", func(t *testing.T) { k.operate(t) })
	t.Run("helm3", func(t *testing.T) { k.installOnly(t, "3", "neighwatch-h3") })
	t.Run("pod-security", k.podSecurity)
}
