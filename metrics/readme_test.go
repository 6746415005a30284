package metrics

import (
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	versioncollector "github.com/prometheus/client_golang/prometheus/collectors/version"
)

type fakeReadiness struct{}

func (fakeReadiness) AgentReady() bool            { return true }
func (fakeReadiness) PartsReady() map[string]bool { return map[string]bool{"mirror": true} }

var (
	descName   = regexp.MustCompile(`fqName: "([^"]+)"`)
	descConst  = regexp.MustCompile(`constLabels: \{([^}]*)\}`)
	descVar    = regexp.MustCompile(`variableLabels: \{([^}]*)\}`)
	readmeName = regexp.MustCompile("`(neighwatch_[a-z0-9_]+)`")
)

// described returns every metric the agent's collectors describe, with
// its label names (variable and constant).
func described(t *testing.T) map[string][]string {
	t.Helper()
	tb := newTable(t)
	cs := append(allCollectors(t, tb, &fakeKernel{params: kernelParams()}, nil),
		NewReadinessCollector(fakeReadiness{}, nil), versioncollector.NewCollector(namespace))
	out := map[string][]string{}
	for _, c := range cs {
		ch := make(chan *prometheus.Desc, 100)
		c.Describe(ch)
		close(ch)
		for d := range ch {
			s := d.String()
			name := descName.FindStringSubmatch(s)[1]
			var labels []string
			for _, m := range [][]string{descConst.FindStringSubmatch(s), descVar.FindStringSubmatch(s)} {
				if m == nil {
					continue
				}
				for _, l := range strings.Split(m[1], ",") {
					if l = strings.TrimSpace(strings.SplitN(l, "=", 2)[0]); l != "" {
						labels = append(labels, strings.Trim(l, "{}"))
					}
				}
			}
			sort.Strings(labels)
			out[name] = labels
		}
	}
	return out
}

// documented reads docs/metrics.md's metrics table: names and label names.
func documented(t *testing.T) map[string][]string {
	t.Helper()
	b, err := os.ReadFile("../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	i := strings.Index(s, "\n## Metrics\n")
	if i < 0 {
		t.Fatal("docs/metrics.md has no ## Metrics section")
	}
	s = s[i+1:]
	if j := strings.Index(s[3:], "\n## "); j >= 0 {
		s = s[:j+3]
	}
	out := map[string][]string{}
	paren := regexp.MustCompile(`\([^)]*\)`)
	for _, line := range strings.Split(s, "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 4 || !strings.HasPrefix(line, "| `neighwatch_") {
			continue
		}
		var labels []string
		for _, l := range strings.Split(paren.ReplaceAllString(cells[2], ""), ",") {
			if l = strings.TrimSpace(l); l != "" {
				labels = append(labels, l)
			}
		}
		sort.Strings(labels)
		for _, m := range readmeName.FindAllStringSubmatch(cells[1], -1) {
			out[m[1]] = labels
		}
	}
	return out
}

// TestREADMEListsEveryMetric: docs/metrics.md's metric table names exactly the
// metrics the agent describes, each with its labels.
func TestREADMEListsEveryMetric(t *testing.T) {
	have, doc := described(t), documented(t)
	if len(doc) == 0 {
		t.Fatal("no metrics found in docs/metrics.md's table")
	}
	for name, labels := range have {
		dl, ok := doc[name]
		if !ok {
			t.Errorf("docs/metrics.md does not list %s (labels %v)", name, labels)
			continue
		}
		if !slices.Equal(dl, labels) {
			t.Errorf("docs/metrics.md gives %s the labels %v; it has %v", name, dl, labels)
		}
	}
	for name := range doc {
		if _, ok := have[name]; !ok {
			t.Errorf("docs/metrics.md lists %s, which no collector describes", name)
		}
	}
}
