package agent

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

func TestBPFRefusal(t *testing.T) {
	if _, ok := bpfRefusal(errors.New("no BTF"), caps{}, memlock{}); ok {
		t.Error("an error other than EPERM was taken for a refusal")
	}
	err := fmt.Errorf("map create: %w"+memlockHint, unix.EPERM)
	line, ok := bpfRefusal(err, caps{}, memlock{cur: unix.RLIM_INFINITY})
	if !ok {
		t.Fatal("EPERM not recognised")
	}
	for _, want := range []string{"map create: operation not permitted)", "seccomp", "missing CAP_BPF and CAP_PERFMON", "lockdown", "not RLIMIT_MEMLOCK (unlimited"} {
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
	if line, _ := bpfRefusal(err, all, memlock{}); !strings.Contains(line, "CAP_BPF and CAP_PERFMON are held") {
		t.Errorf("%q does not say the capabilities are held", line)
	}
	// A limit the agent could not lift, on a kernel that charges maps to
	// it, is named first, and the line no longer says it is not the cause.
	stuck := memlock{err: errors.New("failed to set memlock rlimit: operation not permitted"), cur: 64 << 10}
	line, _ = bpfRefusal(err, all, stuck)
	if !strings.Contains(line, "causes: RLIMIT_MEMLOCK is 64 KiB and could not be raised") || !strings.Contains(line, "CAP_SYS_RESOURCE") {
		t.Errorf("%q does not name the 64 KiB memlock limit first", line)
	}
	if strings.Contains(line, "not RLIMIT_MEMLOCK") {
		t.Errorf("%q says memlock is not the cause although it could not be raised", line)
	}
}
