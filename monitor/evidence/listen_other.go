//go:build !linux

package evidence

import "errors"

// open: packet sockets exist only on Linux.
func (w *Watcher) open(int32, Link, bool) (*listener, error) {
	return nil, errors.ErrUnsupported
}
