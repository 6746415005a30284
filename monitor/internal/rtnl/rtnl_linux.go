package rtnl

import (
	"encoding/binary"
	"fmt"

	"golang.org/x/sys/unix"
)

// typeMask strips NLA_F_NESTED and NLA_F_NET_BYTEORDER from an attribute
// type.
const typeMask = ^uint16(unix.NLA_F_NESTED | unix.NLA_F_NET_BYTEORDER)

// WalkAttrs calls fn for each route attribute (struct rtattr) in b, with
// the type stripped of its flag bits. It stops at the first error fn
// returns, and reports an attribute whose length does not fit.
func WalkAttrs(b []byte, fn func(typ uint16, v []byte) error) error {
	for len(b) >= unix.SizeofRtAttr {
		l := int(binary.NativeEndian.Uint16(b[0:2]))
		t := binary.NativeEndian.Uint16(b[2:4]) & typeMask
		if l < unix.SizeofRtAttr || l > len(b) {
			return fmt.Errorf("attribute %d has bad length %d", t, l)
		}
		if err := fn(t, b[unix.SizeofRtAttr:l]); err != nil {
			return err
		}
		next := (l + unix.RTA_ALIGNTO - 1) &^ (unix.RTA_ALIGNTO - 1)
		if next > len(b) {
			return nil
		}
		b = b[next:]
	}
	return nil
}

// Message is one netlink message inside a datagram; Body aliases the
// datagram.
type Message struct {
	Header unix.NlMsghdr
	Body   []byte
}

// ParseDatagram splits a netlink datagram into messages, calling fn for
// each. It stops at the first malformed header or error from fn.
func ParseDatagram(b []byte, fn func(m Message) error) error {
	for len(b) >= unix.NLMSG_HDRLEN {
		l := int(binary.NativeEndian.Uint32(b[0:4]))
		if l < unix.NLMSG_HDRLEN || l > len(b) {
			return fmt.Errorf("netlink message length %d does not fit datagram of %d bytes", l, len(b))
		}
		m := Message{
			Header: unix.NlMsghdr{
				Len:   uint32(l),
				Type:  binary.NativeEndian.Uint16(b[4:6]),
				Flags: binary.NativeEndian.Uint16(b[6:8]),
				Seq:   binary.NativeEndian.Uint32(b[8:12]),
				Pid:   binary.NativeEndian.Uint32(b[12:16]),
			},
			Body: b[unix.NLMSG_HDRLEN:l],
		}
		if err := fn(m); err != nil {
			return err
		}
		next := (l + unix.NLMSG_ALIGNTO - 1) &^ (unix.NLMSG_ALIGNTO - 1)
		if next >= len(b) {
			return nil
		}
		b = b[next:]
	}
	return nil
}

// AppendAttr appends one route attribute, padded to RTA_ALIGNTO; tests use
// it to build messages.
func AppendAttr(b []byte, typ uint16, v []byte) []byte {
	l := unix.SizeofRtAttr + len(v)
	b = binary.NativeEndian.AppendUint16(b, uint16(l))
	b = binary.NativeEndian.AppendUint16(b, typ)
	b = append(b, v...)
	for l%unix.RTA_ALIGNTO != 0 {
		b = append(b, 0)
		l++
	}
	return b
}

// AppendMessage appends one netlink message with its header, padded to
// NLMSG_ALIGNTO; tests use it to build datagrams.
func AppendMessage(b []byte, typ, flags uint16, seq uint32, body []byte) []byte {
	l := unix.NLMSG_HDRLEN + len(body)
	b = binary.NativeEndian.AppendUint32(b, uint32(l))
	b = binary.NativeEndian.AppendUint16(b, typ)
	b = binary.NativeEndian.AppendUint16(b, flags)
	b = binary.NativeEndian.AppendUint32(b, seq)
	b = binary.NativeEndian.AppendUint32(b, 0) // pid
	b = append(b, body...)
	for l%unix.NLMSG_ALIGNTO != 0 {
		b = append(b, 0)
		l++
	}
	return b
}
