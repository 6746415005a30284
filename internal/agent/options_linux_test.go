package agent

import (
	"encoding/json"
	"flag"
	"io"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/neighwatch/neighwatch/bpf"
	"github.com/neighwatch/neighwatch/internal/control"
	"github.com/neighwatch/neighwatch/monitor/evidence"
	"github.com/neighwatch/neighwatch/monitor/feed"
	"github.com/neighwatch/neighwatch/monitor/mirror"
	"github.com/neighwatch/neighwatch/remediate"
)

// TestREADMEFlagTable: docs/running.md's table of agent flags is the option
// table's, row for row. NEIGHWATCH_UPDATE_README=1 rewrites it.
func TestREADMEFlagTable(t *testing.T) {
	_, o := declare(flag.NewFlagSet("", flag.ContinueOnError))
	want := o.READMETable()
	b, err := os.ReadFile("../../docs/running.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	header := want[:strings.Index(want, "\n")+1]
	i := strings.Index(readme, header)
	if i < 0 {
		t.Fatalf("docs/running.md has no table headed %q", strings.TrimSpace(header))
	}
	j := i
	for _, l := range strings.SplitAfter(readme[i:], "\n") {
		if !strings.HasPrefix(l, "|") {
			break
		}
		j += len(l)
	}
	if got := readme[i:j]; got != want {
		if os.Getenv("NEIGHWATCH_UPDATE_README") == "1" {
			if err := os.WriteFile("../../docs/running.md", []byte(readme[:i]+want+readme[j:]), 0o644); err != nil {
				t.Fatal(err)
			}
			return
		}
		t.Errorf("docs/running.md's flag table differs from the option table (NEIGHWATCH_UPDATE_README=1 go test ./internal/agent -run READMEFlagTable rewrites it); want:\n%s", want)
	}
}

// TestOptionRanges: each numeric option refuses the values just outside
// its range and takes its bounds, with one line naming the flag.
func TestOptionRanges(t *testing.T) {
	fs := flag.NewFlagSet("", flag.ContinueOnError)
	_, o := declare(fs)
	for _, tc := range []struct {
		flag, value string
		ok          bool
	}{
		{"stale-threshold", "1s", true},
		{"stale-threshold", "999ms", false},
		{"netlink.resync-interval", "0", true},
		{"netlink.resync-interval", "9s", false},
		{"web.max-connections", "65537", false},
		{"remediation.rate", "NaN", false},
		{"remediation.rate", "0.01", true},
		{"tracer.period", "500ms", false}, // shorter than the window
	} {
		fs := flag.NewFlagSet("", flag.ContinueOnError)
		_, o := declare(fs)
		if err := fs.Set(tc.flag, tc.value); err != nil {
			t.Fatal(err)
		}
		err := o.Check()
		if tc.ok != (err == nil) || (err != nil && (!strings.Contains(err.Error(), "--"+tc.flag) || strings.Contains(err.Error(), "\n"))) {
			t.Errorf("--%s %s: %v; want ok=%v, else one line naming the flag", tc.flag, tc.value, err, tc.ok)
		}
	}
	if err := o.Check(); err != nil {
		t.Errorf("defaults refused: %v", err)
	}
	// Ranges read as one writes them: 168h, not 168h0m0s; 1,000,000.
	if got := o.Lookup("manage.idle").Range; got != "1s to 168h, or 0" {
		t.Errorf("--manage.idle's range reads %q, want 1s to 168h, or 0", got)
	}
	if got := o.Lookup("manage.max").Range; got != "1 to 1,000,000" {
		t.Errorf("--manage.max's range reads %q, want 1 to 1,000,000", got)
	}
}

// TestFlagDefaultsAreTheParts: with no flag given, the configuration is
// Defaults(), which each part (mirror, evidence, feed, remediate)
// gives from its own Defaults(): every flag's default is in one place.
// Only what the command adds differs: its metrics address and control
// socket, the logger, and the strategies and manage support the kernel
// decides.
func TestFlagDefaultsAreTheParts(t *testing.T) {
	st, err := load(nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	got, want := st.cfg, Defaults()
	want.Metrics.Listen, want.ControlSocket, want.Logger = DefaultMetricsListen, control.DefaultSocket, got.Logger
	want.Remediation.Manage.Supported, _ = remediate.ManagedSupported()
	want.Remediation.Strategies = remediate.DefaultStrategies(want.Remediation.Manage.Supported, false)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("the flags' defaults differ from the parts':\n got %+v\nwant %+v", got, want)
	}
	for name, pair := range map[string][2]any{
		"mirror":    {want.Mirror, mirror.Defaults()},
		"evidence":  {want.Evidence, evidence.Defaults()},
		"feed":      {want.Tracer.Feed, feed.Defaults()},
		"remediate": {Defaults().Remediation, remediate.Defaults()},
	} {
		if !reflect.DeepEqual(pair[0], pair[1]) {
			t.Errorf("%s: the agent's defaults %+v are not the part's %+v", name, pair[0], pair[1])
		}
	}
	// A flag given changes its field and nothing else.
	st, err = load([]string{"--remediation.interface-rate", "7", "--remediation.confirm=false", "--datapath.mode", "auto"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	r := st.cfg.Remediation
	if r.PerInterfaceRate != 7 || !r.NoConfirm || !st.cfg.Datapath.Auto || st.cfg.Datapath.Mode != bpf.ModeLegacy || r.Strategies[0] != remediate.StrategySwap {
		t.Errorf("flags not bound: interface rate %v, no-confirm %v, datapath %+v, strategies %v", r.PerInterfaceRate, r.NoConfirm, st.cfg.Datapath, r.Strategies)
	}
}

// TestOptionWords: the words the option table says an option takes are
// the ones its parser takes: each parses, and a word none of them is
// refused.
func TestOptionWords(t *testing.T) {
	_, o := declare(flag.NewFlagSet("", flag.ContinueOnError))
	n := 0
	for _, op := range o.Options() {
		if len(op.Words) == 0 {
			continue
		}
		n++
		for _, w := range append(op.Words, "bogus") {
			fs := flag.NewFlagSet("", flag.ContinueOnError)
			declare(fs)
			err := fs.Set(op.Name, w)
			if err == nil && (op.Name == "log.level" || op.Name == "log.format") {
				// Checked when the logger is made.
				_, err = load([]string{"--" + op.Name, w}, io.Discard)
			}
			if (err == nil) != (w != "bogus") {
				t.Errorf("--%s %s: %v; the table says it takes %v", op.Name, w, err, op.Words)
			}
		}
	}
	if n < 6 {
		t.Errorf("%d options say the words they take, want the 7 that take words", n)
	}
}

// TestChartIsTheOptionTable: the chart's checks of its config value
// (templates/_options.tpl) and the schema of that value
// (values.schema.json's config) are the option table's.
// NEIGHWATCH_UPDATE_CHART=1 rewrites them.
func TestChartIsTheOptionTable(t *testing.T) {
	const tplPath = "../../deploy/helm/neighwatch/templates/_options.tpl"
	const schemaPath = "../../deploy/helm/neighwatch/values.schema.json"
	_, o := declare(flag.NewFlagSet("", flag.ContinueOnError))
	tpl, err := o.ChartTemplate()
	if err != nil {
		t.Fatal(err)
	}
	_, o = declare(flag.NewFlagSet("", flag.ContinueOnError))
	sub, err := json.MarshalIndent(o.ChartSchema(), "    ", "  ")
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(schemaPath)
	if err != nil {
		t.Fatal(err)
	}
	schema := string(b)
	// The config property: from its key to its closing brace.
	i := strings.Index(schema, "\n    \"config\": {")
	if i < 0 {
		t.Fatalf("%s has no \"config\" property at the top level", schemaPath)
	}
	i++
	depth, j := 0, -1
	for k := i + len(`    "config": `); k < len(schema); k++ {
		switch schema[k] {
		case '{':
			depth++
		case '}':
			depth--
		}
		if depth == 0 {
			j = k + 1
			break
		}
	}
	if j < 0 {
		t.Fatalf("%s: the config property does not close", schemaPath)
	}
	wantSchema := schema[:i] + `    "config": ` + string(sub) + schema[j:]
	var check any
	if err := json.Unmarshal([]byte(wantSchema), &check); err != nil {
		t.Fatalf("the schema with the generated config is not JSON: %v", err)
	}
	have, err := os.ReadFile(tplPath)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	if string(have) == tpl && schema == wantSchema {
		return
	}
	if os.Getenv("NEIGHWATCH_UPDATE_CHART") == "1" {
		if err := os.WriteFile(tplPath, []byte(tpl), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(schemaPath, []byte(wantSchema), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("the chart's %s or the config of %s differ from the option table: NEIGHWATCH_UPDATE_CHART=1 go test ./internal/agent -run TestChartIsTheOptionTable rewrites them", tplPath, schemaPath)
}
