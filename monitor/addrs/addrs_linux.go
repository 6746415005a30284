package addrs

import (
	"encoding/binary"
	"fmt"
	"net/netip"

	"github.com/neighwatch/neighwatch/monitor/internal/nsenter"
	"github.com/neighwatch/neighwatch/monitor/internal/rtnl"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// sizeofIfaddrmsg is struct ifaddrmsg: family, prefix length, flags,
// scope and the interface's index.
const sizeofIfaddrmsg = 8

// Reader dumps the interfaces' addresses in one namespace.
type Reader struct {
	ns netns.NsHandle
}

// NewReader returns a reader for namespace ns (netns.None(): the caller's).
func NewReader(ns netns.NsHandle) *Reader { return &Reader{ns: ns} }

// Read dumps every interface's global-scope addresses as prefixes.
func (r *Reader) Read() (Prefixes, error) {
	c, err := nsenter.Open(r.ns, rtnl.Dial)
	if err != nil {
		return nil, fmt.Errorf("dump interface addresses: %w", err)
	}
	defer c.Close()
	out := Prefixes{}
	err = c.Do(unix.RTM_GETADDR, unix.NLM_F_DUMP, make([]byte, sizeofIfaddrmsg), func(typ uint16, b []byte) error {
		if typ != unix.RTM_NEWADDR {
			return nil
		}
		a, err := Decode(b)
		if err == nil && a.Scope == unix.RT_SCOPE_UNIVERSE && a.Prefix.IsValid() {
			out.Add(a.Ifindex, a.Prefix)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("dump interface addresses: %w", err)
	}
	return out, nil
}

// Addr is one address of one interface.
type Addr struct {
	Ifindex int32
	Scope   uint8
	Prefix  netip.Prefix // the address and its prefix length
}

// Decode decodes the body of one RTM_NEWADDR message. The address is
// IFA_LOCAL where there is one (on a point-to-point link IFA_ADDRESS is
// the peer's), else IFA_ADDRESS.
func Decode(b []byte) (Addr, error) {
	if len(b) < sizeofIfaddrmsg {
		return Addr{}, fmt.Errorf("address message of %d bytes", len(b))
	}
	a := Addr{Scope: b[3], Ifindex: int32(binary.NativeEndian.Uint32(b[4:8]))}
	bits := int(b[1])
	var local, address netip.Addr
	err := rtnl.WalkAttrs(b[sizeofIfaddrmsg:], func(t uint16, v []byte) error {
		ip, ok := netip.AddrFromSlice(v)
		switch {
		case !ok:
		case t == unix.IFA_LOCAL:
			local = ip
		case t == unix.IFA_ADDRESS:
			address = ip
		}
		return nil
	})
	if err != nil {
		return Addr{}, err
	}
	ip := local
	if !ip.IsValid() {
		ip = address
	}
	if ip.IsValid() && bits <= ip.BitLen() {
		a.Prefix = netip.PrefixFrom(ip, bits)
	}
	return a, nil
}

// Segments reads the addresses now and returns what names the segment of
// a neighbour at addr on interface ifindex (Segment).
func (r *Reader) Segments() (func(ifindex int32, addr netip.Addr) string, error) {
	ps, err := r.Read()
	if err != nil {
		return nil, err
	}
	return func(ifindex int32, addr netip.Addr) string { return Segment(ps[ifindex], addr) }, nil
}
