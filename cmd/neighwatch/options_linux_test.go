package main

import (
	"flag"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/neighwatch/neighwatch/remediate"
)

// TestREADMEFlagTable: the README's table of agent flags is the option
// table's, row for row. NEIGHWATCH_UPDATE_README=1 rewrites it.
func TestREADMEFlagTable(t *testing.T) {
	_, o := declareAgent(flag.NewFlagSet("", flag.ContinueOnError))
	want := o.readmeTable()
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	header := want[:strings.Index(want, "\n")+1]
	i := strings.Index(readme, header)
	if i < 0 {
		t.Fatalf("README has no table headed %q", strings.TrimSpace(header))
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
			if err := os.WriteFile("../../README.md", []byte(readme[:i]+want+readme[j:]), 0o644); err != nil {
				t.Fatal(err)
			}
			return
		}
		t.Errorf("README's flag table differs from the option table (NEIGHWATCH_UPDATE_README=1 go test ./cmd/neighwatch -run READMEFlagTable rewrites it); want:\n%s", want)
	}
}

// TestOptionRanges: each numeric option refuses the values just outside
// its range and takes its bounds, with one line naming the flag.
func TestOptionRanges(t *testing.T) {
	fs := flag.NewFlagSet("", flag.ContinueOnError)
	_, o := declareAgent(fs)
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
		_, o := declareAgent(fs)
		if err := fs.Set(tc.flag, tc.value); err != nil {
			t.Fatal(err)
		}
		err := o.check()
		if tc.ok != (err == nil) || (err != nil && (!strings.Contains(err.Error(), "--"+tc.flag) || strings.Contains(err.Error(), "\n"))) {
			t.Errorf("--%s %s: %v; want ok=%v, else one line naming the flag", tc.flag, tc.value, err, tc.ok)
		}
	}
	if err := o.check(); err != nil {
		t.Errorf("defaults refused: %v", err)
	}
	if got := fmtDuration(7 * 24 * time.Hour); got != "168h" {
		t.Errorf("fmtDuration(7 days) = %q", got)
	}
	if got := fmtInt(1_000_000); got != "1,000,000" {
		t.Errorf("fmtInt(1000000) = %q", got)
	}
}

// TestFlagDefaultsAreTheEngines: the remediation flags' defaults are
// remediate.Defaults(), the one set the engine fills zero fields from.
func TestFlagDefaultsAreTheEngines(t *testing.T) {
	st, err := agentConfig([]string{"--remediation.strategies", "probe"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	got, want := st.cfg.Remediation, remediate.Defaults()
	if got.Mode != want.Mode || got.Scope != want.Scope || got.Rate != want.Rate || got.PerInterfaceRate != want.PerInterfaceRate ||
		got.MaxConcurrent != want.MaxConcurrent || got.QueueSize != want.QueueSize || got.VerifyTimeout != want.VerifyTimeout ||
		got.KernelTimeout != want.KernelTimeout || got.Manage.Max != want.Manage.Max || got.Manage.Idle != want.Manage.Idle ||
		got.Manage.FailedTimeout != want.Manage.FailedTimeout || got.Manage.ReleaseOnExit != want.Manage.ReleaseOnExit {
		t.Errorf("the flags' defaults %+v differ from remediate.Defaults() %+v", got, want)
	}
}
