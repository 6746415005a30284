package connlimit

import (
	"net"
	"strconv"

	"golang.org/x/sys/unix"
)

// peerKey names a Unix socket's peer process (SO_PEERCRED: the process
// that connected), "" for any other connection or when the kernel does
// not say.
func peerKey(c net.Conn) string {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return ""
	}
	rc, err := uc.SyscallConn()
	if err != nil {
		return ""
	}
	var cred *unix.Ucred
	var credErr error
	err = rc.Control(func(fd uintptr) {
		cred, credErr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	})
	if err != nil || credErr != nil {
		return ""
	}
	return "pid " + strconv.Itoa(int(cred.Pid))
}
