package bpf

import (
	"fmt"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
)

// FentryAllowed asks the running kernel whether it loads and attaches an
// fentry program, with a program of its own that returns at once: not
// the tracer's loader, so that tests can hold the agent's answer
// against it. The kernel matrix's fentry column and the tests that
// depend on fentry (here and in e2e) all ask this. why says what refused
// it: lockdown, or an arm64 kernel before 6.4, among others.
func FentryAllowed() (ok bool, why string) {
	spec := &ebpf.ProgramSpec{
		Name:       "nw_fentry_probe",
		Type:       ebpf.Tracing,
		AttachType: ebpf.AttachTraceFEntry,
		// A helper every kernel since 5.3 has, and the one the tracer's
		// fentry mode hooks first.
		AttachTo:     "bpf_skb_fib_lookup",
		Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, 0), asm.Return()},
		License:      "GPL",
	}
	p, err := ebpf.NewProgram(spec)
	if err != nil {
		// cilium/ebpf hints at MEMLOCK on any EPERM; the callers lift it.
		return false, "load: " + strings.Replace(err.Error(), " (MEMLOCK may be too low, consider rlimit.RemoveMemlock)", "", 1)
	}
	defer p.Close()
	l, err := link.AttachTracing(link.TracingOptions{Program: p})
	if err != nil {
		return false, fmt.Sprintf("attach: %v", err)
	}
	l.Close()
	return true, ""
}
