package lab

import (
	"fmt"
	"net"
	"net/netip"

	"github.com/mdlayher/arp"
	"github.com/mdlayher/ethernet"
	"github.com/mdlayher/ndp"
	"github.com/mdlayher/packet"
	"golang.org/x/sys/unix"
)

// AnnounceARP sends count gratuitous ARP requests (sender and target IP
// both ip, sender MAC mac) to broadcast from dev in the namespace: what a
// host that moved to mac says to its segment.
func (n NS) AnnounceARP(dev string, ip netip.Addr, mac net.HardwareAddr, count int) error {
	return n.Do(func() error {
		ifi, err := net.InterfaceByName(dev)
		if err != nil {
			return err
		}
		conn, err := packet.Listen(ifi, packet.Raw, unix.ETH_P_ARP, nil)
		if err != nil {
			return fmt.Errorf("open ARP socket on %s: %w", dev, err)
		}
		defer conn.Close()
		p, err := arp.NewPacket(arp.OperationRequest, mac, ip, ethernet.Broadcast, ip)
		if err != nil {
			return err
		}
		pb, err := p.MarshalBinary()
		if err != nil {
			return err
		}
		f, err := (&ethernet.Frame{Destination: ethernet.Broadcast, Source: mac, EtherType: ethernet.EtherTypeARP, Payload: pb}).MarshalBinary()
		if err != nil {
			return err
		}
		for range count {
			if _, err := conn.WriteTo(f, &packet.Addr{HardwareAddr: ethernet.Broadcast}); err != nil {
				return fmt.Errorf("send gratuitous ARP on %s: %w", dev, err)
			}
		}
		return nil
	})
}

// AnnounceNDP sends an unsolicited Neighbor Advertisement (override, ip at
// mac) to all nodes from dev in the namespace: IPv6's gratuitous ARP.
func (n NS) AnnounceNDP(dev string, ip netip.Addr, mac net.HardwareAddr) error {
	return n.Do(func() error {
		ifi, err := net.InterfaceByName(dev)
		if err != nil {
			return err
		}
		// A unique local source: the link-local address may still be
		// tentative on a new interface.
		c, _, err := ndp.Listen(ifi, ndp.UniqueLocal)
		if err != nil {
			return fmt.Errorf("open NDP socket on %s: %w", dev, err)
		}
		defer c.Close()
		na := &ndp.NeighborAdvertisement{Override: true, TargetAddress: ip,
			Options: []ndp.Option{&ndp.LinkLayerAddress{Direction: ndp.Target, Addr: mac}}}
		return c.WriteTo(na, nil, netip.MustParseAddr("ff02::1").WithZone(dev))
	})
}
