package manifests

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
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
	slotRules, slotDash, err := RenderChartMixin(root)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(slotRules, read(t, ChartRules)) || !bytes.Equal(slotDash, read(t, ChartDashboard)) {
		t.Errorf("%s or %s is not the mixin's render with every setting a slot: run make manifests", ChartRules, ChartDashboard)
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

// TestChartValuesAreMixinDefaults: prometheusRule's settings in the
// chart's values.yaml are the mixin's _config at its defaults, each
// alert's for and severity included, and carry every setting.
func TestChartValuesAreMixinDefaults(t *testing.T) {
	defaults, err := MixinDefaults(root)
	if err != nil {
		t.Fatal(err)
	}
	var values struct {
		PrometheusRule map[string]any `json:"prometheusRule"`
	}
	if err := yaml.Unmarshal(read(t, ChartDir+"/values.yaml"), &values); err != nil {
		t.Fatal(err)
	}
	pr := values.PrometheusRule
	for k, want := range defaults {
		switch k {
		case "jobSelector":
			// Empty in the chart: the job the monitors set (jobName).
			if pr[k] != "" {
				t.Errorf("prometheusRule.jobSelector %q, want empty", pr[k])
			}
		case "alerts":
			have, _ := pr[k].(map[string]any)
			for name, w := range want.(map[string]any) {
				h, _ := have[name].(map[string]any)
				for _, f := range []string{"for", "severity"} {
					if fmt.Sprint(h[f]) != w.(map[string]any)[f] {
						t.Errorf("prometheusRule.alerts.%s.%s %v, the mixin's %q", name, f, h[f], w.(map[string]any)[f])
					}
				}
			}
			if len(have) != len(want.(map[string]any)) {
				t.Errorf("prometheusRule.alerts has %d alerts, the mixin %d", len(have), len(want.(map[string]any)))
			}
		default:
			if fmt.Sprint(pr[k]) != want {
				t.Errorf("prometheusRule.%s %v, the mixin's %q", k, pr[k], want)
			}
		}
	}
}

// TestChartIsTheMixin: the chart at values that change every setting
// renders the rules and the dashboard the mixin renders at the _config
// that sets the same: the settings come from the mixin, not from edits
// of the chart's own.
func TestChartIsTheMixin(t *testing.T) {
	requireHelm(t)
	values := filepath.Join(t.TempDir(), "values.yaml")
	if err := os.WriteFile(values, []byte(`jobName: node-neighbours
prometheusRule:
  jobSelector: job=~"neighwatch|node-neighbours"
  clusterLabel: k8s_cluster
  runbookURL: https://runbooks.example.com/neighwatch
  tableNearThreshold: 0.8
  resyncStormRate: "0.25"
  fleetKeepFiringFor: 5m
  alerts:
    NeighbourEntryStuck: {for: 5m, severity: critical}
    NeighbourTableOverflow: {for: 1m}
    NeighwatchDown: {for: ""}
dashboards:
  enabled: true
`), 0o600); err != nil {
		t.Fatal(err)
	}
	rules, dash, err := RenderMixin(root, `{
  jobSelector: 'job=~"neighwatch|node-neighbours"',
  clusterLabel: 'k8s_cluster',
  runbookURL: 'https://runbooks.example.com/neighwatch',
  tableNearThreshold: '0.8',
  resyncStormRate: '0.25',
  fleetKeepFiringFor: '5m',
  alerts+: {
    NeighbourEntryStuck+: { 'for': '5m', severity: 'critical' },
    NeighbourTableOverflow+: { 'for': '1m' },
    NeighwatchDown+: { 'for': '' },
  },
}`)
	if err != nil {
		t.Fatal(err)
	}
	var want monitoringv1.PrometheusRuleSpec
	if err := yaml.UnmarshalStrict(rules, &want); err != nil {
		t.Fatal(err)
	}
	var pr *monitoringv1.PrometheusRule
	var cm *corev1.ConfigMap
	for _, o := range render(t, values, true) {
		switch o := o.(type) {
		case *monitoringv1.PrometheusRule:
			pr = o
		case *corev1.ConfigMap:
			if o.Data["neighwatch.json"] != "" {
				cm = o
			}
		}
	}
	if pr == nil || cm == nil {
		t.Fatalf("PrometheusRule %v, dashboard ConfigMap %v", pr != nil, cm != nil)
	}
	if !reflect.DeepEqual(pr.Spec, want) {
		t.Errorf("the chart's rules differ from the mixin's at the same settings:\n%s", diffYAML(want, pr.Spec))
	}
	var gotDash, wantDash any
	if err := json.Unmarshal([]byte(cm.Data["neighwatch.json"]), &gotDash); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(dash, &wantDash); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(gotDash, wantDash) {
		t.Error("the chart's dashboard differs from the mixin's at the same cluster label")
	}
	for _, s := range []string{"@@", `job="neighwatch"`, "(cluster,", "github.com/neighwatch"} {
		if b, _ := yaml.Marshal(pr.Spec); strings.Contains(string(b), s) {
			t.Errorf("the rules still hold %q", s)
		}
	}
}
