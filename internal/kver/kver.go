// Package kver reads the running kernel's release, for what a kernel takes
// or ignores without an error, where the version is the only test. It
// imports nothing of the project: any layer may use it.
package kver

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// AtLeast reports whether the running kernel's release is major.minor or
// later, with the release (uname -r). err is uname's own error (release
// empty), or says the release did not read as major.minor (release set).
func AtLeast(major, minor int) (ok bool, release string, err error) {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return false, "", err
	}
	rel := unix.ByteSliceToString(u.Release[:])
	var ma, mi int
	if _, err := fmt.Sscanf(rel, "%d.%d", &ma, &mi); err != nil {
		return false, rel, fmt.Errorf("kernel release %s unreadable", rel)
	}
	return ma > major || (ma == major && mi >= minor), rel, nil
}
