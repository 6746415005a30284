package lab

import (
	"fmt"
	"net/netip"
	"testing"
)

// Segment is one Ethernet segment: a node whose bridge SegmentBridge
// joins hosts, each in its own namespace with one interface,
// SegmentHostIf. Unlike a Lab's point-to-point links, every host hears
// every broadcast, so one can claim another's address.
type Segment struct {
	Node  NS
	Hosts []NS
}

// Segment names.
const (
	SegmentBridge = "br0" // in the node
	SegmentHostIf = "h0"  // in each host
)

// SegmentNodeIP and SegmentNodeIP6 are the node's addresses on the bridge.
var (
	SegmentNodeIP  = netip.MustParseAddr("10.0.9.1")
	SegmentNodeIP6 = netip.MustParseAddr("fd00:9::1")
)

// SegmentHostIP returns host i's IPv4 address; SegmentHostIP6 its IPv6.
func SegmentHostIP(i int) netip.Addr  { return netip.AddrFrom4([4]byte{10, 0, 9, byte(10 + i)}) }
func SegmentHostIP6(i int) netip.Addr { return netip.MustParseAddr(fmt.Sprintf("fd00:9::%x", 0x10+i)) }

// NewSegment builds a segment of hosts hosts; cleanup is registered on tb.
func NewSegment(tb testing.TB, prefix string, hosts int) *Segment {
	tb.Helper()
	s := &Segment{Node: NewNS(tb, prefix+"n")}
	s.Node.MustIP(tb, "link", "add", SegmentBridge, "type", "bridge")
	s.Node.MustIP(tb, "addr", "add", SegmentNodeIP.String()+"/24", "dev", SegmentBridge)
	s.Node.MustIP(tb, "addr", "add", SegmentNodeIP6.String()+"/64", "dev", SegmentBridge, "nodad")
	s.Node.MustIP(tb, "link", "set", SegmentBridge, "up")
	for i := range hosts {
		h := NewNS(tb, fmt.Sprintf("%sh%d", prefix, i))
		port := fmt.Sprintf("p%d", i)
		h.MustIP(tb, "link", "add", SegmentHostIf, "type", "veth", "peer", "name", port, "netns", s.Node.Name)
		h.MustIP(tb, "addr", "add", SegmentHostIP(i).String()+"/24", "dev", SegmentHostIf)
		h.MustIP(tb, "addr", "add", SegmentHostIP6(i).String()+"/64", "dev", SegmentHostIf, "nodad")
		h.MustIP(tb, "link", "set", SegmentHostIf, "up")
		s.Node.MustIP(tb, "link", "set", port, "master", SegmentBridge)
		s.Node.MustIP(tb, "link", "set", port, "up")
		s.Hosts = append(s.Hosts, h)
	}
	return s
}
