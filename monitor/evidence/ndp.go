package evidence

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/mdlayher/ethernet"
	"github.com/mdlayher/ndp"
	"golang.org/x/net/bpf"
	"golang.org/x/net/ipv6"
)

// Reasons an IPv6 frame carries no neighbour evidence.
var (
	ErrNotND       = errors.New("not an ICMPv6 neighbour discovery message")
	ErrNoLinkLayer = errors.New("neighbour discovery message without a link-layer address option")
)

const (
	ethHdrLen   = 14 // destination, source, EtherType
	ipv6HdrLen  = ipv6.HeaderLen
	icmpv6Proto = 58 // IANA protocol number of ICMPv6
)

// ParseNDP turns one Ethernet frame into an observation: a Neighbor
// Solicitation says its source address is at its source link-layer
// address, a Neighbor Advertisement says its target address is at its
// target link-layer address. own is the receiving interface's MAC.
func ParseNDP(frame []byte, own net.HardwareAddr) (Observation, error) {
	if len(frame) < ethHdrLen+ipv6HdrLen+4 {
		return Observation{}, fmt.Errorf("frame of %d bytes is too short for ICMPv6", len(frame))
	}
	if ethernet.EtherType(binary.BigEndian.Uint16(frame[12:14])) != ethernet.EtherTypeIPv6 {
		return Observation{}, ErrNotND
	}
	if len(own) > 0 && bytes.Equal(frame[6:12], own) {
		return Observation{}, ErrOwnFrame
	}
	ip := frame[ethHdrLen:]
	if ip[0]>>4 != 6 || ip[6] != icmpv6Proto {
		return Observation{}, ErrNotND
	}
	if ip[7] != 255 { // RFC 4861: ND messages arrive with hop limit 255
		return Observation{}, ErrNotND
	}
	src := netip.AddrFrom16([16]byte(ip[8:24]))
	m, err := ndp.ParseMessage(ip[ipv6HdrLen:])
	if err != nil {
		return Observation{}, fmt.Errorf("malformed neighbour discovery message: %w", err)
	}
	lla := func(opts []ndp.Option, dir ndp.Direction) net.HardwareAddr {
		for _, o := range opts {
			if l, ok := o.(*ndp.LinkLayerAddress); ok && l.Direction == dir && len(l.Addr) == 6 {
				return l.Addr
			}
		}
		return nil
	}
	var o Observation
	switch m := m.(type) {
	case *ndp.NeighborSolicitation:
		if src.IsUnspecified() {
			return Observation{}, ErrNoSenderIP // duplicate address detection
		}
		o = Observation{Kind: NDPSolicitation, SenderIP: src, SenderMAC: lla(m.Options, ndp.Source), TargetIP: m.TargetAddress}
	case *ndp.NeighborAdvertisement:
		o = Observation{Kind: NDPAdvertisement, SenderIP: m.TargetAddress, SenderMAC: lla(m.Options, ndp.Target), TargetIP: m.TargetAddress}
		if !m.Solicited {
			o.Kind = NDPUnsolicitedAdv
		}
	default:
		return Observation{}, ErrNotND
	}
	if o.SenderMAC == nil {
		return Observation{}, ErrNoLinkLayer
	}
	if len(own) > 0 && bytes.Equal(o.SenderMAC, own) {
		return Observation{}, ErrOwnFrame
	}
	o.SenderIP = o.SenderIP.WithZone("")
	return o, nil
}

// ndpFilter is a classic BPF socket filter that passes only ICMPv6
// Neighbor Solicitations (135) and Advertisements (136) without extension
// headers, so the listener never sees other IPv6 traffic.
func ndpFilter() ([]bpf.RawInstruction, error) {
	return bpf.Assemble([]bpf.Instruction{
		bpf.LoadAbsolute{Off: 12, Size: 2},                                                                  // EtherType
		bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: uint32(ethernet.EtherTypeIPv6), SkipTrue: 5},                // IPv6?
		bpf.LoadAbsolute{Off: ethHdrLen + 6, Size: 1},                                                       // next header
		bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: icmpv6Proto, SkipTrue: 3},                                   // ICMPv6?
		bpf.LoadAbsolute{Off: ethHdrLen + ipv6HdrLen, Size: 1},                                              // ICMPv6 type
		bpf.JumpIf{Cond: bpf.JumpLessThan, Val: uint32(ipv6.ICMPTypeNeighborSolicitation), SkipTrue: 1},     // >= 135
		bpf.JumpIf{Cond: bpf.JumpLessOrEqual, Val: uint32(ipv6.ICMPTypeNeighborAdvertisement), SkipTrue: 1}, // <= 136
		bpf.RetConstant{Val: 0},      // drop
		bpf.RetConstant{Val: 0xffff}, // keep
	})
}
