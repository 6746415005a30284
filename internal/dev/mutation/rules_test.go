package mutation

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLedger checks the rule ledger without running a break: it parses,
// each rule's break applies to the code as it is (its old text once in
// its file), each named test is declared in its package, and the summary
// table counts the rules. nwmutants rules then runs the breaks.
func TestLedger(t *testing.T) {
	root := filepath.Join("..", "..", "..")
	name := filepath.Join(root, "docs", "rules.md")
	rules, err := ReadRules(name)
	if err != nil {
		t.Fatal(err)
	}
	if len(rules) == 0 {
		t.Fatal("the ledger holds no rule")
	}
	for _, r := range rules {
		if _, err := r.Apply(root); err != nil {
			t.Error(err)
		}
		missing, err := r.TestsDeclared(root)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range missing {
			t.Errorf("rule %s (%s:%d): no test %s", r.ID, name, r.Line, m)
		}
	}
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	got, ok := SummaryOf(string(b))
	if !ok {
		t.Fatalf("%s has no summary between %q and %q", name, SummaryStart, SummaryEnd)
	}
	if want := SummaryTable(rules); got != want {
		t.Errorf("the ledger's summary is out of date (go run ./internal/dev/mutation/cmd/nwmutants rules --write-summary):\n%s\nwant:\n%s", got, want)
	}
}

// TestParseRules: a rule's fields, its tests in two packages, and a
// break of two blocks; what is missing or malformed is named with its
// line.
func TestParseRules(t *testing.T) {
	const ledger = "# ledger\n\n## Area one\n\n" +
		"### first-rule: a rule\n- stated: README\n- lives in: `f`\n- test: ./table TestA TestB; ./remediate TestC\n- break: drop it\n\n" +
		"```diff table/x.go\n context\n-old\n+new\n```\n\n```diff table/y.go\n-gone\n```\n\n" +
		"### second-rule: no break\n- stated: README\n- lives in: `g`\n- test: ./table TestD\n"
	rules, err := ParseRules(strings.NewReader(ledger))
	if err == nil || !strings.Contains(err.Error(), "rule second-rule has no break") {
		t.Errorf("error %v, want second-rule named as having no break", err)
	}
	if len(rules) != 2 {
		t.Fatalf("%d rules, want 2", len(rules))
	}
	r := rules[0]
	if r.ID != "first-rule" || r.Area != "Area one" || r.Text != "a rule" || r.Line != 5 {
		t.Errorf("rule %+v", r)
	}
	if len(r.Tests) != 2 || r.Tests[0].Pkg != "./table" || strings.Join(r.Tests[0].Names, ",") != "TestA,TestB" || r.Tests[1].Names[0] != "TestC" {
		t.Errorf("tests %+v", r.Tests)
	}
	if len(r.Breaks) != 2 || r.Breaks[0].Old != "context\nold" || r.Breaks[0].New != "context\nnew" || r.Breaks[1].File != "table/y.go" || r.Breaks[1].New != "" {
		t.Errorf("breaks %+v", r.Breaks)
	}
	for _, bad := range []string{
		"## A\n### x: y\n- test: table TestA\n",              // not a package path
		"## A\n### x: y\n- test: ./table testA\n",            // not a test name
		"## A\n### x: y\n```diff a.go\n-a\nno prefix\n```\n", // a line without -, + or space
		"## A\n### x: y\n```diff a.go\n-a\n",                 // not closed
	} {
		if _, err := ParseRules(strings.NewReader(bad)); err == nil {
			t.Errorf("%q parsed without an error", bad)
		}
	}
}

// TestApplyNeedsTheOldTextOnce: a break applies where its old text is
// once in its file, and is refused, with the reason, where it is not
// there or is there twice.
func TestApplyNeedsTheOldTextOnce(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "a.go"), []byte("one\ntwo\ntwo\nthree\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := Rule{ID: "r", Breaks: []Hunk{{File: "a.go", Old: "one\ntwo", New: "one\n2"}}}
	got, err := r.Apply(dir)
	if err != nil || string(got["a.go"]) != "one\n2\ntwo\nthree\n" {
		t.Errorf("applied: %q, %v", got["a.go"], err)
	}
	r.Breaks[0].Old = "two"
	if _, err := r.Apply(dir); err == nil || !strings.Contains(err.Error(), "2 times") {
		t.Errorf("old text twice: %v", err)
	}
	r.Breaks[0].Old = "four"
	if _, err := r.Apply(dir); err == nil || !strings.Contains(err.Error(), "not in a.go") {
		t.Errorf("old text absent: %v", err)
	}
}

// TestCopyTree: a break of a file read at run time is tried in a copy of
// the tree, which holds the tracked files and leaves out Git's objects,
// the kernels' cache and the built binaries; allGo tells the two kinds
// of break apart.
func TestCopyTree(t *testing.T) {
	src, dst := t.TempDir(), filepath.Join(t.TempDir(), "tree")
	for _, f := range []string{"go.mod", "deploy/helm/values.yaml", ".git/HEAD", ".kernels/cache/x", "bin/neighwatch", "internal/bin/keep"} {
		if err := os.MkdirAll(filepath.Join(src, filepath.Dir(f)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(src, f), []byte(f), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := copyTree(src, dst); err != nil {
		t.Fatal(err)
	}
	for f, want := range map[string]bool{"go.mod": true, "deploy/helm/values.yaml": true, "internal/bin/keep": true, ".git/HEAD": false, ".kernels/cache/x": false, "bin/neighwatch": false} {
		if _, err := os.Stat(filepath.Join(dst, f)); (err == nil) != want {
			t.Errorf("%s copied: %v, want %v", f, err == nil, want)
		}
	}
	if !allGo(map[string][]byte{"a.go": nil}) || allGo(map[string][]byte{"a.go": nil, "deploy/x.tpl": nil}) {
		t.Error("allGo does not tell a Go break from one of a file read at run time")
	}
}
