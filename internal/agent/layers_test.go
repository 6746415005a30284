package agent

import (
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/neighwatch/neighwatch/"

// TestLayers holds the arrows of the Layout of docs/development.md: each package's
// imports (not its tests') point only down.
func TestLayers(t *testing.T) {
	// Every module of go.work: the product's and the tooling's.
	out, err := exec.Command("go", append([]string{"list", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`}, workModules(t, "/...")...)...).Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	imports := map[string][]string{}
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(l)
		pkg := strings.TrimPrefix(f[0], module)
		for _, i := range f[1:] {
			if strings.HasPrefix(i, module) {
				imports[pkg] = append(imports[pkg], strings.TrimPrefix(i, module))
			}
		}
		if _, ok := imports[pkg]; !ok {
			imports[pkg] = nil
		}
	}
	if len(imports) < 20 {
		t.Fatalf("go list named %d packages: not the module", len(imports))
	}
	under := func(p string, roots ...string) bool {
		for _, r := range roots {
			if p == r || strings.HasPrefix(p, r+"/") {
				return true
			}
		}
		return false
	}
	dev := func(p string) bool { return under(p, "internal/dev", "e2e") }
	floor := map[string]string{
		"internal/quote": "how a refused value is quoted",
		"internal/kver":  "the running kernel's release",
		"internal/count": "a part's counters, declared once",
	}
	for pkg, imps := range imports {
		for _, i := range imps {
			var why string
			switch {
			case floor[pkg] != "":
				why = "the floor (" + floor[pkg] + ") imports nothing of the project"
			case floor[i] != "":
				// Beneath every layer: anyone may use it.
			case under(pkg, "table", "bpf", "monitor/internal", "metrics/connlimit"):
				why = "a leaf imports nothing of the project"
			case under(pkg, "monitor") && !under(i, "table", "bpf", "monitor/internal"):
				why = "a source imports only the table, bpf and its own helpers"
			case under(pkg, "remediate") && !under(i, "table", "bpf"):
				why = "remediation imports only the table and bpf"
			case !dev(pkg) && dev(i):
				why = "the product imports no development tooling"
			case i == "internal/agent" && pkg != "cmd/neighwatch":
				why = "only the command imports the wiring"
			case under(i, "cmd"):
				why = "nothing imports a command"
			}
			if why != "" {
				t.Errorf("%s imports %s: %s", pkg, i, why)
			}
		}
	}
}

// TestProductModuleStandsAlone: the product's module builds, tests
// included, without the tooling's modules (go.work off), so its go.mod
// lists only what the product and its own tests link; and the agent
// links none of the modules the tooling brings (the Kubernetes and
// prometheus-operator types, jsonnet).
func TestProductModuleStandsAlone(t *testing.T) {
	list := exec.Command("go", "list", "-deps", "-test", "-f", "{{if .Module}}{{.Module.Path}}{{end}}", "../../...")
	list.Env = append(list.Environ(), "GOWORK=off")
	out, err := list.CombinedOutput()
	if err != nil {
		t.Fatalf("the product's module without go.work: %v\n%s", err, out)
	}
	mods := map[string]bool{}
	for _, m := range strings.Fields(string(out)) {
		mods[m] = true
	}
	if !mods["github.com/neighwatch/neighwatch"] || !mods["github.com/cilium/ebpf"] {
		t.Fatalf("modules %v: not the product's", mods)
	}
	for m := range mods {
		for _, tooling := range []string{"k8s.io/", "github.com/prometheus-operator/", "github.com/google/go-jsonnet", "github.com/neighwatch/neighwatch/e2e", "github.com/neighwatch/neighwatch/internal/dev/"} {
			if strings.HasPrefix(m, tooling) {
				t.Errorf("the product's module links %s, a tooling dependency", m)
			}
		}
	}
}

// workModules lists go.work's modules (their module paths), each with
// suffix.
func workModules(t *testing.T, suffix string) []string {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Path}}").Output()
	if err != nil {
		t.Fatalf("go list -m: %v", err)
	}
	var mods []string
	for _, m := range strings.Fields(string(out)) {
		mods = append(mods, m+suffix)
	}
	if len(mods) < 2 {
		t.Fatalf("go.work's modules: %v, want the product's and the tooling's", mods)
	}
	return mods
}

// TestMakefileNamesEveryModule: ./... does not reach go.work's other
// modules, so the Makefile's PKGS (what make test, vet, lint and cross
// run) names each.
func TestMakefileNamesEveryModule(t *testing.T) {
	b, err := os.ReadFile("../../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	var pkgs []string
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "PKGS"); ok {
			_, v, _ = strings.Cut(v, ":=")
			pkgs = strings.Fields(v)
		}
	}
	for _, m := range workModules(t, "") {
		want := "." + strings.TrimPrefix(m, strings.TrimSuffix(module, "/")) + "/..."
		if !slices.Contains(pkgs, want) {
			t.Errorf("the Makefile's PKGS %v lacks %s (module %s)", pkgs, want, m)
		}
	}
}
