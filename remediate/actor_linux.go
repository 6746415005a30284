package remediate

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"slices"
	"time"

	"github.com/mdlayher/arp"
	"github.com/mdlayher/ethernet"
	"github.com/mdlayher/ndp"
	"github.com/mdlayher/packet"
	"github.com/neighwatch/neighwatch/table"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// NetActor acts on the kernel of the namespace it runs in.
type NetActor struct {
	h *netlink.Handle
}

var _ Actor = (*NetActor)(nil)

// NewNetActor opens a netlink handle in the current namespace.
func NewNetActor() (*NetActor, error) {
	h, err := netlink.NewHandle(unix.NETLINK_ROUTE)
	if err != nil {
		return nil, fmt.Errorf("open netlink handle for remediation: %w", err)
	}
	return &NetActor{h: h}, nil
}

// Close releases the handle.
func (a *NetActor) Close() { a.h.Close() }

func ifaceOf(en *table.Entry) (*net.Interface, error) {
	ifi, err := net.InterfaceByIndex(int(en.Ifindex))
	if err != nil {
		return nil, fmt.Errorf("interface %d of %s is gone: %w", en.Ifindex, en.Addr, err)
	}
	return ifi, nil
}

// sourceIPv4 picks the interface address in the target's subnet, else the
// first IPv4 address, as the kernel's arp_solicit would.
func sourceIPv4(ifi *net.Interface, target netip.Addr) (netip.Addr, error) {
	addrs, err := ifi.Addrs()
	if err != nil {
		return netip.Addr{}, err
	}
	var first netip.Addr
	for _, a := range addrs {
		p, err := netip.ParsePrefix(a.String())
		if err != nil || !p.Addr().Is4() {
			continue
		}
		if p.Contains(target) {
			return p.Addr(), nil
		}
		if !first.IsValid() {
			first = p.Addr()
		}
	}
	if !first.IsValid() {
		return netip.Addr{}, fmt.Errorf("interface %s has no IPv4 address to send ARP probes from", ifi.Name)
	}
	return first, nil
}

// Probe sends one ARP request (IPv4) or Neighbor Solicitation (IPv6):
// phase 0 unicast to the entry's MAC as the kernel's own probe would,
// phase 1 broadcast / solicited-node multicast, which reaches the host
// wherever it now lives, and whoever else claims its IP. The host's
// unicast reply makes the kernel set the entry REACHABLE, with the new MAC
// if it moved. With listen > 0, Probe then reads the answers for that long
// (or until ctx ends) and returns each MAC that answered for the IP, once,
// in the order they came.
func (a *NetActor) Probe(ctx context.Context, en *table.Entry, phase int, listen time.Duration) ([]net.HardwareAddr, error) {
	ifi, err := ifaceOf(en)
	if err != nil {
		return nil, err
	}
	if en.Addr.Is4() {
		return probeARP(ctx, ifi, en, phase, listen)
	}
	return probeNDP(ctx, ifi, en, phase, listen)
}

// answers collects distinct MACs in arrival order.
type answers []net.HardwareAddr

func (as *answers) add(mac net.HardwareAddr) {
	for _, m := range *as {
		if bytes.Equal(m, mac) {
			return
		}
	}
	*as = append(*as, slices.Clone(mac))
}

// listenUntil is the end of a listen: listen from now, cut short by ctx.
func listenUntil(ctx context.Context, listen time.Duration) time.Time {
	end := time.Now().Add(listen)
	if d, ok := ctx.Deadline(); ok && d.Before(end) {
		end = d
	}
	return end
}

func probeARP(ctx context.Context, ifi *net.Interface, en *table.Entry, phase int, listen time.Duration) ([]net.HardwareAddr, error) {
	src, err := sourceIPv4(ifi, en.Addr)
	if err != nil {
		return nil, err
	}
	conn, err := packet.Listen(ifi, packet.Raw, unix.ETH_P_ARP, nil)
	if err != nil {
		return nil, fmt.Errorf("open ARP socket on %s: %w", ifi.Name, err)
	}
	defer conn.Close()
	c, err := arp.New(ifi, conn)
	if err != nil {
		return nil, fmt.Errorf("ARP client on %s: %w", ifi.Name, err)
	}
	dst := ethernet.Broadcast
	if phase == 0 {
		dst = en.HardwareAddr()
	}
	p, err := arp.NewPacket(arp.OperationRequest, ifi.HardwareAddr, src, net.HardwareAddr{0, 0, 0, 0, 0, 0}, en.Addr)
	if err != nil {
		return nil, err
	}
	if err := c.WriteTo(p, dst); err != nil {
		return nil, fmt.Errorf("send ARP request for %s on %s: %w", en.Addr, ifi.Name, err)
	}
	if listen <= 0 {
		return nil, nil
	}
	var got answers
	if err := c.SetReadDeadline(listenUntil(ctx, listen)); err != nil {
		return nil, err
	}
	for ctx.Err() == nil {
		r, _, err := c.Read()
		if err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) {
				break
			}
			continue // not an ARP packet this client parses
		}
		if r.Operation == arp.OperationReply && r.SenderIP == en.Addr && !bytes.Equal(r.SenderHardwareAddr, ifi.HardwareAddr) {
			got.add(r.SenderHardwareAddr)
		}
	}
	return got, nil
}

func probeNDP(ctx context.Context, ifi *net.Interface, en *table.Entry, phase int, listen time.Duration) ([]net.HardwareAddr, error) {
	// The link-local address, as the kernel would use; while it is still
	// tentative (a new interface), any other address of the interface.
	var conn *ndp.Conn
	var src netip.Addr
	var err error
	for _, a := range []ndp.Addr{ndp.LinkLocal, ndp.UniqueLocal, ndp.Global} {
		if conn, src, err = ndp.Listen(ifi, a); err == nil {
			break
		}
	}
	if err != nil {
		return nil, fmt.Errorf("open NDP socket on %s: %w", ifi.Name, err)
	}
	defer conn.Close()
	m := &ndp.NeighborSolicitation{
		TargetAddress: en.Addr,
		Options:       []ndp.Option{&ndp.LinkLayerAddress{Direction: ndp.Source, Addr: ifi.HardwareAddr}},
	}
	if phase == 0 {
		// Unicast to the entry's MAC, framed here: sent through the
		// kernel's IPv6 output, the solicitation would use the entry
		// itself and start its re-validation (STALE -> DELAY), which a
		// confirmation in dry-run must not.
		err = sendUnicastNS(ifi, en, src.WithZone(""), m)
	} else {
		var dst netip.Addr
		if dst, err = ndp.SolicitedNodeMulticast(en.Addr); err != nil {
			return nil, err
		}
		err = conn.WriteTo(m, nil, dst.WithZone(ifi.Name))
	}
	if err != nil {
		return nil, fmt.Errorf("send Neighbor Solicitation for %s on %s: %w", en.Addr, ifi.Name, err)
	}
	if listen <= 0 {
		return nil, nil
	}
	var got answers
	if err := conn.SetReadDeadline(listenUntil(ctx, listen)); err != nil {
		return nil, err
	}
	for ctx.Err() == nil {
		msg, _, _, err := conn.ReadFrom()
		if err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) {
				break
			}
			continue // a message the ndp package does not parse
		}
		na, ok := msg.(*ndp.NeighborAdvertisement)
		if !ok || na.TargetAddress != en.Addr {
			continue
		}
		// An answer names its MAC in the target link-layer address option
		// (RFC 4861 7.2.4: required in answers to multicast solicitations).
		// Linux leaves it out of its answer to a unicast one, which only
		// the holder of the MAC it was sent to received: a solicited
		// advertisement without it is that MAC's answer. (An unsolicited
		// one, a spoofer's or a mover's announcement, answers nothing.)
		named := false
		for _, o := range na.Options {
			if lla, ok := o.(*ndp.LinkLayerAddress); ok && lla.Direction == ndp.Target {
				got.add(lla.Addr)
				named = true
			}
		}
		if !named && na.Solicited && phase == 0 {
			got.add(en.HardwareAddr())
		}
	}
	return got, nil
}

// sendUnicastNS sends a Neighbor Solicitation for the entry's address in
// an Ethernet frame to the entry's MAC, from src, on a packet socket: the
// probe the kernel sends to a STALE entry in PROBE, without the kernel's
// neighbour entry.
func sendUnicastNS(ifi *net.Interface, en *table.Entry, src netip.Addr, m *ndp.NeighborSolicitation) error {
	icmp, err := ndp.MarshalMessageChecksum(m, src, en.Addr)
	if err != nil {
		return err
	}
	pc, err := packet.Listen(ifi, packet.Raw, unix.ETH_P_IPV6, nil)
	if err != nil {
		return err
	}
	defer pc.Close()
	frame := make([]byte, 14+40+len(icmp))
	copy(frame[0:6], en.HardwareAddr())
	copy(frame[6:12], ifi.HardwareAddr)
	binary.BigEndian.PutUint16(frame[12:14], unix.ETH_P_IPV6)
	ip := frame[14:54]
	ip[0] = 6 << 4
	binary.BigEndian.PutUint16(ip[4:6], uint16(len(icmp)))
	ip[6] = unix.IPPROTO_ICMPV6
	ip[7] = 255 // NDP's hop limit: a solicitation from further away is ignored
	s16, d16 := src.As16(), en.Addr.As16()
	copy(ip[8:24], s16[:])
	copy(ip[24:40], d16[:])
	copy(frame[54:], icmp)
	_, err = pc.WriteTo(frame, &packet.Addr{HardwareAddr: en.HardwareAddr()})
	return err
}

func (a *NetActor) neigh(en *table.Entry) *netlink.Neigh {
	fam := unix.AF_INET
	if en.Addr.Is6() {
		fam = unix.AF_INET6
	}
	return &netlink.Neigh{LinkIndex: int(en.Ifindex), Family: fam, IP: net.IP(en.Addr.AsSlice()), State: int(en.State)}
}

// Kick asks the kernel to re-resolve the entry (RTM_NEWNEIGH, NTF_USE): it
// runs neigh_event_send(), STALE -> DELAY -> PROBE. The kernel's unicast
// probes go to the old MAC, so a host that moved is not found unless
// mcast_resolicit is set; see docs/remediation.md.
func (a *NetActor) Kick(en *table.Entry) error {
	n := a.neigh(en)
	n.Flags = unix.NTF_USE
	if err := a.h.NeighSet(n); err != nil {
		return fmt.Errorf("kick %s on %d: %w", en.Addr, en.Ifindex, kernelRefusal(err))
	}
	return nil
}

// Flush deletes the entry.
func (a *NetActor) Flush(en *table.Entry) error {
	if err := a.h.NeighDel(a.neigh(en)); err != nil && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("flush %s on %d: %w", en.Addr, en.Ifindex, kernelRefusal(err))
	}
	return nil
}

func kernelRefusal(err error) error {
	if errors.Is(err, unix.EPERM) {
		return fmt.Errorf("%w (needs CAP_NET_ADMIN)", err)
	}
	return err
}
