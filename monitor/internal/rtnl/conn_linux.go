package rtnl

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// replyTimeout bounds one wait for a reply. The kernel answers a route
// request while it handles the send, or the dump while the reader reads,
// so a wait this long means the socket is broken, not busy.
const replyTimeout = 5 * time.Second

// Conn is a NETLINK_ROUTE socket for requests and their replies, in no
// multicast group. It reads into one buffer on the heap that grows to the
// largest datagram it has met (a peek tells the size first); the
// library's reader kept 64 KiB on the caller's stack, and every goroutine
// that asked the kernel something periodically kept a 128 KiB stack.
//
// A Conn belongs to the namespace it was opened in, whichever thread uses
// it later. It is not safe for concurrent use.
type Conn struct {
	fd  int
	buf []byte
	seq uint32
	pid uint32
}

// Dial opens a Conn in the calling thread's network namespace.
func Dial() (*Conn, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_ROUTE)
	if err != nil {
		return nil, fmt.Errorf("open netlink socket: %w", err)
	}
	tv := unix.NsecToTimeval(replyTimeout.Nanoseconds())
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("set netlink receive timeout: %w", err)
	}
	// Strict checking makes the kernel honour a dump's filters.
	_ = unix.SetsockoptInt(fd, unix.SOL_NETLINK, unix.NETLINK_GET_STRICT_CHK, 1)
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("bind netlink socket: %w", err)
	}
	c := &Conn{fd: fd, buf: make([]byte, 4096), seq: uint32(time.Now().UnixNano())}
	if sa, err := unix.Getsockname(fd); err == nil {
		if nl, ok := sa.(*unix.SockaddrNetlink); ok {
			c.pid = nl.Pid
		}
	}
	return c, nil
}

// Close closes the socket.
func (c *Conn) Close() error { return unix.Close(c.fd) }

// Do sends one request, a message of type typ with flags (NLM_F_REQUEST is
// added) and body, and calls fn for each message of its reply, with the
// body only (the slice is valid during the call). A dump's reply ends at
// NLMSG_DONE; another request's at its one message, or its
// acknowledgement when flags ask for one. An error the kernel answers is
// returned as its syscall.Errno (unix.ENOENT for an entry not found).
func (c *Conn) Do(typ, flags uint16, body []byte, fn func(typ uint16, body []byte) error) error {
	c.seq++
	seq := c.seq
	req := AppendMessage(make([]byte, 0, unix.NLMSG_HDRLEN+len(body)+unix.NLMSG_ALIGNTO), typ, flags|unix.NLM_F_REQUEST, seq, body)
	if err := unix.Sendto(c.fd, req, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return fmt.Errorf("send netlink request: %w", err)
	}
	for {
		b, err := c.recv()
		if err != nil {
			return err
		}
		done := false
		var ferr error
		err = ParseDatagram(b, func(m Message) error {
			if m.Header.Seq != seq || m.Header.Pid != c.pid {
				return nil // a late reply to an earlier request
			}
			switch m.Header.Type {
			case unix.NLMSG_DONE, unix.NLMSG_ERROR:
				done = true
				if len(m.Body) >= 4 {
					if e := int32(binary.NativeEndian.Uint32(m.Body[:4])); e < 0 {
						return unix.Errno(-e)
					}
				}
				return errStop
			}
			if ferr == nil {
				ferr = fn(m.Header.Type, m.Body)
			}
			if m.Header.Flags&unix.NLM_F_MULTI == 0 && flags&unix.NLM_F_ACK == 0 {
				done = true
				return errStop
			}
			return nil
		})
		if err != nil && !errors.Is(err, errStop) {
			return err
		}
		if done {
			return ferr
		}
	}
}

// errStop ends a walk of a datagram early.
var errStop = errors.New("stop")

// recv reads one datagram into the Conn's buffer (RecvSized). The slice
// is valid until the next call.
func (c *Conn) recv() ([]byte, error) {
	for {
		n, err := RecvSized(c.fd, &c.buf)
		if err == unix.EINTR {
			continue
		}
		if err == unix.EAGAIN {
			return nil, fmt.Errorf("no netlink reply in %v: %w", replyTimeout, os.ErrDeadlineExceeded)
		}
		if err != nil {
			return nil, fmt.Errorf("receive netlink reply: %w", err)
		}
		return c.buf[:n], nil
	}
}

// RecvSized reads one datagram from fd into *buf, first peeking at its
// size (MSG_PEEK|MSG_TRUNC) and growing *buf to hold it, so a buffer can
// start small and stay the size of the largest datagram met. The errors
// are recvfrom's, unwrapped (EAGAIN, EINTR, ENOBUFS).
func RecvSized(fd int, buf *[]byte) (int, error) {
	n, _, err := unix.Recvfrom(fd, (*buf)[:1], unix.MSG_PEEK|unix.MSG_TRUNC)
	if err != nil {
		return 0, err
	}
	if n > len(*buf) {
		*buf = make([]byte, n)
	}
	n, _, err = unix.Recvfrom(fd, *buf, 0)
	return n, err
}
