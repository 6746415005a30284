package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/neighwatch/neighwatch/internal/dev/manifests"
	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/yaml"
)

// TestPublishToARegistry: make push, with a cosign key made for the test,
// puts the image list, the chart and the release files into a registry
// (Debian's docker-registry on loopback, plain HTTP): a client finds both
// platforms' images by the list; Helm pulls the chart at the VERSION
// file's version, and it renders the image from this registry by the
// list's digest; oras pulls the release files, which are bin/release's
// and match their SHA256SUMS; and cosign verifies each of the three with
// the key's public half, and none with another key.
func TestPublishToARegistry(t *testing.T) {
	requirePodman(t)
	reg := requireProgram(t, "docker-registry", "docker-registry")
	version, err := manifests.Version("..")
	if err != nil {
		t.Fatal(err)
	}
	buildImage(t)

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	dir := t.TempDir()
	config := filepath.Join(dir, "config.yml")
	body := fmt.Sprintf("version: 0.1\nlog:\n  level: warn\nstorage:\n  filesystem:\n    rootdirectory: %s\nhttp:\n  addr: %s\n", filepath.Join(dir, "data"), addr)
	if err := os.WriteFile(config, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	srv := exec.CommandContext(ctx, reg, "serve", config)
	var srvOut strings.Builder
	srv.Stdout, srv.Stderr = &srvOut, &srvOut
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		_ = srv.Wait()
		if t.Failed() {
			t.Logf("docker-registry:\n%s", srvOut.String())
		}
	})
	base := "http://" + addr + "/v2/"
	// Ready when it answers its API's root; it is up in well under a
	// second, and a minute covers a loaded machine.
	for i := 0; ; i++ {
		resp, err := http.Get(base)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if i == 600 {
			t.Fatalf("the registry at %s never answered: %v", addr, err)
		}
		time.Sleep(100 * time.Millisecond)
	}

	bin := t.TempDir()
	cosign, err := manifests.GoInstall(bin, manifests.CosignModule)
	if err != nil {
		t.Fatal(err)
	}
	oras, err := manifests.GoInstall(bin, manifests.OrasModule)
	if err != nil {
		t.Fatal(err)
	}
	keys, other := t.TempDir(), t.TempDir()
	for _, d := range []string{keys, other} {
		gen := exec.Command(cosign, "generate-key-pair")
		gen.Dir, gen.Env = d, append(os.Environ(), "COSIGN_PASSWORD=neighwatch-test")
		if out, err := gen.CombinedOutput(); err != nil {
			t.Fatalf("cosign generate-key-pair: %v\n%s", err, out)
		}
	}
	push := exec.Command("make", "-C", "..", "push", "REGISTRY="+addr, "TLS_VERIFY=false", "COSIGN_KEY="+filepath.Join(keys, "cosign.key"))
	push.Env = append(os.Environ(), "COSIGN_PASSWORD=neighwatch-test")
	out, err := push.CombinedOutput()
	if err != nil {
		t.Fatalf("make push: %v\n%s", err, out)
	}

	// The image list names both platforms, and each platform's image is
	// there by its digest.
	get := func(path string, accept ...string) (int, []byte) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, base+path, nil)
		req.Header.Set("Accept", strings.Join(accept, ", "))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, b
	}
	indexTypes := []string{"application/vnd.oci.image.index.v1+json", "application/vnd.docker.distribution.manifest.list.v2+json"}
	imageTypes := []string{"application/vnd.oci.image.manifest.v1+json", "application/vnd.docker.distribution.manifest.v2+json"}
	code, b := get("neighwatch/neighwatch/manifests/"+version, indexTypes...)
	if code != http.StatusOK {
		t.Fatalf("the image list neighwatch/neighwatch:%s: %d %s", version, code, b)
	}
	listDigest := fmt.Sprintf("sha256:%x", sha256.Sum256(b))
	var index struct {
		Manifests []struct {
			Digest   string `json:"digest"`
			Platform struct {
				OS           string `json:"os"`
				Architecture string `json:"architecture"`
			} `json:"platform"`
		} `json:"manifests"`
	}
	if err := json.Unmarshal(b, &index); err != nil {
		t.Fatal(err)
	}
	var arches []string
	for _, m := range index.Manifests {
		arches = append(arches, m.Platform.OS+"/"+m.Platform.Architecture)
		if code, b := get("neighwatch/neighwatch/manifests/"+m.Digest, imageTypes...); code != http.StatusOK {
			t.Errorf("the %s/%s image %s is not in the registry: %d %s", m.Platform.OS, m.Platform.Architecture, m.Digest, code, b)
		}
	}
	slices.Sort(arches)
	if !slices.Equal(arches, []string{"linux/amd64", "linux/arm64"}) {
		t.Errorf("the image list holds %v, want linux/amd64 and linux/arm64", arches)
	}

	// Helm pulls the chart back at VERSION.
	pulled := t.TempDir()
	if out, err := exec.Command("go", "run", manifests.HelmModule, "pull", "oci://"+addr+"/neighwatch/charts/neighwatch",
		"--version", version, "--plain-http", "--destination", pulled).CombinedOutput(); err != nil {
		t.Fatalf("helm pull: %v\n%s", err, out)
	}
	show, err := exec.Command("go", "run", manifests.HelmModule, "show", "chart", filepath.Join(pulled, "neighwatch-"+version+".tgz")).Output()
	if err != nil {
		t.Fatalf("helm show chart: %v", err)
	}
	var chart struct {
		Name       string `json:"name"`
		Version    string `json:"version"`
		AppVersion string `json:"appVersion"`
	}
	if err := yaml.Unmarshal(show, &chart); err != nil || chart.Name != "neighwatch" || chart.Version != version || chart.AppVersion != version {
		t.Errorf("the pulled chart: %+v (%v), want neighwatch %s", chart, err, version)
	}
	// The pulled chart installs the image it was published with: this
	// registry's, by the list's digest.
	rendered, err := exec.Command("go", "run", manifests.HelmModule, "template", "neighwatch", filepath.Join(pulled, "neighwatch-"+version+".tgz"),
		"--kube-version", manifests.KubeVersion).Output()
	if err != nil {
		t.Fatalf("helm template of the pulled chart: %v", err)
	}
	image := ""
	for _, doc := range strings.Split(string(rendered), "\n---") {
		if obj, err := manifests.Decode([]byte(doc + "\n")); err == nil {
			if ds, ok := obj.(*appsv1.DaemonSet); ok {
				image = ds.Spec.Template.Spec.Containers[0].Image
			}
		}
	}
	if want := addr + "/neighwatch/neighwatch@" + listDigest; image != want {
		t.Errorf("the pulled chart runs the image %q, want %q (the registry it was published to, the list's digest)", image, want)
	}

	// The release files: bin/release's, each as SHA256SUMS says.
	files := t.TempDir()
	pull := exec.Command(oras, "pull", "--plain-http", addr+"/neighwatch/release:"+version)
	pull.Dir = files
	if out, err := pull.CombinedOutput(); err != nil {
		t.Fatalf("oras pull: %v\n%s", err, out)
	}
	sums, err := os.ReadFile(filepath.Join(files, "SHA256SUMS"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, line := range strings.Split(strings.TrimSpace(string(sums)), "\n") {
		sum, name, ok := strings.Cut(line, "  ")
		if !ok {
			t.Fatalf("SHA256SUMS line %q", line)
		}
		names = append(names, name)
		got, err := os.ReadFile(filepath.Join(files, name))
		if err != nil {
			t.Fatalf("the release artefact lacks %s: %v", name, err)
		}
		if fmt.Sprintf("%x", sha256.Sum256(got)) != sum {
			t.Errorf("%s does not match its SHA256SUMS line", name)
		}
		if local, err := os.ReadFile(filepath.Join("..", "bin", "release", name)); err != nil || !bytes.Equal(local, got) {
			t.Errorf("the published %s is not bin/release's (%v)", name, err)
		}
	}
	slices.Sort(names)
	if want := []string{"neighwatch-linux-amd64", "neighwatch-linux-arm64", "neighwatch.cdx.json"}; !slices.Equal(names, want) {
		t.Errorf("SHA256SUMS names %v, want %v", names, want)
	}

	// Each part verifies with the key's public half, and not with another.
	resolve := func(ref string) string {
		out, err := exec.Command(oras, "resolve", "--plain-http", ref).Output()
		if err != nil {
			t.Fatalf("oras resolve %s: %v", ref, err)
		}
		return strings.TrimSpace(string(out))
	}
	for _, ref := range []string{
		addr + "/neighwatch/neighwatch@" + listDigest,
		addr + "/neighwatch/charts/neighwatch@" + resolve(addr+"/neighwatch/charts/neighwatch:"+version),
		addr + "/neighwatch/release@" + resolve(addr+"/neighwatch/release:"+version),
	} {
		for _, k := range []struct {
			dir  string
			want bool
		}{{keys, true}, {other, false}} {
			out, err := exec.Command(cosign, "verify", "--key", filepath.Join(k.dir, "cosign.pub"), "--allow-http-registry", "--insecure-ignore-tlog=true", ref).CombinedOutput()
			if (err == nil) != k.want {
				t.Errorf("cosign verify %s with the %s key: %v, want verified %v\n%s", ref, map[bool]string{true: "signing", false: "other"}[k.want], err, k.want, out)
			}
		}
	}
}
