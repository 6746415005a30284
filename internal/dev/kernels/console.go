package kernels

import "bytes"

// hungReports is how many soft-lockup reports make a guest hung: each
// means a vCPU ran kernel code without scheduling for 20 s or more of the
// guest's time. One may come of the host descheduling a vCPU thread; a
// kernel that is really stuck repeats it every 20 to 30 s.
const hungReports = 3

// What ConsoleFault says of each fault.
const (
	faultInt3 = "died of a stray int3 (static-key patching under TCG)"
	faultHung = "hung (soft lockups on its vCPUs)"
)

// ConsoleFault says how the guest's kernel itself failed, from its
// console, or "" when the console shows no such failure. These are faults
// of the emulated machine's kernel, not results of the tests it ran.
func ConsoleFault(console []byte) string {
	switch {
	case bytes.Contains(console, []byte("Oops: int3")):
		// Static-key patching leaves an int3 in the kernel's text for a
		// moment; under multi-threaded TCG another vCPU once ran it.
		return faultInt3
	case bytes.Count(console, []byte("BUG: soft lockup")) >= hungReports:
		return faultHung
	}
	return ""
}

// Hung reports whether ConsoleFault would call the guest hung: it will not
// finish, so the run may stop at once.
func Hung(console []byte) bool {
	return ConsoleFault(console) == faultHung
}
