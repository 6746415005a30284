package agent

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

func TestBPFRefusal(t *testing.T) {
	if _, ok := bpfRefusal(errors.New("no BTF"), caps{}); ok {
		t.Error("an error other than EPERM was taken for a refusal")
	}
	err := fmt.Errorf("map create: %w"+memlockHint, unix.EPERM)
	line, ok := bpfRefusal(err, caps{})
	if !ok {
		t.Fatal("EPERM not recognised")
	}
	for _, want := range []string{"map create: operation not permitted)", "seccomp", "missing CAP_BPF and CAP_PERFMON", "lockdown", "not RLIMIT_MEMLOCK"} {
		if !strings.Contains(line, want) {
			t.Errorf("%q lacks %q", line, want)
		}
	}
	if strings.Contains(line, "MEMLOCK may be too low") || strings.Contains(line, "\n") {
		t.Errorf("%q keeps the MEMLOCK hint or spans lines", line)
	}
	var all caps
	all[unix.CAP_BPF/32] |= 1 << (unix.CAP_BPF % 32)
	all[unix.CAP_PERFMON/32] |= 1 << (unix.CAP_PERFMON % 32)
	if line, _ := bpfRefusal(err, all); !strings.Contains(line, "CAP_BPF and CAP_PERFMON are held") {
		t.Errorf("%q does not say the capabilities are held", line)
	}
}
