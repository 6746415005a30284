//go:build !linux

package connlimit

import "net"

// peerKey names no peer off Linux: only the total bound applies to Unix
// sockets there.
func peerKey(net.Conn) string { return "" }
