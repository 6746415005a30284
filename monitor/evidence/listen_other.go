//go:build !linux

package evidence

import "errors"

// startLocked: packet sockets exist only on Linux.
func (w *Watcher) startLocked(int32, Link) {
	if w.disabled == nil {
		w.disabled = errors.New("ARP and NDP listeners need Linux packet sockets")
	}
}
