package bpf

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// KernelAtLeast reports whether the running kernel's release is major.minor
// or later, with the release (uname -r); err says why it could not be read.
// For what the kernel takes or ignores without an error, where the version
// is the only test.
func KernelAtLeast(major, minor int) (ok bool, release string, err error) {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return false, "", fmt.Errorf("uname: %w", err)
	}
	rel := unix.ByteSliceToString(u.Release[:])
	var ma, mi int
	if _, err := fmt.Sscanf(rel, "%d.%d", &ma, &mi); err != nil {
		return false, rel, fmt.Errorf("kernel release %s unreadable", rel)
	}
	return ma > major || (ma == major && mi >= minor), rel, nil
}

// CandidatesInMirrorFrom is the first release whose kernel takes
// tr_candidates (a syscall program that loops over maps allocated on
// demand, which sleepable programs may use from 6.0), so that the
// source-MAC candidates live in the mirror's values rather than in a map
// of their own: what the tracer's maps cost per entry depends on it. The
// loader tries the program itself; this is for planning before it loads.
var CandidatesInMirrorFrom = [2]int{6, 0}
