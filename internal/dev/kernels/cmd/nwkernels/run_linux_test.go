package main

import (
	"errors"
	"os"
	"path/filepath"
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
