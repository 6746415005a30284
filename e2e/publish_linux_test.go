package e2e

import (
	"context"
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
	"sigs.k8s.io/yaml"
)

// TestPublishToARegistry: make push puts the image list and the chart, as
// an OCI artefact, into a registry (Debian's docker-registry on loopback,
// plain HTTP), where a client finds both platforms' images by the list
// and Helm pulls the chart at the VERSION file's version.
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

	out, err := exec.Command("make", "-C", "..", "push", "REGISTRY="+addr, "TLS_VERIFY=false").CombinedOutput()
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
}
