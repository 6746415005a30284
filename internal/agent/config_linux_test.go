package agent

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/neighwatch/neighwatch/bpf"
	"github.com/neighwatch/neighwatch/internal/dev/lab"
	"github.com/neighwatch/neighwatch/remediate"
	"sigs.k8s.io/yaml"
)

// TestConfigFileKeysAndPrecedence: keys are flag names without dashes,
// values of any YAML scalar type or lists; flags given on the command
// line win; bad files are one error naming the key.
func TestConfigFileKeysAndPrecedence(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "config.yaml")
	lab.WriteFile(t, f, `remediation: "on"
remediation.scope: at-risk
stale-threshold: 90s
exclude-interfaces: [lxc.*, veth.*]
remediation.rate: 2.5
manage.release-on-exit: false
`)
	st, err := load([]string{"--config.file", f, "--remediation", "dry-run"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	c := st.cfg
	if c.Remediation.Mode != remediate.ModeDryRun || st.modeSource != "flag" {
		t.Errorf("mode %s from %s: the flag must win over the file", c.Remediation.Mode, st.modeSource)
	}
	if c.Remediation.Scope != remediate.ScopeAtRisk || c.StaleThreshold != 90*time.Second || len(c.Mirror.Interfaces.Exclude) != 2 ||
		c.Remediation.Rate != 2.5 || c.Remediation.Manage.ReleaseOnExit {
		t.Errorf("file values not applied: scope %s, threshold %v, exclude %v, rate %v, release-on-exit %v",
			c.Remediation.Scope, c.StaleThreshold, c.Mirror.Interfaces.Exclude, c.Remediation.Rate, c.Remediation.Manage.ReleaseOnExit)
	}
	st, err = load([]string{"--config.file", f}, io.Discard)
	if err != nil || st.cfg.Remediation.Mode != remediate.ModeOn || st.modeSource != "file" {
		t.Errorf("without the flag: %v from %s (%v)", st.cfg.Remediation.Mode, st.modeSource, err)
	}
	for body, want := range map[string]remediate.Mode{"remediation: on\n": remediate.ModeOn, "remediation: off\n": remediate.ModeOff} {
		lab.WriteFile(t, f, body)
		if st, err := load([]string{"--config.file", f}, io.Discard); err != nil || st.cfg.Remediation.Mode != want {
			t.Errorf("%q unquoted: %v (%v)", body, st, err)
		}
	}
	// Every option that takes words reads a bare off as the word, not
	// only remediation.
	lab.WriteFile(t, f, "tracer: off\n")
	if st, err := load([]string{"--config.file", f}, io.Discard); err != nil || st.cfg.Tracer.Mode != bpf.TracerOff {
		t.Errorf("tracer: off unquoted: %v", err)
	}
	for body, want := range map[string]string{
		"remediaton: on\n":               `unknown key "remediaton"`,
		"stale-threshold:\n":             "stale-threshold: no value",
		"remediation.rate: [1, [2]]\n":   "remediation.rate: a list inside a list",
		"remediation: {a: b}\n":          "remediation: want a string",
		"stale-threshold: 99999h\n":      "--stale-threshold 99999h0m0s is out of range",
		"remediation: [\n":               "config file",
		"config.file: /etc/other.yaml\n": `unknown key "config.file"`,
		// A value of the wrong type names itself and what the key takes.
		"stale-threshold: true\n":              `stale-threshold: "true" is not a duration such as 90s or 5m, 1s to 24h`,
		"stale-threshold: 5\n":                 `stale-threshold: "5" is not a duration`,
		"manage.max: 1.5\n":                    `manage.max: "1.5" is not a whole number, 1 to 1,000,000`,
		"remediation.rate: abc\n":              `remediation.rate: "abc" is not a number`,
		"manage.release-on-exit: 3\n":          `manage.release-on-exit: "3" is not true or false`,
		"remediation.confirm: 7\n":             `remediation.confirm: "7": want true or false`,
		"remediation.scope: [a, b]\n":          `remediation.scope: "a,b": `,
		"remediation.rate: .nan\n":             "remediation.rate: .nan and .inf are not values any option takes",
		"remediation.interfaces: [a, -.inf]\n": "remediation.interfaces: .nan and .inf",
	} {
		lab.WriteFile(t, f, body)
		_, err := load([]string{"--config.file", f}, io.Discard)
		if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%q: error %v, want one line with %q", body, err, want)
		}
	}
}

// TestDaemonSetConfigLoads: the agent takes the DaemonSet's arguments
// with the ConfigMap's file. (The manifests are read with the fields this
// needs only: the Kubernetes types live in the tooling's module.)
func TestDaemonSetConfigLoads(t *testing.T) {
	kube := filepath.Join("..", "..", "deploy", "kubernetes")
	var ds struct {
		Kind string
		Spec struct {
			Template struct {
				Spec struct {
					Containers []struct{ Args []string }
				}
			}
		}
	}
	readYAML(t, filepath.Join(kube, "daemonset.yaml"), &ds)
	if ds.Kind != "DaemonSet" || len(ds.Spec.Template.Spec.Containers) == 0 || len(ds.Spec.Template.Spec.Containers[0].Args) < 2 {
		t.Fatalf("daemonset.yaml: a %s with containers %+v, want a DaemonSet whose container has arguments", ds.Kind, ds.Spec.Template.Spec.Containers)
	}
	dir := t.TempDir()
	files, _ := filepath.Glob(filepath.Join(kube, "*.yaml"))
	found := false
	for _, f := range files {
		var cm struct {
			Kind     string
			Metadata struct{ Name string }
			Data     map[string]string
		}
		readYAML(t, f, &cm)
		if cm.Kind != "ConfigMap" || cm.Metadata.Name != "neighwatch-config" {
			continue
		}
		found = true
		for name, body := range cm.Data {
			lab.WriteFile(t, filepath.Join(dir, name), body)
		}
	}
	if !found {
		t.Fatalf("no ConfigMap neighwatch-config in %s", kube)
	}
	var args []string
	for _, a := range ds.Spec.Template.Spec.Containers[0].Args[1:] {
		args = append(args, strings.Replace(a, "/etc/neighwatch", dir, 1))
	}
	st, err := load(args, io.Discard)
	if err != nil {
		t.Fatalf("the DaemonSet's configuration does not load: %v", err)
	}
	if st.modeSource != "file" || st.cfg.StaleThreshold != time.Minute {
		t.Errorf("mode from %s, threshold %v: the ConfigMap's values are not the ones in force", st.modeSource, st.cfg.StaleThreshold)
	}
}

// readYAML decodes one manifest file into v.
func readYAML(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// TestInertStrategiesNameTheFlag: remediation says what can never act;
// the command names the option that set it.
func TestInertStrategiesNameTheFlag(t *testing.T) {
	_, err := load([]string{"--remediation", "on", "--remediation.strategies", "swap"}, io.Discard)
	if err == nil || !strings.HasPrefix(err.Error(), "--remediation.strategies swap can never act: ") {
		t.Errorf("swap alone without --datapath.mode=auto: %v", err)
	}
	st, err := load([]string{"--remediation", "on", "--remediation.strategies", "swap,probe"}, io.Discard)
	if err != nil || len(st.inert) != 1 || !strings.HasPrefix(st.inert[0], "--remediation.strategies: swap never acts: ") {
		t.Errorf("swap then probe: %v, warnings %q", err, st.inert)
	}
}
