package agent

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/neighwatch/neighwatch/internal/options"
)

// FuzzConfigFile loads any file as the agent's configuration, through the
// option table as a start or a reload does. Whatever it holds, the load
// returns (no panic), refuses with one line of at most 1 KiB (a value is
// quoted, not echoed whole), or gives a configuration every option of
// which is in its range; and loading the same file again gives the same
// values.
func FuzzConfigFile(f *testing.F) {
	for _, s := range []string{
		"remediation: on\n",
		"remediation: \"dry-run\"\nremediation.scope: at-risk\nstale-threshold: 90s\n",
		"exclude-interfaces: [lxc.*, veth.*]\nremediation.rate: 2.5\n",
		"manage.max: 1.5\n",
		"remediation.rate: .nan\n",
		"stale-threshold: true\n",
		"remediation: {a: b}\n",
		"a: &x [*x]\n",
		"remediation.allow-cidrs: 10.0.0.0/8,fd00::/8\nremediation.deny-cidrs: [10.1.0.0/16]\n",
		"remediation.strategies: manage,probe\nmanage.idle: 0\n",
		"- a\n- b\n",
		"remediation: on\nremediation: off\n",
	} {
		f.Add([]byte(s))
	}
	path := filepath.Join(f.TempDir(), "config.yaml")
	f.Fuzz(func(t *testing.T, body []byte) {
		if len(body) > options.MaxFile {
			return
		}
		if err := os.WriteFile(path, body, 0o600); err != nil {
			t.Fatal(err)
		}
		st, err := load([]string{"--config.file", path}, io.Discard)
		if err != nil {
			if msg := err.Error(); strings.Contains(msg, "\n") || len(msg) > 1024 {
				t.Fatalf("a refusal of %d bytes, %d lines: %.300q", len(msg), strings.Count(msg, "\n")+1, msg)
			}
			return
		}
		again, err := load([]string{"--config.file", path}, io.Discard)
		if err != nil {
			t.Fatalf("loaded once, refused the second time: %v", err)
		}
		for k, v := range st.values {
			if again.values[k] != v {
				t.Fatalf("%s: %q, then %q", k, v, again.values[k])
			}
		}
	})
}
