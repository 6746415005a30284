package lab

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/net/icmp"
	"golang.org/x/net/ipv4"
	"golang.org/x/net/ipv6"
)

// Echo sends count ICMP echo requests to dst from inside the namespace, one
// every interval (0: back to back), and returns how many were sent and how many answered.
// It waits up to wait after the last request for late replies, less when
// every request is answered. The
// packets are made and read here, not by ping(8), whose variants differ
// in flags and output.
func (n NS) Echo(dst netip.Addr, count int, interval, wait time.Duration) (sent, received int, err error) {
	sent, lost, err := n.EchoLost(dst, count, interval, wait)
	return sent, sent - len(lost), err
}

// EchoRequest is one echo request EchoLost sent: its sequence number
// (from 0) and when it was written.
type EchoRequest struct {
	Seq  int
	Sent time.Time
}

// EchoLost is Echo, and says which requests went unanswered, and when
// each was sent (a loaded machine sends them later than the interval
// says).
func (n NS) EchoLost(dst netip.Addr, count int, interval, wait time.Duration) (sent int, lost []EchoRequest, err error) {
	network, listen, proto := "ip4:icmp", "0.0.0.0", 1
	var request icmp.Type = ipv4.ICMPTypeEcho
	var reply icmp.Type = ipv4.ICMPTypeEchoReply
	if dst.Is6() {
		network, listen, proto = "ip6:ipv6-icmp", "::", 58
		request, reply = ipv6.ICMPTypeEchoRequest, ipv6.ICMPTypeEchoReply
	}
	var c *icmp.PacketConn
	zone := dst.Zone()
	if err := n.Do(func() error {
		if zone != "" { // an interface of the namespace, by index: names resolve where the caller runs
			ifi, err := net.InterfaceByName(zone)
			if err != nil {
				return err
			}
			zone = strconv.Itoa(ifi.Index)
		}
		var err error
		c, err = icmp.ListenPacket(network, listen) // the socket stays in the namespace
		return err
	}); err != nil {
		return 0, nil, fmt.Errorf("open ICMP socket in %s: %w", n.Name, err)
	}
	defer c.Close()
	var idb [2]byte
	_, _ = rand.Read(idb[:])
	id := int(binary.BigEndian.Uint16(idb[:]))

	var mu sync.Mutex
	answered := make(map[int]bool, count)
	all := make(chan struct{}) // closed when every request was answered
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		buf := make([]byte, 1500)
		for {
			nr, _, err := c.ReadFrom(buf)
			if err != nil {
				return // the deadline after the last request, or Close
			}
			m, err := icmp.ParseMessage(proto, buf[:nr])
			if err != nil || m.Type != reply {
				continue
			}
			if e, ok := m.Body.(*icmp.Echo); ok && e.ID == id && e.Seq < count {
				mu.Lock()
				if !answered[e.Seq] {
					answered[e.Seq] = true
					if len(answered) == count {
						close(all)
					}
				}
				mu.Unlock()
			}
		}
	}()
	to := &net.IPAddr{IP: dst.AsSlice(), Zone: zone}
	sentAt := make([]time.Time, 0, count)
	tick := time.NewTicker(max(interval, time.Millisecond)) // interval 0: back to back
	defer tick.Stop()
	for seq := range count {
		if seq > 0 {
			<-tick.C
		}
		msg := icmp.Message{Type: request, Body: &icmp.Echo{ID: id, Seq: seq, Data: []byte("neighwatch lab")}}
		b, err := msg.Marshal(nil) // ICMPv6: the kernel fills in the checksum of raw sockets
		if err != nil {
			return sent, nil, err
		}
		sentAt = append(sentAt, time.Now())
		if _, err := c.WriteTo(b, to); err != nil {
			// A route or neighbour that fails is a lost packet, not an
			// error of the test: count it as sent and unanswered.
			if !errors.Is(err, os.ErrDeadlineExceeded) {
				sent++
				continue
			}
			return sent, nil, err
		}
		sent++
	}
	select {
	case <-all:
	case <-time.After(wait):
	}
	_ = c.SetReadDeadline(time.Now())
	<-readDone
	mu.Lock()
	defer mu.Unlock()
	for seq := range sent {
		if !answered[seq] {
			lost = append(lost, EchoRequest{Seq: seq, Sent: sentAt[seq]})
		}
	}
	return sent, lost, nil
}

// Ping sends count echo requests 200 ms apart and returns an error unless
// at least one was answered within wait of the last.
func (n NS) Ping(dst netip.Addr, count int, wait time.Duration) error {
	sent, received, err := n.Echo(dst, count, 200*time.Millisecond, wait)
	if err != nil {
		return err
	}
	if received == 0 {
		return fmt.Errorf("no reply from %s to %d echo requests from %s", dst, sent, n.Name)
	}
	return nil
}

// LinkStats returns an interface's received packets and the packets it
// was handed to transmit (sent or dropped by the device), as the kernel
// counts them.
func (n NS) LinkStats(dev string) (rx, tx uint64, err error) {
	err = n.Do(func() error {
		l, err := netlink.LinkByName(dev)
		if err != nil {
			return err
		}
		s := l.Attrs().Statistics
		if s == nil {
			return fmt.Errorf("no statistics for %s in %s", dev, n.Name)
		}
		rx, tx = s.RxPackets, s.TxPackets+s.TxDropped
		return nil
	})
	return rx, tx, err
}

// SendUDP sends count UDP datagrams of 64 bytes to dst:port from inside
// the namespace, paced so that no queue on the way overflows, and returns
// how many the socket took.
func (n NS) SendUDP(dst netip.Addr, port, count int) (int, error) {
	var c *net.UDPConn
	if err := n.Do(func() error {
		var err error
		// Unconnected: a port unreachable from the far end must not
		// fail the next send.
		c, err = net.ListenUDP("udp", nil)
		return err
	}); err != nil {
		return 0, fmt.Errorf("open UDP socket in %s: %w", n.Name, err)
	}
	defer c.Close()
	to := net.UDPAddrFromAddrPort(netip.AddrPortFrom(dst, uint16(port)))
	payload := make([]byte, 64)
	sent := 0
	for i := range count {
		if _, err := c.WriteToUDP(payload, to); err != nil {
			return sent, fmt.Errorf("send UDP from %s: %w", n.Name, err)
		}
		sent++
		if i%16 == 15 {
			time.Sleep(time.Millisecond)
		}
	}
	return sent, nil
}

// Flood sends UDP datagrams of 64 bytes to dst:port from inside the
// namespace at about pps per second for d, and returns how many it sent.
// Nothing needs to listen: the traffic is there to be forwarded and
// counted.
func (n NS) Flood(dst netip.Addr, port int, d time.Duration, pps int) (int, error) {
	var c *net.UDPConn
	if err := n.Do(func() error {
		var err error
		c, err = net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(netip.AddrPortFrom(dst, uint16(port))))
		return err
	}); err != nil {
		return 0, fmt.Errorf("open UDP socket in %s: %w", n.Name, err)
	}
	defer c.Close()
	payload := make([]byte, 64)
	const burst = 100
	gap := time.Second * burst / time.Duration(pps)
	sent := 0
	start := time.Now()
	for next := start; time.Since(start) < d; next = next.Add(gap) {
		for range burst {
			if _, err := c.Write(payload); err == nil {
				sent++
			}
		}
		if w := time.Until(next.Add(gap)); w > 0 {
			time.Sleep(w)
		}
	}
	return sent, nil
}
