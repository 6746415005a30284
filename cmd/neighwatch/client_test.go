package main

import (
	"context"
	"errors"
	"io"
	"path/filepath"
	"strings"
	"testing"

	"github.com/neighwatch/neighwatch/table"
)

// TestStatusTakesEveryClass: --class takes each class an entry can have
// (conflict was missing from the help) and refuses another with one line
// naming them all.
func TestStatusTakesEveryClass(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "none.sock")
	for _, c := range table.Classes() {
		err := run(context.Background(), []string{"status", "--class", c.String(), "--control.socket", sock}, io.Discard, io.Discard)
		var u errUsage
		if err == nil || errors.As(err, &u) {
			t.Errorf("--class %s: %v, want the agent's absence, not a usage error", c, err)
		}
	}
	err := run(context.Background(), []string{"status", "--class", "stale", "--control.socket", sock}, io.Discard, io.Discard)
	var u errUsage
	if !errors.As(err, &u) || strings.Contains(err.Error(), "\n") {
		t.Fatalf("--class stale: %v, want one usage line", err)
	}
	for _, c := range table.Classes() {
		if !strings.Contains(err.Error(), c.String()) {
			t.Errorf("the refusal %q does not name %s", err, c)
		}
	}
}
