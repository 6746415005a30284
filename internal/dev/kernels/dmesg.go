package kernels

import (
	"regexp"
	"strings"
)

// dmesgStamp is the time stamp the kernel puts before each line.
var dmesgStamp = regexp.MustCompile(`^\[\s*\d+\.\d+\]\s?`)

// What starts a report in a kernel's log. A report the emulator causes
// (a vCPU thread the host descheduled: a soft lockup, an RCU stall, a
// task blocked for long) is the machine's, not the agent's, and is
// tolerated here; ConsoleFault says when there are enough of them to call
// the guest hung.
var (
	reportStart    = regexp.MustCompile(`^(-+\[ cut here \]-+|WARNING:|BUG:|kernel BUG|Oops|general protection fault|Kernel panic|UBSAN:|KASAN:|Unable to handle kernel)`)
	emulatorReport = regexp.MustCompile(`BUG: soft lockup|BUG: workqueue lockup|rcu.*(self-detected )?stall|INFO: task .* blocked for more than|rcu: INFO:`)
	callTrace      = regexp.MustCompile(`^Call [Tt]race:`)
	reportEnd      = regexp.MustCompile(`^---\[ end trace`)
	// The BPF verifier's own words: a line naming bpf and the verifier, or
	// the verifier's bug. Not every "verifier" is the BPF one: kernels
	// built with tracing print "trace event string verifier disabled" at
	// boot, before any program of ours loads.
	verifierWord = regexp.MustCompile(`(?i)\bbpf\b.*\bverifier\b|\bverifier\b.*\bbug\b`)
)

// DmesgFaults lists the kernel's own complaints in its log, one line each
// with the line that named it: a WARNING, a BUG, an oops, a call trace
// of no report, or the verifier's words. The agent and the tests must
// leave a guest's log without any; the emulator's stalls are left out.
func DmesgFaults(dmesg string) []string {
	var faults []string
	const (
		none = iota
		fault
		tolerated
	)
	state := none
	var cut string // a "cut here" report's message, until its WARNING line
	for _, raw := range strings.Split(dmesg, "\n") {
		l := strings.TrimSpace(dmesgStamp.ReplaceAllString(raw, ""))
		switch {
		case l == "":
		case emulatorReport.MatchString(l):
			state = tolerated
		case reportEnd.MatchString(l):
			state = none
		case strings.Contains(l, "[ cut here ]"):
			state, cut = fault, "-"
		case reportStart.MatchString(l):
			if state != fault || cut != "" {
				msg := l
				if cut != "" && cut != "-" {
					msg = cut + " (" + l + ")"
				}
				faults = append(faults, msg)
			}
			state, cut = fault, ""
		case cut == "-":
			cut = l // the line a WARN prints before its WARNING line
		case callTrace.MatchString(l):
			if state == none {
				faults = append(faults, "a call trace of no report")
				state = fault
			}
		case state == none && verifierWord.MatchString(l):
			faults = append(faults, l)
		}
	}
	return faults
}
