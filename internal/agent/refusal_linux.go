package agent

import (
	"bufio"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/cilium/ebpf/rlimit"
	"golang.org/x/sys/unix"
)

// memlockHint is what cilium/ebpf appends to every EPERM from bpf(2). On
// kernels since 5.11 BPF memory is charged to the cgroup, not to
// RLIMIT_MEMLOCK, and the agent removes the limit anyway, so the hint
// only points away from the real cause.
const memlockHint = " (MEMLOCK may be too low, consider rlimit.RemoveMemlock)"

// memlock is what the agent made of RLIMIT_MEMLOCK at start.
type memlock struct {
	// err: the kernel charges BPF memory to RLIMIT_MEMLOCK (before 5.11)
	// and raising the limit failed; nil when it was raised or is not
	// charged.
	err error
	// cur is the limit in force, in bytes (RLIM_INFINITY when unlimited).
	cur uint64
}

// stuck reports whether BPF maps are charged to a limit the agent could
// not lift.
func (m memlock) stuck() bool { return m.err != nil }

// String names the limit for an operator: "64 KiB".
func (m memlock) String() string {
	if m.cur == unix.RLIM_INFINITY {
		return "unlimited"
	}
	return fmt.Sprintf("%d KiB", m.cur/1024)
}

// bpfRefusal explains an EPERM from bpf(2) in one line: what was refused
// and the suspects, with what this process can see of each. ok is false
// for any other error.
func bpfRefusal(err error, c caps, ml memlock) (line string, ok bool) {
	if !errors.Is(err, unix.EPERM) {
		return "", false
	}
	var b strings.Builder
	b.WriteString("the kernel refused bpf(2) with EPERM (")
	b.WriteString(strings.ReplaceAll(err.Error(), memlockHint, ""))
	b.WriteString("); the usual causes: ")
	var suspects []string
	if ml.stuck() {
		// First: on such a kernel it is the likeliest cause, and the one
		// that gives no other sign.
		suspects = append(suspects, "RLIMIT_MEMLOCK is "+ml.String()+" and could not be raised ("+ml.err.Error()+
			"): this kernel (before 5.11) charges BPF maps to it; grant CAP_SYS_RESOURCE (the DaemonSet and the systemd unit do) or raise the container's memlock limit")
	}
	switch seccompMode() {
	case "2":
		suspects = append(suspects, "a seccomp filter is on (Seccomp: 2 in /proc/self/status): container runtimes' default profiles block bpf(2) without CAP_SYS_ADMIN, so run the container with the DaemonSet's seccomp profile (Unconfined) or one that allows bpf")
	case "0":
		suspects = append(suspects, "seccomp (no filter on this process)")
	default:
		suspects = append(suspects, "a seccomp filter blocking bpf(2)")
	}
	if c.bpf() {
		suspects = append(suspects, "capabilities (CAP_BPF and CAP_PERFMON are held)")
	} else {
		suspects = append(suspects, "missing CAP_BPF and CAP_PERFMON (CAP_SYS_ADMIN before Linux 5.8)")
	}
	suspects = append(suspects, "kernel lockdown ("+lockdownMode()+")")
	b.WriteString(strings.Join(suspects, "; "))
	if !ml.stuck() {
		b.WriteString("; not RLIMIT_MEMLOCK (" + ml.String() + ": lifted, or not charged on this kernel)")
	}
	return b.String(), true
}

// seccompMode is the Seccomp field of /proc/self/status: "0" none, "1"
// strict, "2" filter; "" if unknown.
func seccompMode() string {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return ""
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if v, ok := strings.CutPrefix(s.Text(), "Seccomp:"); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// lockdownMode says what /sys/kernel/security/lockdown shows: the mode in
// brackets is the one in force.
func lockdownMode() string {
	b, err := os.ReadFile("/sys/kernel/security/lockdown")
	if err != nil {
		return "/sys/kernel/security/lockdown unreadable"
	}
	s := strings.TrimSpace(string(b))
	if i := strings.IndexByte(s, '['); i >= 0 {
		if j := strings.IndexByte(s[i:], ']'); j > 0 {
			return "mode " + s[i+1:i+j]
		}
	}
	return s
}

// raiseMemlock lets kernels before 5.11, which charge BPF memory to
// RLIMIT_MEMLOCK, load the programs. On such a kernel, a limit it cannot
// lift (no CAP_SYS_RESOURCE, a container's 64 KiB) is said in one line:
// it makes bpf(2) refuse with EPERM and nothing else.
func raiseMemlock(log *slog.Logger) memlock {
	var ml memlock
	ml.err = rlimit.RemoveMemlock()
	var r unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_MEMLOCK, &r); err == nil {
		ml.cur = r.Cur
	}
	if ml.stuck() {
		log.Warn("RLIMIT_MEMLOCK is " + ml.String() + " and could not be raised (" + ml.err.Error() +
			"): this kernel (before 5.11) charges BPF maps to it, so the tracer and datapath may be refused; grant CAP_SYS_RESOURCE or raise the memlock limit")
	}
	return ml
}
