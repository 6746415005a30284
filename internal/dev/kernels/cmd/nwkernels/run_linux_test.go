package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/neighwatch/neighwatch/internal/dev/kernels"
)

// TestReadmeChecked: a run never writes the README. One where every
// kernel passed checks its table: the same facts with other times pass,
// other facts fail naming the kernel and make kernels-readme, and the
// run's table is left for that target, which writes it in. A run where
// a kernel failed checks nothing.
func TestReadmeChecked(t *testing.T) {
	dir := t.TempDir()
	path, out := filepath.Join(dir, "README.md"), filepath.Join(dir, readmeRun)
	ok := kernels.Row{Name: "6.1", Release: "6.1.0-1-amd64", Caps: kernels.Caps{Capabilities: []kernels.Capability{{Name: "states", Value: "tp_btf"}}},
		Stuck: "3.1s", Repaired: "1.0s"}
	doc := "# x\n<!-- kernel-matrix:start (written by make kernels-readme from the last run; do not edit) -->\n" +
		kernels.Table([]kernels.Row{ok}, false) + "<!-- kernel-matrix:end -->\n"
	if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	unchanged := func(when string) {
		t.Helper()
		if b, _ := os.ReadFile(path); string(b) != doc {
			t.Errorf("%s: the run wrote the README:\n%s", when, b)
		}
	}
	slower := ok
	slower.Stuck, slower.Repaired = "4.2s", "2.0s"
	if err := readmeTable(path, out, []kernels.Row{slower}); err != nil {
		t.Errorf("other times only: %v", err)
	}
	unchanged("other times")
	failed := kernels.Row{Name: "6.12", Err: errors.New("kernel 6.12 did not boot to the guest script")}
	other := ok
	other.Caps = kernels.Caps{Capabilities: []kernels.Capability{{Name: "states", Value: "raw_tp"}}}
	if err := readmeTable(path, out, []kernels.Row{other, failed}); err != nil {
		t.Errorf("a failed run checked the README: %v", err)
	}
	unchanged("a failed run")
	err := readmeTable(path, out, []kernels.Row{other})
	if err == nil || !strings.Contains(err.Error(), "for 6.1:") || !strings.Contains(err.Error(), "make kernels-readme") {
		t.Errorf("other facts: %v, want a failure naming 6.1 and make kernels-readme", err)
	}
	unchanged("other facts")
	if err := writeReadme([]string{"--dir", dir, "--readme", path}); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(path); !strings.Contains(string(b), "| raw_tp |") {
		t.Errorf("make kernels-readme did not write the run's table:\n%s", b)
	}
}

// TestFailureExcerptSaysWhatFailed: a failed step's error carries the
// failing tests' messages and verdicts (CI keeps only what was printed),
// not the passing tests' chatter; a panic keeps where it happened; an
// output with none of these gives its tail.
func TestFailureExcerptSaysWhatFailed(t *testing.T) {
	out := strings.Join([]string{
		"=== RUN   TestA",
		"    a_test.go:10: chatter of a passing test",
		"--- PASS: TestA (0.10s)",
		"=== RUN   TestB",
		"    kernel_linux_test.go:402: 99 bypass hits for the STALE entry, want 100",
		"--- FAIL: TestB (1.00s)",
		"    --- FAIL: TestB/xmit (0.50s)",
		"FAIL",
	}, "\n")
	got := failureExcerpt([]byte(out))
	for _, want := range []string{"kernel_linux_test.go:402: 99 bypass hits", "--- FAIL: TestB (1.00s)", "--- FAIL: TestB/xmit"} {
		if !strings.Contains(got, want) {
			t.Errorf("excerpt lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "TestA") {
		t.Errorf("excerpt has the passing test:\n%s", got)
	}

	panicked := "=== RUN   TestC\npanic: runtime error: index out of range\n\ngoroutine 7 [running]:\nmain.f()\n\t/src/x.go:3 +0x1\n"
	if got := failureExcerpt([]byte(panicked)); !strings.Contains(got, "panic: runtime error") || !strings.Contains(got, "/src/x.go:3") {
		t.Errorf("panic excerpt lacks the panic or where:\n%s", got)
	}

	var tail []string
	for i := range 100 {
		tail = append(tail, fmt.Sprintf("line %d", i))
	}
	got = failureExcerpt([]byte(strings.Join(tail, "\n")))
	if !strings.Contains(got, "line 99") || strings.Contains(got, "line 69\n") || strings.Count(got, "\n") != 29 {
		t.Errorf("no failure named: want the last 30 lines, got:\n%s", got)
	}
}
