//go:build !linux

package evidence

import (
	"errors"

	"github.com/vishvananda/netns"
)

// openListener: packet sockets exist only on Linux.
func openListener(*netns.NsHandle, int32, Link, bool) (*listener, error) {
	return nil, errors.ErrUnsupported
}
