package addrs

import (
	"net/netip"
	"slices"
)

// Prefixes are the global-scope prefixes of each interface, by index,
// each masked to its network.
type Prefixes map[int32][]netip.Prefix

// Segment names the segment of a neighbour at addr on an interface with
// prefixes: the smallest of them that holds addr; failing that (a
// link-local neighbour such as a router's fe80::1, or an address outside
// the interface's subnets) the first of them, IPv4 before IPv6, then by
// address; "" when the interface has none, where nothing tells two
// segments apart.
func Segment(prefixes []netip.Prefix, addr netip.Addr) string {
	var best netip.Prefix
	for _, p := range prefixes {
		if p.Contains(addr.Unmap()) && (!best.IsValid() || p.Bits() > best.Bits()) {
			best = p
		}
	}
	if best.IsValid() {
		return best.String()
	}
	if len(prefixes) == 0 {
		return ""
	}
	return slices.MinFunc(prefixes, comparePrefixes).String()
}

// comparePrefixes orders prefixes IPv4 first, then by address, then
// longest first.
func comparePrefixes(a, b netip.Prefix) int {
	if a.Addr().Is4() != b.Addr().Is4() {
		if a.Addr().Is4() {
			return -1
		}
		return 1
	}
	if c := a.Addr().Compare(b.Addr()); c != 0 {
		return c
	}
	return b.Bits() - a.Bits()
}

// Add records prefix p, masked, on interface ifindex, once.
func (ps Prefixes) Add(ifindex int32, p netip.Prefix) {
	p = p.Masked()
	if !slices.Contains(ps[ifindex], p) {
		ps[ifindex] = append(ps[ifindex], p)
	}
}
