package kernels

import (
	"strings"
	"testing"
)

// The console of the 5.10 guest that hung in make test on 2026-12-01,
// shortened, and that of the 6.12 guest that died of an int3.
const (
	lockupLine = "[  336.929884] watchdog: BUG: soft lockup - CPU#1 stuck for 22s! [e2e.test:700]\n"
	stallLines = "[  330.211745] rcu: INFO: rcu_sched detected stalls on CPUs/tasks:\n" +
		"[  330.211745] rcu: rcu_sched kthread starved for 5252 jiffies! g99441 f0x2 RCU_GP_WAIT_FQS(5) ->state=0x0 ->cpu=0\n"
	int3Line = "[  412.120007] Oops: int3: 0000 [#1] PREEMPT SMP NOPTI\n"
)

func TestConsoleFault(t *testing.T) {
	steps := "nwkernels: step probe\nnwkernels: step bpf\n"
	for _, tc := range []struct {
		name, console, want string
		hung                bool
	}{
		{"clean", steps, "", false},
		{"one soft lockup (a descheduled vCPU may cause one)", steps + stallLines + lockupLine, "", false},
		{"two", steps + strings.Repeat(lockupLine, 2), "", false},
		{"hung", steps + stallLines + strings.Repeat(lockupLine, 3), "hung (soft lockups on its vCPUs)", true},
		{"int3", steps + int3Line, "died of a stray int3 (static-key patching under TCG)", false},
		{"int3, then lockups", steps + int3Line + strings.Repeat(lockupLine, 4), "died of a stray int3 (static-key patching under TCG)", false},
	} {
		if got := ConsoleFault([]byte(tc.console)); got != tc.want {
			t.Errorf("%s: ConsoleFault = %q, want %q", tc.name, got, tc.want)
		}
		if got := Hung([]byte(tc.console)); got != tc.hung {
			t.Errorf("%s: Hung = %v, want %v", tc.name, got, tc.hung)
		}
	}
}
