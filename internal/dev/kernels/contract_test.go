package kernels

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestContractNamesRealTests: every test a suite names exists in its
// package, so a renamed test cannot drop out of the matrix unseen; the
// newest-only tests run on the newest kernel only.
func TestContractNamesRealTests(t *testing.T) {
	decl := regexp.MustCompile(`(?m)^func (Test\w+)\(t \*testing\.T\)`)
	for _, s := range Contract {
		files, _ := filepath.Glob(filepath.Join("../../..", s.Package, "*_test.go"))
		have := map[string]bool{}
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range decl.FindAllStringSubmatch(string(b), -1) {
				have[m[1]] = true
			}
		}
		if len(have) == 0 {
			t.Fatalf("%s: no tests found", s.Package)
		}
		names := strings.Split(strings.TrimSuffix(strings.TrimPrefix(s.Run, "^("), ")$"), "|")
		if s.Newest != "" {
			names = append(names, strings.Split(s.Newest, "|")...)
		}
		for _, n := range names {
			if !have[n] {
				t.Errorf("%s names %s, which it does not declare", s.Package, n)
			}
		}
		if s.Newest == "" {
			continue
		}
		for _, k := range Debian {
			re := regexp.MustCompile(s.RunFor(k.Name))
			end := k.Name == Newest
			for _, n := range strings.Split(s.Newest, "|") {
				if re.MatchString(n) != end {
					t.Errorf("%s on %s: %s runs %v, want %v", s.Package, k.Name, n, re.MatchString(n), end)
				}
			}
		}
	}
}
