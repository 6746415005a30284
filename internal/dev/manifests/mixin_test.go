package manifests

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"

	"sigs.k8s.io/yaml"
)

// alertRule is one rule of the rule file, as the mixin guidelines read it.
type alertRule struct {
	Alert         string            `json:"alert"`
	Expr          string            `json:"expr"`
	For           string            `json:"for"`
	KeepFiringFor string            `json:"keep_firing_for"`
	Labels        map[string]string `json:"labels"`
	Annotations   map[string]string `json:"annotations"`
}

var (
	// Every metric a rule reads, with its selector if it has one.
	selectorRE = regexp.MustCompile(`\b(neighwatch_[a-z0-9_]+|up)\b(\{[^}]*\})?`)
	// Every grouping of an aggregation or a binary operator's matching.
	groupingRE = regexp.MustCompile(`\b(by|on|without|ignoring)\s*\(([^)]*)\)`)
	// An aggregation operator and what follows it.
	aggRE = regexp.MustCompile(`\b(sum|min|max|avg|count|stddev|stdvar|group|topk|bottomk|quantile|count_values)\s*(\(|by\b|without\b)`)
)

// TestAlertsFollowMixinGuidelines holds the rule file to the monitoring
// mixins' conventions (mixtool cannot be fetched here, so they are
// checked here): CamelCase names with the component's prefix; a severity
// of critical, warning or info; a summary that is one fixed sentence and
// a templated description that ends as one; a runbook; every selector
// names the agents' job, and every aggregation and matching keeps the
// cluster label (the chart's jobSelector and clusterLabel replace both).
func TestAlertsFollowMixinGuidelines(t *testing.T) {
	var f struct {
		Groups []struct {
			Name  string      `json:"name"`
			Rules []alertRule `json:"rules"`
		} `json:"groups"`
	}
	if err := yaml.UnmarshalStrict(read(t, AlertsFile), &f); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			n++
			for _, msg := range lintAlert(r) {
				t.Errorf("%s: %s", r.Alert, msg)
			}
		}
	}
	if n == 0 {
		t.Fatal("no rules read")
	}
}

// lintAlert returns what breaks the guidelines in one rule.
func lintAlert(r alertRule) []string {
	var out []string
	if !regexp.MustCompile(`^(Neighbour|Neighwatch)[A-Z][A-Za-z]*$`).MatchString(r.Alert) {
		out = append(out, "the name is not CamelCase with the Neighbour or Neighwatch prefix")
	}
	if !slices.Contains([]string{"critical", "warning", "info"}, r.Labels["severity"]) {
		out = append(out, "severity "+r.Labels["severity"]+", want critical, warning or info")
	}
	sentence := func(s string) bool {
		s = strings.TrimSpace(s)
		return s != "" && strings.HasSuffix(s, ".") && (unicode.IsUpper([]rune(s)[0]) || strings.HasPrefix(s, "neighwatch") || strings.HasPrefix(s, "{{"))
	}
	sum, desc := r.Annotations["summary"], r.Annotations["description"]
	switch {
	case sum == "":
		out = append(out, "no summary")
	case strings.Contains(sum, "{{") || !sentence(sum):
		out = append(out, "the summary is not one fixed sentence: "+sum)
	}
	switch {
	case desc == "":
		out = append(out, "no description")
	case !strings.Contains(desc, "{{") || !sentence(desc):
		out = append(out, "the description is not templated sentences: "+desc)
	}
	if r.Annotations["runbook_url"] == "" {
		out = append(out, "no runbook_url")
	}
	for _, m := range selectorRE.FindAllStringSubmatch(r.Expr, -1) {
		if !strings.Contains(m[2], `job="neighwatch"`) {
			out = append(out, m[0]+` does not select job="neighwatch"`)
		}
	}
	for _, m := range groupingRE.FindAllStringSubmatch(r.Expr, -1) {
		labels := strings.Split(strings.ReplaceAll(m[2], " ", ""), ",")
		if m[1] == "without" || m[1] == "ignoring" || labels[0] != "cluster" {
			out = append(out, m[0]+" does not keep the cluster label first")
		}
	}
	for _, m := range aggRE.FindAllStringSubmatch(r.Expr, -1) {
		if m[2] != "by" {
			out = append(out, m[1]+" aggregates without by (cluster, ...)")
		}
	}
	return out
}

// TestMixinLintCanFail: the lint finds each kind of fault.
func TestMixinLintCanFail(t *testing.T) {
	good := alertRule{Alert: "NeighbourX", Expr: `max by (cluster, instance) (neighwatch_x{job="neighwatch"}) > 0`,
		Labels: map[string]string{"severity": "warning"}, Annotations: map[string]string{"summary": "Something is wrong.",
			"description": "{{ $labels.instance }} is wrong.", "runbook_url": "u"}}
	if got := lintAlert(good); len(got) != 0 {
		t.Fatalf("a good rule: %v", got)
	}
	for _, bad := range []func(*alertRule){
		func(r *alertRule) { r.Alert = "neighbour_x" },
		func(r *alertRule) { r.Labels["severity"] = "page" },
		func(r *alertRule) { r.Annotations["summary"] = "{{ $labels.ip }} is wrong." },
		func(r *alertRule) { r.Annotations["description"] = "Something is wrong." },
		func(r *alertRule) { delete(r.Annotations, "description") },
		func(r *alertRule) { r.Expr = `max by (cluster, instance) (neighwatch_x) > 0` },
		func(r *alertRule) { r.Expr = `max by (instance) (neighwatch_x{job="neighwatch"}) > 0` },
		func(r *alertRule) { r.Expr = `max(neighwatch_x{job="neighwatch"}) > 0` },
		func(r *alertRule) {
			r.Expr = `up{job="neighwatch"} == 0 and on (instance) neighwatch_x{job="neighwatch"}`
		},
	} {
		r := good
		r.Labels = map[string]string{"severity": "warning"}
		r.Annotations = map[string]string{"summary": "Something is wrong.", "description": "{{ $labels.instance }} is wrong.", "runbook_url": "u"}
		bad(&r)
		if len(lintAlert(r)) == 0 {
			t.Errorf("no fault found in %+v", r)
		}
	}
}

// TestAlertRuleTests runs promtool's unit tests of the alert rules
// (deploy/prometheus/alerts_test.yml) on the rendered rules: what fires,
// when, with which labels and annotations. make checkrules runs the same;
// here the rule ledger's breaks of the mixin reach them.
func TestAlertRuleTests(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("promtool missing in CI: scripts/install-deps.sh installs the prometheus package")
		}
		t.Skip("promtool not installed (Debian package prometheus)")
	}
	// The ledger's breaks change the mixin, not the committed render:
	// the rules are rendered here from the mixin as it stands.
	rules, _, err := RenderMixin(root, "")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "alerts.yml"), rules, 0o644); err != nil {
		t.Fatal(err)
	}
	tests := read(t, "deploy/prometheus/alerts_test.yml")
	if err := os.WriteFile(filepath.Join(dir, "alerts_test.yml"), tests, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(promtool, "test", "rules", "alerts_test.yml")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("promtool test rules: %v\n%s", err, out)
	}
}
