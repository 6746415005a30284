package manifests

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// TestMixinRenderIsCommitted: the rule file is the mixin rendered at its
// defaults, byte for byte, and so is the dashboard (the same JSON); the
// mixin's copy of the dashboard is deploy/grafana's. make manifests
// writes them; a change to one without the other fails here.
func TestMixinRenderIsCommitted(t *testing.T) {
	rules, dash, err := RenderMixin(root, "")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(rules, read(t, AlertsFile)) {
		t.Errorf("%s is not the mixin's render: run make manifests", AlertsFile)
	}
	var got, want any
	if err := json.Unmarshal(dash, &got); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(read(t, DashboardFile), &want); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("the mixin's dashboard differs from %s: run make manifests", DashboardFile)
	}
	if !bytes.Equal(read(t, MixinDashboard), read(t, DashboardFile)) {
		t.Errorf("%s is not a copy of %s: run make manifests", MixinDashboard, DashboardFile)
	}
}

// mixinConfig is a _config an operator might set: another job selector,
// cluster label, runbook site and severities.
const mixinConfig = `{
  jobSelector: 'job="node-neighbours"',
  clusterLabel: 'k8s_cluster',
  runbookURL: 'https://runbooks.example.com/neighwatch',
  alerts+: {
    NeighbourEntryStuck+: { severity: 'page' },
    NeighbourTableOverflow+: { severity: 'page' },
  },
}`

// TestMixinConfigApplies: promtool's tests of every rule
// (deploy/prometheus/alerts_test.yml) pass against the rules rendered at
// the defaults and, rewritten for it, at another _config: the series
// carry the other job and cluster label, and the alerts the other
// severities, cluster label and runbook site. The dashboard at that
// config selects and groups by the other cluster label.
func TestMixinConfigApplies(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("promtool missing in CI: scripts/install-deps.sh installs the prometheus package")
		}
		t.Skip("promtool not installed (Debian package prometheus)")
	}
	tests := string(read(t, "deploy/prometheus/alerts_test.yml"))
	for _, alert := range []string{"NeighbourStuckEntriesUnnamed", "NeighwatchTracerOff", "NeighwatchResyncStorm", "NeighbourEntryStuck", "NeighbourTableOverflow"} {
		if !strings.Contains(tests, "alertname: "+alert+"\n") {
			t.Fatalf("alerts_test.yml tests no %s", alert)
		}
	}
	for _, tc := range []struct {
		name, config string
		rewrite      *strings.Replacer
	}{
		{"defaults", "", strings.NewReplacer()},
		{"changed", mixinConfig, strings.NewReplacer(
			`job="neighwatch"`, `job="node-neighbours"`,
			`cluster="`, `k8s_cluster="`,
			"              cluster: ", "              k8s_cluster: ",
			"              job: neighwatch\n", "              job: node-neighbours\n",
			"https://github.com/neighwatch/neighwatch/blob/main/docs/runbook.md", "https://runbooks.example.com/neighwatch",
		)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rules, dash, err := RenderMixin(root, tc.config)
			if err != nil {
				t.Fatal(err)
			}
			body := tc.rewrite.Replace(tests)
			if tc.config != "" {
				// The two alerts whose severity the config changes.
				body = severity(t, body, "NeighbourEntryStuck", "warning", "page")
				body = severity(t, body, "NeighbourTableOverflow", "critical", "page")
				if strings.Contains(string(rules), "(cluster,") || strings.Contains(string(rules), `job="neighwatch"`) ||
					!strings.Contains(string(dash), `label_values(neighwatch_build_info, k8s_cluster)`) || strings.Contains(string(dash), "{cluster=~") {
					t.Error("the render at the changed _config still names the default job or cluster label")
				}
			}
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "alerts.yml"), rules, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "alerts_test.yml"), []byte(body), 0o600); err != nil {
				t.Fatal(err)
			}
			out, err := exec.Command(promtool, "test", "rules", filepath.Join(dir, "alerts_test.yml")).CombinedOutput()
			if err != nil {
				t.Fatalf("promtool test rules at this _config: %v\n%s", err, out)
			}
		})
	}
}

// severity changes the expected severity of alert's firing alerts in a
// promtool test file from old to new: the lines after each "alertname:
// alert" up to the next test.
func severity(t *testing.T, body, alert, old, new string) string {
	t.Helper()
	lines := strings.Split(body, "\n")
	in, n := false, 0
	for i, l := range lines {
		switch {
		case strings.HasPrefix(strings.TrimSpace(l), "alertname: "):
			in = strings.TrimSpace(l) == "alertname: "+alert
		case strings.HasPrefix(strings.TrimSpace(l), "- interval:"):
			in = false
		case in && strings.TrimSpace(l) == "severity: "+old:
			lines[i] = strings.Replace(l, old, new, 1)
			n++
		}
	}
	if n == 0 {
		t.Fatalf("no firing %s in the tests to change", alert)
	}
	return strings.Join(lines, "\n")
}
