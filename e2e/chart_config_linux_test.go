package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/neighwatch/neighwatch/internal/dev/manifests"
	"github.com/neighwatch/neighwatch/internal/options"
	"sigs.k8s.io/yaml"
)

// chartOptions reads the option table as the chart carries it
// (templates/_options.tpl, held to the agent's by
// TestChartIsTheOptionTable).
func chartOptions(t *testing.T) map[string]options.ChartCheck {
	t.Helper()
	b, err := os.ReadFile("../deploy/helm/neighwatch/templates/_options.tpl")
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	i, j := strings.Index(s, "-}}\n{"), strings.LastIndex(s, "}\n{{- end")
	if i < 0 || j < 0 {
		t.Fatal("_options.tpl holds no JSON object")
	}
	out := map[string]options.ChartCheck{}
	if err := yaml.Unmarshal([]byte(s[i+4:j+1]), &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// probesOf are values of an option's kind on both sides of what the
// agent takes: its bounds and just past them, what its parser refuses,
// the spellings YAML allows.
func probesOf(c options.ChartCheck) []any {
	ns := func(d float64) string { return time.Duration(d * float64(time.Second)).String() }
	switch c.Kind {
	case options.KindDuration:
		p := []any{ns(c.Lo), ns(c.Hi), ns(c.Lo * 0.999), ns(c.Hi * 1.001), "0", 0, 60, "60", "1h30m", "-1s", "5 s", "5sec", ""}
		return p
	case options.KindInt:
		return []any{int(c.Lo), int(c.Hi), int(c.Lo) - 1, int(c.Hi) + 1, fmt.Sprint(int(c.Lo)), "1.5", 1.5, "many", "+7"}
	case options.KindFloat:
		return []any{c.Lo, c.Hi, c.Lo / 2, c.Hi * 2, "NaN", "inf", "1e2", "fast", ".5"}
	case options.KindBool:
		return []any{true, false, "true", "1", "T", "yes", "maybe"}
	case options.KindWords:
		p := []any{"bogus", true, false, "ON"}
		for _, w := range c.Words {
			p = append(p, w)
		}
		return p
	case options.KindList:
		p := []any{[]any{"a"}, "a,b", ""}
		if len(c.Words) > 0 {
			p = append(p, []any{c.Words[0], "bogus"}, []any{c.Words[0], c.Words[0]}, []any{c.Words[0], c.Words[1]}, c.Words[1], []any{[]any{"x"}})
		}
		return p
	case options.KindRegexes:
		return []any{[]any{"eth.*"}, "eth0,eth1", []any{"x("}, []any{"*x"}, []any{"a)(?:b"}, []any{"ok", 7}}
	case options.KindPrefixes:
		return []any{[]any{"10.0.0.0/8"}, "10.0.0.0/8,fd00::/8", []any{"10.0.0.0/33"}, []any{"10.0.0.1"}, []any{"fd00::1/129"},
			[]any{"::ffff:10.0.0.0/104"}, []any{"010.0.0.0/8"}, []any{"1:2:3:4:5:6:7:8:9/64"}}
	}
	return []any{"text"}
}

// TestChartRefusesWhatTheAgentRefuses: for every option the agent's
// configuration file takes, values on both sides of what it accepts
// (its bounds and past them, bad syntax, YAML's other spellings) in the
// chart's config: Helm 4 (and Helm 3, for every third value) refuse
// exactly the values the agent refuses (neighwatch check-config, which reads a file as the agent
// does at start and on a reload), and where the chart's template refuses
// one it says what the agent says.
func TestChartRefusesWhatTheAgentRefuses(t *testing.T) {
	t.Parallel()
	helms := map[string]string{}
	dir := t.TempDir()
	for _, m := range []string{manifests.HelmModule, manifests.Helm4Module} {
		p, err := manifests.GoInstall(filepath.Join(dir, filepath.Base(m)), m)
		if err != nil {
			t.Fatal(err)
		}
		helms[m[strings.LastIndex(m, "@")+1:]] = p
	}
	type probe struct {
		name  string
		value any
	}
	var probes []probe
	for name, c := range chartOptions(t) {
		for _, v := range probesOf(c) {
			probes = append(probes, probe{name, v})
		}
	}
	// What the agent checks across options.
	probes = append(probes, probe{"tracer.period", "500ms"}, probe{"remediation.strategies", "swap"})
	if len(probes) < 150 {
		t.Fatalf("%d probes", len(probes))
	}
	sem := make(chan struct{}, 4)
	var mu sync.Mutex
	refused, accepted := 0, 0
	for i, p := range probes {
		t.Run(fmt.Sprintf("%s=%v", p.name, p.value), func(t *testing.T) {
			t.Parallel()
			sem <- struct{}{}
			defer func() { <-sem }()
			// Not t.TempDir: its name holds the value, and helm splits
			// --values at commas.
			dir, err := os.MkdirTemp("", "nwprobe-")
			if err != nil {
				t.Fatal(err)
			}
			defer os.RemoveAll(dir)
			file, err := yaml.Marshal(map[string]any{p.name: p.value})
			if err != nil {
				t.Fatal(err)
			}
			agentFile := filepath.Join(dir, "config.yaml")
			if err := os.WriteFile(agentFile, file, 0o644); err != nil {
				t.Fatal(err)
			}
			out, err := exec.Command(binPath, "check-config", "--config.file", agentFile).CombinedOutput()
			agentSays := ""
			if err != nil {
				agentSays = strings.TrimSpace(string(out))
			}
			values, err := yaml.Marshal(map[string]any{"config": map[string]any{p.name: p.value}})
			if err != nil {
				t.Fatal(err)
			}
			vf := filepath.Join(dir, fmt.Sprintf("values-%d.yaml", i))
			if err := os.WriteFile(vf, values, 0o644); err != nil {
				t.Fatal(err)
			}
			for version, helm := range helms {
				// Helm 3 for every third value: the two run the same
				// templates (TestValuesCorpus holds their renders alike),
				// and each render is a tenth of a second of a CPU.
				if strings.HasPrefix(version, "v3.") && i%3 != 0 {
					continue
				}
				cmd := exec.Command(helm, "template", "neighwatch", "../deploy/helm/neighwatch", "--kube-version", manifests.KubeVersion, "--values", vf)
				cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+dir, "HELM_CONFIG_HOME="+dir, "HELM_DATA_HOME="+dir)
				out, err := cmd.CombinedOutput()
				chartSays := ""
				if err != nil {
					chartSays = refusal(string(out))
				}
				switch {
				case (agentSays == "") != (chartSays == ""):
					t.Errorf("Helm %s: the chart says %q; the agent says %q", version, chartSays, agentSays)
				case chartSays != "" && strings.HasPrefix(chartSays, "config."):
					// The template's refusal: the agent's words, after the key.
					if !sameWords(p.name, chartSays, agentSays) {
						t.Errorf("Helm %s refuses in other words than the agent:\n  chart: %s\n  agent: %s", version, chartSays, agentSays)
					}
				}
			}
			mu.Lock()
			if agentSays != "" {
				refused++
			} else {
				accepted++
			}
			mu.Unlock()
		})
	}
	t.Cleanup(func() {
		t.Logf("%d probes: the agent and both Helm versions refuse %d and take %d", len(probes), refused, accepted)
	})
}

// refusal is the one line helm prints for a refused render.
func refusal(out string) string {
	for _, l := range strings.Split(out, "\n") {
		if _, rest, ok := strings.Cut(l, "): "); ok && strings.HasPrefix(l, "Error: execution error at (") {
			return rest
		}
		if strings.HasPrefix(l, "- at '") {
			return strings.TrimPrefix(l, "- ")
		}
	}
	return strings.TrimSpace(out)
}

var agentPrefix = regexp.MustCompile(`^neighwatch: (config file [^:]+: [^:]+: |--[a-z.-]+ )`)

// sameWords: the chart's line, past "config.KEY", says what the agent's
// does past its own prefix (the file and the key, or the flag), one
// holding the other: the agent puts the whole value before a list
// element's refusal, the chart may add what to set. A regex the agent
// refuses with Go's parser's words, which a template cannot have, and
// a range with the value as Go printed it ("1m0s"), are compared up to
// those. A key the chart sets itself on the command line, or a file in
// no volume of the pod, is refused for that.
func sameWords(key, chart, agent string) bool {
	c := strings.TrimPrefix(strings.TrimPrefix(chart, "config."+key), ": ")
	a := agentPrefix.ReplaceAllString(agent, "")
	a = strings.TrimPrefix(a, "neighwatch: ")
	// What the chart knows of the pod: the flags it sets, the volumes.
	chartOwn := strings.Contains(c, "the chart sets --"+key) || strings.Contains(c, "is in no volume of the pod")
	if strings.Contains(c, a) || strings.Contains(a, c) || chartOwn {
		return true
	}
	if _, cw, ok := strings.Cut(c, " is shorter than "); ok {
		_, aw, ok := strings.Cut(a, " is shorter than ")
		return ok && strings.HasPrefix(cw, strings.Fields(aw)[0])
	}
	if _, cw, ok := strings.Cut(c, " is out of range: "); ok {
		_, aw, ok := strings.Cut(a, " is out of range: ")
		return ok && cw == aw
	}
	if re, _, ok := strings.Cut(c, ": not a regular expression"); ok && strings.HasPrefix(re, "bad interface regex ") {
		return strings.Contains(a, re+": error parsing regexp: ")
	}
	return false
}
