package kernels

import (
	"os"
	"slices"
	"strings"
	"testing"
)

func TestDmesgFaults(t *testing.T) {
	read := func(name string) string {
		b, err := os.ReadFile("testdata/" + name)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	const lockup = `[  336.929884] watchdog: BUG: soft lockup - CPU#1 stuck for 22s! [e2e.test:700]
[  336.930001] Modules linked in: veth
[  336.930100] Call Trace:
[  336.930200]  __netif_receive_skb_core+0x10/0x20
[  340.100000] rcu: INFO: rcu_sched self-detected stall on CPU
[  340.100100] Call Trace:
[  340.100200]  rcu_sched_clock_irq+0x1/0x2
`
	const bareTrace = `[   12.000000] something odd
[   12.000100] Call Trace:
[   12.000200]  dump_stack+0x6b/0x83
`
	const warnNoCut = `[   50.000000] WARNING: CPU: 1 PID: 9 at net/core/neighbour.c:123 neigh_destroy+0x1/0x2
[   50.000100] Call Trace:
[   50.000200] ---[ end trace 0123456789abcdef ]---
`
	for _, c := range []struct {
		name, dmesg string
		want        []string
	}{
		{"the 5.10 guest with watched_big allocated at run time", read("dmesg-5.10-warned.txt"),
			[]string{"trace type BPF program uses run-time allocation (WARNING: CPU: 0 PID: 147 at kernel/bpf/verifier.c:10493 bpf_check+0x2f92/0x3470)"}},
		{"a clean arm64 6.12 guest", read("dmesg-arm64-6.12-clean.txt"), nil},
		{"the emulator's soft lockup and RCU stall", lockup, nil},
		{"a call trace of no report", bareTrace, []string{"a call trace of no report"}},
		{"a WARNING without its cut line", warnNoCut, []string{"WARNING: CPU: 1 PID: 9 at net/core/neighbour.c:123 neigh_destroy+0x1/0x2"}},
		{"the verifier's words", "[    1.0] bpf: verifier backtracking bug\n", []string{"bpf: verifier backtracking bug"}},
		{"the BPF verifier misconfigured", "[    1.0] BPF verifier is misconfigured\n", []string{"BPF verifier is misconfigured"}},
		{"the tracer's string verifier, off at boot (arm64 6.1)", "[    0.000000] trace event string verifier disabled\n", nil},
		{"a warning after a stall", lockup + warnNoCut, []string{"WARNING: CPU: 1 PID: 9 at net/core/neighbour.c:123 neigh_destroy+0x1/0x2"}},
	} {
		if got := DmesgFaults(c.dmesg); !slices.Equal(got, c.want) {
			t.Errorf("%s: faults %q, want %q", c.name, got, c.want)
		}
	}
	// The clean fixture is a whole guest's log: it must hold what the
	// tests did, or it proves nothing.
	if !strings.Contains(read("dmesg-arm64-6.12-clean.txt"), "bond0") {
		t.Fatal("the clean fixture shows no test's bond: not a log of a run")
	}
}
