// Package pkt crafts Ethernet frames for datapath tests and benchmarks.
package pkt

import (
	"encoding/binary"
	"net"
	"net/netip"
)

// Ethertypes.
const (
	EtherIPv4 = 0x0800
	EtherIPv6 = 0x86dd
	EtherARP  = 0x0806
)

// Ethernet returns an Ethernet header.
func Ethernet(dst, src net.HardwareAddr, etherType uint16) []byte {
	b := make([]byte, 14)
	copy(b[0:6], dst)
	copy(b[6:12], src)
	binary.BigEndian.PutUint16(b[12:14], etherType)
	return b
}

// Checksum is the Internet checksum of b.
func Checksum(b []byte) uint16 {
	var sum uint32
	for i := 0; i+1 < len(b); i += 2 {
		sum += uint32(binary.BigEndian.Uint16(b[i:]))
	}
	if len(b)%2 == 1 {
		sum += uint32(b[len(b)-1]) << 8
	}
	for sum > 0xffff {
		sum = sum>>16 + sum&0xffff
	}
	return ^uint16(sum)
}

// UDP4 returns an Ethernet/IPv4/UDP frame with payload bytes of payload.
// fragOff is the raw flags+offset field (0x2000 sets MF).
func UDP4(dst, src net.HardwareAddr, sip, dip netip.Addr, ttl uint8, fragOff uint16, payload int) []byte {
	ip := make([]byte, 20+8+payload)
	ip[0] = 0x45
	binary.BigEndian.PutUint16(ip[2:], uint16(len(ip)))
	binary.BigEndian.PutUint16(ip[4:], 0x1234)
	binary.BigEndian.PutUint16(ip[6:], fragOff)
	ip[8] = ttl
	ip[9] = 17
	s, d := sip.As4(), dip.As4()
	copy(ip[12:16], s[:])
	copy(ip[16:20], d[:])
	binary.BigEndian.PutUint16(ip[10:], Checksum(ip[:20]))
	udp := ip[20:]
	binary.BigEndian.PutUint16(udp[0:], 40000)
	binary.BigEndian.PutUint16(udp[2:], 9)
	binary.BigEndian.PutUint16(udp[4:], uint16(8+payload))
	return append(Ethernet(dst, src, EtherIPv4), ip...)
}

// UDP6 returns an Ethernet/IPv6/UDP frame.
func UDP6(dst, src net.HardwareAddr, sip, dip netip.Addr, hop uint8, payload int) []byte {
	ip := make([]byte, 40+8+payload)
	ip[0] = 0x60
	binary.BigEndian.PutUint16(ip[4:], uint16(8+payload))
	ip[6] = 17
	ip[7] = hop
	s, d := sip.As16(), dip.As16()
	copy(ip[8:24], s[:])
	copy(ip[24:40], d[:])
	udp := ip[40:]
	binary.BigEndian.PutUint16(udp[0:], 40000)
	binary.BigEndian.PutUint16(udp[2:], 9)
	binary.BigEndian.PutUint16(udp[4:], uint16(8+payload))
	// UDP checksum over the IPv6 pseudo-header (mandatory in IPv6).
	ph := make([]byte, 0, 40+len(udp))
	ph = append(ph, ip[8:40]...)
	ph = binary.BigEndian.AppendUint32(ph, uint32(len(udp)))
	ph = append(ph, 0, 0, 0, 17)
	ph = append(ph, udp...)
	binary.BigEndian.PutUint16(udp[6:], Checksum(ph))
	return append(Ethernet(dst, src, EtherIPv6), ip...)
}
