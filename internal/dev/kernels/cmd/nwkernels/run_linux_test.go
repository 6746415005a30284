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

// TestReadmeKeptOnFailure: a run where a kernel failed leaves the
// README's table as it was; one where all passed rewrites it.
func TestReadmeKeptOnFailure(t *testing.T) {
	doc := "# x\n<!-- kernel-matrix:start (written by make test-kernels; do not edit) -->\nold table\n<!-- kernel-matrix:end -->\n"
	path := filepath.Join(t.TempDir(), "README.md")
	if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	ok := kernels.Row{Name: "6.1", Release: "6.1.0-1-amd64", Caps: kernels.Caps{Capabilities: []kernels.Capability{{Name: "states", Value: "tp_btf"}}}}
	failed := kernels.Row{Name: "6.12", Err: errors.New("kernel 6.12 did not boot to the guest script")}
	if err := readmeTable(path, []kernels.Row{ok, failed}); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(path); string(b) != doc {
		t.Errorf("a failed run rewrote the README:\n%s", b)
	}
	if err := readmeTable(path, []kernels.Row{ok}); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(path); string(b) == doc {
		t.Error("a run where every kernel passed left the README's table as it was")
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
