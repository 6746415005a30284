package kernels

import (
	"slices"
	"strings"
	"testing"
)

// TestBlindOutcome: the blind control shows something only when its
// test failed by never finding the moved host; a pass, or a failure of
// another kind, is an error.
func TestBlindOutcome(t *testing.T) {
	missed := "    precision_linux_test.go:467: timed out after 2m24s waiting for moved host: the entry stuck\n--- FAIL: TestPrecisionMoved (160.01s)\nFAIL\n"
	for _, tc := range []struct {
		name, out, rc string
		err           string // what the error must say; "" for none
	}{
		{"missed the move", missed, "1", ""},
		{"passed", "--- PASS: TestPrecisionMoved (37.59s)\nPASS\n", "0", "the blind control passed"},
		{"failed before the move", "    precision_linux_test.go:650: build lab: Unknown device type\n--- FAIL: TestPrecisionMoved (2.03s)\n", "1", "not by missing the moved host"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := BlindOutcome(tc.out, tc.rc)
			switch {
			case tc.err == "" && (err != nil || got == ""):
				t.Errorf("BlindOutcome: %q, %v; want an outcome, no error", got, err)
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Errorf("BlindOutcome: %q, %v; want an error saying %q", got, err, tc.err)
			}
		})
	}
}

func TestMovedTimes(t *testing.T) {
	out := "    foreign_forwarders_linux_test.go:203: xdp forwarder: both stuck 9.9s after the move; traffic back 9s after remediation on\n" +
		"    foreign_forwarders_linux_test.go:203: tc forwarder: both stuck 2.98s after the move; traffic back 1.1s after remediation on\n"
	if s, r := MovedTimes(out); s != "2.98s" || r != "1.1s" {
		t.Errorf("MovedTimes: %q, %q; want the tc forwarder's 2.98s, 1.1s", s, r)
	}
	if s, r := MovedTimes("--- PASS: TestPrecisionMoved\n"); s != "" || r != "" {
		t.Errorf("MovedTimes of no such line: %q, %q", s, r)
	}
}

// TestMergeTable: a run's rows replace the README's rows of the kernels
// it booted and keep the others (make test boots some kernels, make
// test-kernels-more the others), in Debian's order with their notes; a
// README of another layout keeps nothing.
func TestMergeTable(t *testing.T) {
	header := "| kernel | release | fentry | as deployed |\n|---|---|---|---|\n"
	old := "\n" + header +
		"| 5.10 | old-5.10 | yes | same |\n" +
		"| 7.3 (newest) | old-7.3 | yes | same |\n" +
		"| arm64-5.10 | old-a5.10 | no | same |\n" +
		"\n- 5.10 refused `x`: old\n- arm64-5.10, fentry: not before 6.0\n"
	run := header +
		"| 5.10 | new-5.10 | yes | same |\n" +
		"| 7.4 (newest) | new-7.4 | yes | same |\n" +
		"| arm64-6.12 | new-a6.12 | yes | same |\n" +
		"| host | h | no | same |\n" +
		"\n- host, fentry: lockdown\n"
	got := MergeTable(old, run)
	want := header +
		"| 5.10 | new-5.10 | yes | same |\n" +
		"| 7.4 (newest) | new-7.4 | yes | same |\n" +
		"| arm64-5.10 | old-a5.10 | no | same |\n" +
		"| arm64-6.12 | new-a6.12 | yes | same |\n" +
		"| host | h | no | same |\n" +
		"\n- arm64-5.10, fentry: not before 6.0\n- host, fentry: lockdown\n"
	if got != want {
		t.Errorf("merged:\n%s\nwant:\n%s", got, want)
	}
	other := strings.Replace(old, "| fentry |", "| tcx |", 1)
	if got := MergeTable(other, run); strings.Contains(got, "old-") {
		t.Errorf("rows of another layout were kept:\n%s", got)
	}
}

// TestFactsDifferIgnoresTheHostsBuild: the host's release is the
// machine's build, not a fact of the matrix; a guest's release and the
// host's other columns are.
func TestFactsDifferIgnoresTheHostsBuild(t *testing.T) {
	header := "| kernel | release | fentry | moved host: stuck, repaired |\n|---|---|---|---|\n"
	readme := header + "| 5.10 | 5.10.0-32-amd64 | yes | 1s |\n| host | 6.18.44-fc-v1272 | no | - |\n"
	for _, tc := range []struct {
		run  string
		want []string
	}{
		{header + "| 5.10 | 5.10.0-32-amd64 | yes | 2s |\n| host | 6.18.44-fc-v1300 | no | - |\n", nil},
		{header + "| 5.10 | 5.10.0-33-amd64 | yes | 1s |\n| host | 6.18.44-fc-v1272 | no | - |\n", []string{"5.10"}},
		{header + "| 5.10 | 5.10.0-32-amd64 | yes | 1s |\n| host | 6.18.44-fc-v1300 | yes | - |\n", []string{"host"}},
	} {
		if got := FactsDiffer(readme, tc.run); !slices.Equal(got, tc.want) {
			t.Errorf("FactsDiffer says %v differ, want %v:\n%s", got, tc.want, tc.run)
		}
	}
}
