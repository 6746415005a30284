package lab

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

func TestMaxInWindow(t *testing.T) {
	t0 := time.Unix(0, 0)
	at := func(ms ...int) []time.Time {
		var out []time.Time
		for _, m := range ms {
			out = append(out, t0.Add(time.Duration(m)*time.Millisecond))
		}
		return out
	}
	for _, tc := range []struct {
		times []time.Time
		want  int
	}{
		{nil, 0},
		{at(0), 1},
		{at(0, 999, 1000), 2},
		{at(0, 100, 200, 1500, 1600, 1700, 1800), 4},
	} {
		if got := MaxInWindow(tc.times, time.Second); got != tc.want {
			t.Errorf("MaxInWindow(%v) = %d, want %d", tc.times, got, tc.want)
		}
	}
}

// TestRequireUnderShort runs this test binary again with -test.short and
// checks that a privileged test skips there (make unit) and runs without
// it, as root.
func TestRequireUnderShort(t *testing.T) {
	if os.Getenv("NW_REQUIRE_PROBE") == "1" {
		t.Skip("only run by TestRequireUnderShort")
	}
	ok, _ := Privileged()
	for _, tc := range []struct {
		short, ci bool
	}{{true, false}, {false, false}, {true, true}} {
		cmd := exec.Command(os.Args[0], "-test.run", "^TestRequireProbe$", "-test.v", fmt.Sprintf("-test.short=%v", tc.short))
		cmd.Env = append(os.Environ(), "NW_REQUIRE_PROBE=1", fmt.Sprintf("CI=%v", tc.ci))
		out, err := cmd.CombinedOutput()
		if err != nil && (ok || !tc.ci) {
			t.Fatalf("-test.short=%v CI=%v: %v\n%s", tc.short, tc.ci, err, out)
		}
		// Skipped under -short, or unprivileged; never under CI=true,
		// where an unprivileged run fails instead.
		skipped := strings.Contains(string(out), "--- SKIP: TestRequireProbe")
		if want := !tc.ci && (tc.short || !ok); skipped != want {
			t.Errorf("-test.short=%v CI=%v: skipped %v, want %v\n%s", tc.short, tc.ci, skipped, want, out)
		}
	}
}

// TestRequireProbe is what TestRequireUnderShort runs.
func TestRequireProbe(t *testing.T) {
	if os.Getenv("NW_REQUIRE_PROBE") != "1" {
		t.Skip("only run by TestRequireUnderShort")
	}
	Require(t)
	t.Log("ran")
}
