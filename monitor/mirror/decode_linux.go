package mirror

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/neighwatch/neighwatch/monitor/internal/rtnl"
	"github.com/neighwatch/neighwatch/table"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

var errShort = errors.New("truncated neighbour message")

// userHZ is the unit of NDA_CACHEINFO ages: USER_HZ is 100 on every
// architecture Linux supports (it is ABI, unlike HZ).
const userHZ = 100

func ticks(t uint32) time.Duration { return time.Duration(t) * (time.Second / userHZ) }

// DecodeNeigh decodes the body (after the nlmsghdr) of an RTM_NEWNEIGH or
// RTM_DELNEIGH message. It never panics on malformed input; a message that
// lacks a destination address is an error. LLAddr aliases b.
func DecodeNeigh(msgType uint16, b []byte) (table.Update, error) {
	var u table.Update
	if msgType != unix.RTM_NEWNEIGH && msgType != unix.RTM_DELNEIGH {
		return u, fmt.Errorf("netlink message type %d is not a neighbour message", msgType)
	}
	if len(b) < unix.SizeofNdMsg {
		return u, errShort
	}
	// struct ndmsg: family, pad[3], ifindex, state, flags, type.
	u.Delete = msgType == unix.RTM_DELNEIGH
	u.Family = table.Family(b[0])
	u.Ifindex = int32(binary.NativeEndian.Uint32(b[4:8]))
	u.State = table.State(binary.NativeEndian.Uint16(b[8:10]))
	u.Flags = b[10]
	err := rtnl.WalkAttrs(b[unix.SizeofNdMsg:], func(t uint16, v []byte) error {
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
			// struct nda_cacheinfo: confirmed, used, updated, refcnt.
			if len(v) >= 12 {
				u.HasCacheInfo = true
				u.ConfirmedAge = ticks(binary.NativeEndian.Uint32(v[0:4]))
				u.UsedAge = ticks(binary.NativeEndian.Uint32(v[4:8]))
				u.UpdatedAge = ticks(binary.NativeEndian.Uint32(v[8:12]))
			}
		case netlink.NDA_PROTOCOL:
			if len(v) >= 1 {
				u.Protocol = v[0]
			}
		case netlink.NDA_FLAGS_EXT:
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
