package evidence

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/mdlayher/arp"
	"github.com/mdlayher/ethernet"
)

// Kind is what an ARP or NDP packet says.
type Kind uint8

// Packet kinds as neighwatch counts them.
const (
	ARPRequest        Kind = iota
	ARPReply               // a reply that is not gratuitous
	ARPGratuitous          // request or reply announcing the sender's own IP
	NDPSolicitation        // Neighbor Solicitation with a source link-layer address
	NDPAdvertisement       // solicited Neighbor Advertisement
	NDPUnsolicitedAdv      // unsolicited Neighbor Advertisement (IPv6's gratuitous ARP)
	numKinds
)

var kindNames = [numKinds]string{"request", "reply", "gratuitous", "solicitation", "advertisement", "unsolicited_advertisement"}

// String returns the kind as the metrics label it.
func (k Kind) String() string {
	if k < numKinds {
		return kindNames[k]
	}
	return "unknown"
}

// Announces reports whether the kind is a sender announcing its own
// address unasked: a gratuitous ARP, an unsolicited NA.
func (k Kind) Announces() bool { return k == ARPGratuitous || k == NDPUnsolicitedAdv }

// ARPKinds lists the ARP kinds, for pre-creating metric series.
func ARPKinds() []Kind { return []Kind{ARPRequest, ARPReply, ARPGratuitous} }

// NDPKinds lists the NDP kinds.
func NDPKinds() []Kind { return []Kind{NDPSolicitation, NDPAdvertisement, NDPUnsolicitedAdv} }

// Observation is the evidence one ARP or NDP packet gives: sender IP is
// at sender MAC.
type Observation struct {
	Kind      Kind
	SenderIP  netip.Addr
	SenderMAC net.HardwareAddr
	TargetIP  netip.Addr
}

// Reasons a frame carries no usable evidence.
var (
	ErrNotARP       = errors.New("not an ARP frame")
	ErrNotIPv4ARP   = errors.New("ARP packet is not Ethernet/IPv4")
	ErrOwnFrame     = errors.New("frame sent by this host")
	ErrNoSenderIP   = errors.New("ARP probe without sender IP")
	ErrBadOperation = errors.New("ARP operation is neither request nor reply")
)

// ParseARP turns one Ethernet frame into an observation. own is the
// receiving interface's MAC: packet sockets also see what the host sends,
// and the host's own packets say nothing about its neighbours.
func ParseARP(frame []byte, own net.HardwareAddr) (Observation, error) {
	var f ethernet.Frame
	if err := f.UnmarshalBinary(frame); err != nil {
		return Observation{}, fmt.Errorf("malformed Ethernet frame: %w", err)
	}
	if f.EtherType != ethernet.EtherTypeARP {
		return Observation{}, ErrNotARP
	}
	var p arp.Packet
	if err := p.UnmarshalBinary(f.Payload); err != nil {
		return Observation{}, fmt.Errorf("malformed ARP packet: %w", err)
	}
	if p.HardwareType != 1 || p.ProtocolType != uint16(ethernet.EtherTypeIPv4) || p.HardwareAddrLength != 6 || p.IPLength != 4 {
		return Observation{}, ErrNotIPv4ARP
	}
	if len(own) > 0 && (bytes.Equal(f.Source, own) || bytes.Equal(p.SenderHardwareAddr, own)) {
		return Observation{}, ErrOwnFrame
	}
	if !p.SenderIP.IsValid() || p.SenderIP.IsUnspecified() {
		return Observation{}, ErrNoSenderIP
	}
	o := Observation{SenderIP: p.SenderIP, SenderMAC: p.SenderHardwareAddr, TargetIP: p.TargetIP}
	switch {
	case p.Operation != arp.OperationRequest && p.Operation != arp.OperationReply:
		return Observation{}, ErrBadOperation
	case p.SenderIP == p.TargetIP:
		o.Kind = ARPGratuitous
	case p.Operation == arp.OperationRequest:
		o.Kind = ARPRequest
	default:
		o.Kind = ARPReply
	}
	return o, nil
}
