package lab

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// Mover is one address a move flood keeps moving: round r claims it for
// MAC with its last byte raised by r modulo Cycle (0 or 1: always MAC).
type Mover struct {
	IP    netip.Addr // IPv4
	MAC   net.HardwareAddr
	Cycle int // at most 256
}

// mac is the MAC round r claims the address for, written into dst.
func (m Mover) mac(dst []byte, r int) {
	copy(dst, m.MAC)
	if m.Cycle > 1 {
		dst[5] = m.MAC[5] + byte(r%m.Cycle)
	}
}

// FloodMovers returns n movers at 10.200.0.0/16 and up, each through 256
// MACs of its own (02:77:00:hi:lo:00 to :ff), none of which exists: the
// addresses a flood of spoofed replies moves, none ever claimed twice by
// one MAC within 256 rounds (a MAC claiming an address in turn with
// another would be a conflict of its own).
func FloodMovers(n int) []Mover {
	out := make([]Mover, n)
	for i := range out {
		ip := netip.AddrFrom4([4]byte{10, byte(200 + i>>16), byte(i >> 8), byte(i)})
		out[i] = Mover{IP: ip, MAC: net.HardwareAddr{0x02, 0x77, byte(i >> 16), byte(i >> 8), byte(i), 0}, Cycle: 256}
	}
	return out
}

// AddNeighs creates an entry on dev in the namespace for each mover, at
// its round-0 MAC, in state (a NUD_* value), over one netlink socket.
func (n NS) AddNeighs(dev string, movers []Mover, state int) error {
	h, err := n.Handle()
	if err != nil {
		return err
	}
	defer h.Close()
	nh, err := netlink.NewHandleAt(h)
	if err != nil {
		return err
	}
	defer nh.Close()
	link, err := nh.LinkByName(dev)
	if err != nil {
		return fmt.Errorf("%s in %s: %w", dev, n.Name, err)
	}
	for _, m := range movers {
		err := nh.NeighSet(&netlink.Neigh{LinkIndex: link.Attrs().Index, Family: netlink.FAMILY_V4, State: state,
			IP: m.IP.AsSlice(), HardwareAddr: m.MAC})
		if err != nil {
			return fmt.Errorf("add %s on %s in %s: %w", m.IP, dev, n.Name, err)
		}
	}
	return nil
}

// MoveFlood is what SendMoves sent.
type MoveFlood struct {
	Sent    int           // frames the kernel took
	Refused int           // frames refused with ENOBUFS or EAGAIN (the queue was full)
	Took    time.Duration // from the first frame to the last
}

// Rate is the frames sent a second.
func (f MoveFlood) Rate() float64 {
	if f.Took <= 0 {
		return 0
	}
	return float64(f.Sent) / f.Took.Seconds()
}

// SendMoves sends gratuitous ARP replies from dev in the namespace to
// dst, unicast, round after round: in each, one for every mover,
// claiming its address for its next MAC (frame source and sender both
// that MAC; sender and target IP the address, target MAC the sender's,
// which makes the reply gratuitous: Linux takes it into an existing
// entry at once, whatever the entry's locktime). perSecond 0 sends as
// fast as one thread can; else the frames are paced in 10 ms steps. It
// stops when stop closes, or after rounds rounds when rounds > 0. The
// frames are written by hand into one buffer: the fastest sender Go has
// here without a ring.
func (n NS) SendMoves(dev string, dst net.HardwareAddr, movers []Mover, perSecond, rounds int, stop <-chan struct{}) (MoveFlood, error) {
	var res MoveFlood
	err := n.Do(func() error {
		ifi, err := net.InterfaceByName(dev)
		if err != nil {
			return err
		}
		fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW, 0)
		if err != nil {
			return fmt.Errorf("open a packet socket on %s: %w", dev, err)
		}
		defer unix.Close(fd)
		sa := &unix.SockaddrLinklayer{Ifindex: ifi.Index, Halen: 6}
		copy(sa.Addr[:], dst)
		frame := make([]byte, 42)
		copy(frame[0:6], dst)
		binary.BigEndian.PutUint16(frame[12:], unix.ETH_P_ARP)
		copy(frame[14:22], []byte{0, 1, 8, 0, 6, 4, 0, 2}) // Ethernet/IPv4, reply
		// Pacing: the frames due by now, in 10 ms steps.
		start := time.Now()
		var tick *time.Ticker
		if perSecond > 0 {
			tick = time.NewTicker(10 * time.Millisecond)
			defer tick.Stop()
		}
		due := func() int { return int(time.Since(start).Seconds() * float64(perSecond)) }
		defer func() { res.Took = time.Since(start) }()
		for round := 0; rounds <= 0 || round < rounds; round++ {
			for _, m := range movers {
				if tick != nil && res.Sent+res.Refused >= due() {
					select {
					case <-stop:
						return nil
					case <-tick.C:
					}
				}
				ip := m.IP.As4()
				m.mac(frame[6:12], round)
				copy(frame[22:28], frame[6:12])
				copy(frame[28:32], ip[:])
				copy(frame[32:38], frame[6:12])
				copy(frame[38:42], ip[:])
				if err := unix.Sendto(fd, frame, 0, sa); err != nil {
					if errors.Is(err, unix.ENOBUFS) || errors.Is(err, unix.EAGAIN) {
						res.Refused++
						continue
					}
					return fmt.Errorf("send a move of %s on %s: %w", m.IP, dev, err)
				}
				res.Sent++
			}
			select {
			case <-stop:
				return nil
			default:
			}
		}
		return nil
	})
	return res, err
}
