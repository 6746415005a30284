package manifests

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// JsonnetModule is the jsonnet docs/deploying.md's commands name: go-jsonnet's,
// the version the manifests module renders the mixin with.
const JsonnetModule = "github.com/google/go-jsonnet/cmd/jsonnet@v0.22.0"

// readmeBlocks returns docs/deploying.md's fenced blocks of lang in the Alerts
// section, in order.
func readmeBlocks(t *testing.T, lang string) []string {
	t.Helper()
	readme := string(read(t, "docs/deploying.md"))
	start := strings.Index(readme, "\n## Alerts\n")
	if start < 0 {
		t.Fatal("docs/deploying.md has no Alerts section")
	}
	section := readme[start+1:]
	if end := strings.Index(section[1:], "\n## "); end >= 0 {
		section = section[:end+1]
	}
	var blocks []string
	for _, m := range regexp.MustCompile("(?s)```"+lang+"\n(.*?)```").FindAllStringSubmatch(section, -1) {
		blocks = append(blocks, m[1])
	}
	return blocks
}

// run runs one command line of the docs/deploying.md (words split on blanks) in
// dir, with jsonnet and promtool taken from bin.
func runLine(t *testing.T, dir string, bin map[string]string, line string) []byte {
	t.Helper()
	args := strings.Fields(line)
	if p, ok := bin[args[0]]; ok {
		args[0] = p
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", line, err, out)
	}
	return out
}

// TestReadmeMixinCommands runs docs/deploying.md's mixin commands as written:
// the example file with jsonnet -S -m gives a rule file promtool accepts,
// with the example's settings, and a dashboard; the render of the mixin
// at its defaults gives the committed rule file and dashboard, byte for
// byte.
func TestReadmeMixinCommands(t *testing.T) {
	if testing.Short() && os.Getenv("CI") != "true" {
		t.Skip("builds jsonnet from the Go module proxy: not under -short (CI=true runs it)")
	}
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("promtool missing in CI: scripts/install-deps.sh installs the prometheus package")
		}
		t.Skip("promtool not installed (Debian package prometheus)")
	}
	jsonnet, err := GoInstall(t.TempDir(), JsonnetModule)
	if err != nil {
		t.Fatal(err)
	}
	bin := map[string]string{"jsonnet": jsonnet, "promtool": promtool}

	jsonnetBlocks, shBlocks := readmeBlocks(t, "jsonnet"), readmeBlocks(t, "sh")
	if len(jsonnetBlocks) != 1 || len(shBlocks) != 2 {
		t.Fatalf("the Alerts section has %d jsonnet and %d sh blocks, want the example file and its two command blocks", len(jsonnetBlocks), len(shBlocks))
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		t.Fatal(err)
	}

	// The operator's example: the mixin vendored, their file beside it.
	work := t.TempDir()
	if err := os.MkdirAll(filepath.Join(work, "vendor"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(abs, MixinDir), filepath.Join(work, "vendor", "neighwatch-mixin")); err != nil {
		t.Fatal(err)
	}
	example := jsonnetBlocks[0]
	name := strings.TrimSpace(strings.TrimPrefix(strings.SplitN(example, "\n", 2)[0], "//"))
	if err := os.WriteFile(filepath.Join(work, name), []byte(example), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSpace(shBlocks[0]), "\n") {
		runLine(t, work, bin, line)
	}
	rules := readAbs(t, filepath.Join(work, "out", "alerts.yml"))
	var rf ruleFile
	if err := strict(rules, &rf); err != nil {
		t.Fatalf("the example's alerts.yml: %v", err)
	}
	for _, want := range []string{`job="node-neighbours"`, "(k8s_cluster,", "https://runbooks.example.com/neighwatch#", "0.8 * max by"} {
		if !bytes.Contains(rules, []byte(want)) {
			t.Errorf("the example's alerts.yml lacks %q, which its _config sets", want)
		}
	}
	var dash map[string]any
	if err := json.Unmarshal(readAbs(t, filepath.Join(work, "out", "neighwatch.json")), &dash); err != nil || dash["panels"] == nil {
		t.Errorf("the example's neighwatch.json is no dashboard: %v", err)
	}

	// The mixin at its defaults, from the repository's root: the
	// committed files. The command's out becomes a directory of the
	// test's.
	out := t.TempDir()
	line := strings.TrimSpace(shBlocks[1])
	if strings.Count(line, " out ") != 1 {
		t.Fatalf("the defaults' command %q: want one output directory named out", line)
	}
	runLine(t, abs, bin, strings.Replace(line, " out ", " "+out+" ", 1))
	for file, committed := range map[string]string{"alerts.yml": AlertsFile, "neighwatch.json": DashboardFile} {
		if !bytes.Equal(readAbs(t, filepath.Join(out, file)), read(t, committed)) {
			t.Errorf("docs/deploying.md's command writes a %s that is not %s byte for byte: run make manifests", file, committed)
		}
	}
}

func readAbs(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
