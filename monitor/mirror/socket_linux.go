package mirror

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"

	"github.com/neighwatch/neighwatch/monitor/internal/rtnl"
	"golang.org/x/sys/unix"
)

// nlSocket is a NETLINK_ROUTE socket subscribed to RTNLGRP_NEIGH that also
// carries our dump requests, so dump replies and notifications arrive in
// one ordered stream. It reads into one reused buffer, and exposes the
// message headers that tell dump replies from notifications.
//
// vishvananda/netlink's NeighSubscribe hides both (and allocates 64 KiB per
// message), so the receive loop is ours while decoding rules follow the
// kernel's uapi as that library does.
type nlSocket struct {
	f      *os.File
	rc     syscall.RawConn
	buf    []byte
	peek   bool // buf grows to each datagram's size, which recv peeks at
	pid    uint32
	rcvbuf int  // effective SO_RCVBUF as the kernel reports it
	forced bool // SO_RCVBUFFORCE worked
}

// openNeighSocket opens the neighbour socket, which reads into 64 KiB: a
// dump's datagrams fill that much, and the dump is the hot path.
func openNeighSocket(rcvbuf int) (*nlSocket, error) {
	return openSocket("neighbour", unix.RTNLGRP_NEIGH, rcvbuf, false)
}

// openLinkSocket opens a socket subscribed to RTNLGRP_LINK, with a buffer
// that starts at a page and grows to the largest notification: links
// change rarely, and the buffer is kept for the agent's life.
func openLinkSocket() (*nlSocket, error) {
	return openSocket("link", unix.RTNLGRP_LINK, 0, true)
}

func openSocket(what string, group uint32, rcvbuf int, peek bool) (*nlSocket, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, unix.NETLINK_ROUTE)
	if err != nil {
		return nil, fmt.Errorf("open netlink socket: %w", err)
	}
	s := &nlSocket{buf: make([]byte, 64<<10), peek: peek}
	if peek {
		s.buf = make([]byte, 4096)
	}
	if rcvbuf > 0 {
		if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, rcvbuf); err == nil {
			s.forced = true
		} else if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, rcvbuf); err != nil {
			unix.Close(fd)
			return nil, fmt.Errorf("set netlink receive buffer to %d bytes: %w", rcvbuf, err)
		}
	}
	s.rcvbuf, _ = unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF)
	// Strict checking makes the kernel honour the family filter of dumps.
	_ = unix.SetsockoptInt(fd, unix.SOL_NETLINK, unix.NETLINK_GET_STRICT_CHK, 1)
	sa := &unix.SockaddrNetlink{Family: unix.AF_NETLINK, Groups: 1 << (group - 1)}
	if err := unix.Bind(fd, sa); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("subscribe to %s notifications: %w", what, err)
	}
	if lsa, err := unix.Getsockname(fd); err == nil {
		if nl, ok := lsa.(*unix.SockaddrNetlink); ok {
			s.pid = nl.Pid
		}
	}
	s.f = os.NewFile(uintptr(fd), "netlink-"+what)
	s.rc, err = s.f.SyscallConn()
	if err != nil {
		s.f.Close()
		return nil, err
	}
	return s, nil
}

// requestDump asks for every neighbour entry of both families.
func (s *nlSocket) requestDump(seq uint32) error {
	var req [unix.NLMSG_HDRLEN + unix.SizeofNdMsg]byte
	binary.NativeEndian.PutUint32(req[0:4], uint32(len(req)))
	binary.NativeEndian.PutUint16(req[4:6], unix.RTM_GETNEIGH)
	binary.NativeEndian.PutUint16(req[6:8], unix.NLM_F_REQUEST|unix.NLM_F_DUMP)
	binary.NativeEndian.PutUint32(req[8:12], seq)
	// ndmsg: family AF_UNSPEC, everything else zero.
	var serr error
	err := s.rc.Write(func(fd uintptr) bool {
		serr = unix.Sendto(int(fd), req[:], 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK})
		return serr != unix.EAGAIN
	})
	if err != nil {
		return err
	}
	return serr
}

// recv reads one datagram. The slice is valid until the next call.
func (s *nlSocket) recv() ([]byte, error) {
	var (
		n    int
		rerr error
	)
	err := s.rc.Read(func(fd uintptr) bool {
		if s.peek {
			n, rerr = rtnl.RecvSized(int(fd), &s.buf)
		} else {
			n, _, rerr = unix.Recvfrom(int(fd), s.buf, 0)
		}
		return rerr != unix.EAGAIN
	})
	if err != nil {
		return nil, err
	}
	if rerr != nil {
		return nil, rerr
	}
	return s.buf[:n], nil
}

// interrupt makes a blocked recv return os.ErrDeadlineExceeded.
func (s *nlSocket) interrupt() { _ = s.f.SetReadDeadline(time.Unix(1, 0)) }

func (s *nlSocket) clearInterrupt() { _ = s.f.SetReadDeadline(time.Time{}) }

func (s *nlSocket) Close() error { return s.f.Close() }

func isInterrupt(err error) bool { return errors.Is(err, os.ErrDeadlineExceeded) }
