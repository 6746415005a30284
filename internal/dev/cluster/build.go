package cluster

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"
)

// KubeVersion is the Kubernetes the node runs: 1.34, the newest that
// runs on cgroup v1 with failCgroupV1 false, as this machine has it.
const KubeVersion = "v1.34.4"

// PrometheusModule is the Prometheus that scrapes the node through
// Kubernetes service discovery: Debian's (2.42) is built without it. It
// is built with that discovery alone (the remove_all_sd and
// enable_kubernetes_sd build tags).
const PrometheusModule = "github.com/prometheus/prometheus/cmd/prometheus@v0.316.0"

// Tools are the executables a node needs, built once per cache.
type Tools struct {
	// Nwk8s links etcd and Kubernetes' components (k8s/main.go).
	Nwk8s string
	// Pause is the pods' sandbox process, built from the pause.c the
	// Kubernetes module carries.
	Pause string
	// Prometheus has Kubernetes service discovery.
	Prometheus string
}

// Build builds the tools into cache (.cluster), each under a name that
// says what it was built from, and returns them; a tool already built
// from the same sources is not built again. src is the repository's
// root. Each build's time goes to log.
func Build(src, cache string, log io.Writer) (Tools, error) {
	var t Tools
	// The node's parts run in other directories: absolute paths.
	src, err := filepath.Abs(src)
	if err != nil {
		return t, err
	}
	if cache, err = filepath.Abs(cache); err != nil {
		return t, err
	}
	mod := filepath.Join(src, "internal/dev/cluster/k8s")
	key, err := sourceKey(mod, "go.mod", "go.sum", "main.go")
	if err != nil {
		return t, err
	}
	bin := filepath.Join(cache, "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		return t, err
	}
	t.Nwk8s = filepath.Join(bin, "nwk8s-"+KubeVersion+"-"+key)
	pcv := "k8s.io/component-base/version"
	major, minor, _ := strings.Cut(strings.TrimPrefix(KubeVersion, "v"), ".")
	minor, _, _ = strings.Cut(minor, ".")
	ldflags := fmt.Sprintf("-s -w -X %[1]s.gitVersion=%[2]s -X %[1]s.gitMajor=%[3]s -X %[1]s.gitMinor=%[4]s -X %[1]s.gitTreeState=clean"+
		" -X k8s.io/client-go/pkg/version.gitVersion=%[2]s", pcv, KubeVersion, major, minor)
	if err := buildOnce(t.Nwk8s, log, "nwk8s", func(out string) *exec.Cmd {
		cmd := exec.Command("go", "build", "-trimpath", "-ldflags", ldflags, "-o", out, ".")
		cmd.Dir = mod
		return cmd
	}); err != nil {
		return t, err
	}
	// Builds from other sources are of no more use (about 140 MB each).
	old, _ := filepath.Glob(filepath.Join(bin, "nwk8s-*"))
	for _, o := range old {
		if o != t.Nwk8s {
			os.Remove(o)
		}
	}
	t.Prometheus = filepath.Join(bin, "prometheus-"+strings.ReplaceAll(PrometheusModule[strings.LastIndex(PrometheusModule, "@")+1:], "/", "_"))
	if err := buildOnce(t.Prometheus, log, "prometheus", func(out string) *exec.Cmd {
		dir := out + ".gobin"
		cmd := exec.Command("sh", "-c", `set -e; rm -rf "$1"; GOBIN="$1" go install -trimpath -ldflags "-s -w" -tags remove_all_sd,enable_kubernetes_sd "$2"; mv "$1/prometheus" "$3"; rmdir "$1"`,
			"sh", dir, PrometheusModule, out)
		return cmd
	}); err != nil {
		return t, err
	}
	// pause.c from the Kubernetes module the node is built from.
	dl := exec.Command("go", "mod", "download", "-json", "k8s.io/kubernetes@"+KubeVersion)
	dl.Dir, dl.Env = mod, append(os.Environ(), "GOWORK=off")
	out, err := dl.Output()
	if err != nil {
		return t, fmt.Errorf("go mod download k8s.io/kubernetes@%s: %w", KubeVersion, err)
	}
	_, rest, ok := strings.Cut(string(out), `"Dir": "`)
	dir, _, _ := strings.Cut(rest, `"`)
	if !ok || dir == "" {
		return t, fmt.Errorf("go mod download k8s.io/kubernetes@%s named no directory: %s", KubeVersion, out)
	}
	t.Pause = filepath.Join(bin, "pause-"+KubeVersion)
	err = buildOnce(t.Pause, log, "pause", func(out string) *exec.Cmd {
		return exec.Command("gcc", "-Os", "-Wall", "-Werror", "-static", "-DVERSION=v3.10.1", "-o", out, filepath.Join(dir, "build/pause/linux/pause.c"))
	})
	return t, err
}

// buildOnce runs the build make gives, writing to a temporary name
// renamed to out when it succeeds, unless out exists.
func buildOnce(out string, log io.Writer, what string, make func(out string) *exec.Cmd) error {
	if _, err := os.Stat(out); err == nil {
		fmt.Fprintf(log, "nwk8s: %s cached: %s\n", what, out)
		return nil
	}
	tmp := out + ".tmp"
	cmd := make(tmp)
	cmd.Env = append(os.Environ(), "GOWORK=off", "CGO_ENABLED=0")
	start := time.Now()
	if b, err := cmd.CombinedOutput(); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("build %s: %w\n%s", what, err, b)
	}
	fmt.Fprintf(log, "nwk8s: built %s in %v\n", what, time.Since(start).Round(time.Second))
	return os.Rename(tmp, out)
}

// sourceKey hashes the named files of dir and the Go version: what a
// build from them depends on besides the module cache, which go.sum
// pins.
func sourceKey(dir string, files ...string) (string, error) {
	h := sha256.New()
	fmt.Fprintln(h, runtime.Version())
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			return "", err
		}
		fmt.Fprintf(h, "%s %d\n", f, len(b))
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil))[:12], nil
}
