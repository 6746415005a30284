package monitor

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"

	"golang.org/x/sys/unix"
)

// Update is one decoded RTM_NEWNEIGH or RTM_DELNEIGH message.
type Update struct {
	Delete   bool
	Family   uint8
	Ifindex  int32
	State    State
	Flags    uint8
	Type     uint8
	FlagsExt uint32
	Addr     netip.Addr
	LLAddr   []byte // aliases the message buffer

	HasCacheInfo bool
	// NDA_CACHEINFO ages, in USER_HZ ticks before the message was sent.
	Confirmed, Used, Updated uint32
}

const (
	sizeofNdmsg   = 12
	ndaFlagsExt   = 15     // NDA_FLAGS_EXT
	nlaTypeMask   = 0x3fff // ~(NLA_F_NESTED | NLA_F_NET_BYTEORDER)
	sizeofRtattr  = 4
	sizeofNlmsghd = unix.NLMSG_HDRLEN
)

var errShort = errors.New("truncated neighbour message")

// DecodeNeigh decodes the body (after the nlmsghdr) of an RTM_NEWNEIGH or
// RTM_DELNEIGH message. It never panics on malformed input; a message that
// lacks a destination address is an error.
func DecodeNeigh(msgType uint16, b []byte) (Update, error) {
	var u Update
	if msgType != unix.RTM_NEWNEIGH && msgType != unix.RTM_DELNEIGH {
		return u, fmt.Errorf("netlink message type %d is not a neighbour message", msgType)
	}
	if len(b) < sizeofNdmsg {
		return u, errShort
	}
	u.Delete = msgType == unix.RTM_DELNEIGH
	u.Family = b[0]
	u.Ifindex = int32(binary.NativeEndian.Uint32(b[4:8]))
	u.State = State(binary.NativeEndian.Uint16(b[8:10]))
	u.Flags = b[10]
	u.Type = b[11]
	err := walkAttrs(b[sizeofNdmsg:], func(t uint16, v []byte) error {
		switch t {
		case unix.NDA_DST:
			a, ok := netip.AddrFromSlice(v)
			if !ok {
				return fmt.Errorf("neighbour address has %d bytes", len(v))
			}
			u.Addr = a
		case unix.NDA_LLADDR:
			u.LLAddr = v
		case unix.NDA_CACHEINFO:
			if len(v) >= 12 {
				u.HasCacheInfo = true
				u.Confirmed = binary.NativeEndian.Uint32(v[0:4])
				u.Used = binary.NativeEndian.Uint32(v[4:8])
				u.Updated = binary.NativeEndian.Uint32(v[8:12])
			}
		case ndaFlagsExt:
			if len(v) >= 4 {
				u.FlagsExt = binary.NativeEndian.Uint32(v[0:4])
			}
		}
		return nil
	})
	if err != nil {
		return u, err
	}
	if !u.Addr.IsValid() {
		return u, errors.New("neighbour message without NDA_DST")
	}
	return u, nil
}

// walkAttrs calls fn for each route attribute (struct rtattr) in b, with
// the type stripped of its flag bits. It stops at the first error, or at a
// length that does not fit.
func walkAttrs(b []byte, fn func(t uint16, v []byte) error) error {
	for len(b) >= sizeofRtattr {
		l := int(binary.NativeEndian.Uint16(b[0:2]))
		t := binary.NativeEndian.Uint16(b[2:4]) & nlaTypeMask
		if l < sizeofRtattr || l > len(b) {
			return fmt.Errorf("attribute %d has bad length %d", t, l)
		}
		if err := fn(t, b[sizeofRtattr:l]); err != nil {
			return err
		}
		next := (l + unix.NLA_ALIGNTO - 1) &^ (unix.NLA_ALIGNTO - 1)
		if next > len(b) {
			return nil
		}
		b = b[next:]
	}
	return nil
}

// nlmsg is one netlink message inside a datagram.
type nlmsg struct {
	Type  uint16
	Flags uint16
	Seq   uint32
	Pid   uint32
	Body  []byte
}

// parseDatagram splits a netlink datagram into messages, calling fn for
// each. It stops at the first malformed header.
func parseDatagram(b []byte, fn func(m nlmsg) error) error {
	for len(b) >= sizeofNlmsghd {
		l := int(binary.NativeEndian.Uint32(b[0:4]))
		if l < sizeofNlmsghd || l > len(b) {
			return fmt.Errorf("netlink message length %d does not fit datagram of %d bytes", l, len(b))
		}
		m := nlmsg{
			Type:  binary.NativeEndian.Uint16(b[4:6]),
			Flags: binary.NativeEndian.Uint16(b[6:8]),
			Seq:   binary.NativeEndian.Uint32(b[8:12]),
			Pid:   binary.NativeEndian.Uint32(b[12:16]),
			Body:  b[sizeofNlmsghd:l],
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

// ticksToDuration converts USER_HZ ticks to nanoseconds. USER_HZ is 100 on
// every architecture Linux supports today (it is ABI, unlike HZ).
func ticksToNanos(t uint32) int64 { return int64(t) * 10_000_000 }
