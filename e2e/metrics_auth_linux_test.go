package e2e

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/neighwatch/neighwatch/internal/dev/lab"
	"golang.org/x/crypto/bcrypt"
)

// TestMetricsBasicAuth: --web.config.file from exporter-toolkit guards
// /metrics with basic auth.
func TestMetricsBasicAuth(t *testing.T) {
	lab.Require(t)
	t.Parallel()
	ns := lab.NewNS(t, "wba")
	hash, err := bcrypt.GenerateFromPassword([]byte("s3cret"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(t.TempDir(), "web.yml")
	if err := os.WriteFile(cfg, []byte("basic_auth_users:\n  prom: "+string(hash)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	sock := sockPath(t)
	a := runAgentCmd(t, ns, sock, ns.Command(binPath, "agent", "--metrics.listen", metricsAddr, "--control.socket", sock, "--web.config.file", cfg))
	var code int
	deadline := time.Now().Add(10 * time.Second)
	for {
		code, _, err = ns.HTTPGet("http://" + metricsAddr + "/metrics")
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("agent not serving: %v\n%s", err, a.logs())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if code != http.StatusUnauthorized {
		t.Fatalf("/metrics without credentials: %d, want 401", code)
	}
	code, body, err := ns.HTTPGet("http://prom:s3cret@" + metricsAddr + "/metrics")
	if err != nil || code != 200 || !strings.Contains(body, "neighwatch_build_info") {
		t.Fatalf("/metrics with credentials: %d %v", code, err)
	}
	// The control socket is root-only.
	fi, err := os.Stat(sock)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("control socket mode %v, %v; want 0600", fi.Mode(), err)
	}
}
