package kernels

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// fakeQemu stands in for qemu-system-x86_64: it writes lines to the file
// given as -serial file:PATH, then waits for the run to stop it.
func fakeQemu(t *testing.T, lines string) string {
	t.Helper()
	script := filepath.Join(t.TempDir(), "qemu")
	body := `#!/bin/sh
while [ $# -gt 0 ]; do
	case "$1" in -serial) console="${2#file:}"; shift;; esac
	shift
done
printf '%s' "` + lines + `" >> "$console"
exec sleep 600
`
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	return script
}

// TestBootStopsHungGuest: a guest whose console shows it hung is stopped
// at the next look, long before the timeout, and the error says so; one
// soft lockup alone is waited out.
func TestBootStopsHungGuest(t *testing.T) {
	for _, tc := range []struct {
		name, console string
		hung          bool
	}{
		{"hung", strings.Repeat(lockupLine, 3), true},
		{"one lockup", lockupLine, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			// Boot refuses /tmp, where t.TempDir usually is (the guest
			// mounts a tmpfs there).
			dir, err := os.MkdirTemp(".", "results-")
			if err != nil {
				t.Fatal(err)
			}
			results, _ := filepath.Abs(dir)
			t.Cleanup(func() { os.RemoveAll(results) })
			// A hung guest must be stopped by the watcher, not the
			// timeout; the other one ends by the timeout, after the
			// watcher's first looks (every 5 s).
			timeout := 10 * time.Minute
			if !tc.hung {
				timeout = 12 * time.Second
			}
			b := Boot{Image: Image{Release: "test"}, Results: results, Qemu: fakeQemu(t, tc.console), Timeout: timeout}
			err = b.Run(context.Background())
			if err == nil {
				t.Fatal("Run returned no error")
			}
			if got := strings.Contains(err.Error(), "hung"); got != tc.hung {
				t.Errorf("Run: %v; want hung: %v", err, tc.hung)
			}
		})
	}
}
