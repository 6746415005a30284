package addrs

import (
	"net/netip"
	"testing"
)

func TestSegment(t *testing.T) {
	pfx := func(s ...string) []netip.Prefix {
		var out []netip.Prefix
		for _, p := range s {
			out = append(out, netip.MustParsePrefix(p))
		}
		return out
	}
	for _, tc := range []struct {
		name     string
		prefixes []netip.Prefix
		addr     string
		want     string
	}{
		{"the subnet that holds it", pfx("10.0.1.0/24", "2001:db8:1::/64"), "10.0.1.2", "10.0.1.0/24"},
		{"the smallest of two that hold it", pfx("10.0.0.0/16", "10.0.1.0/24"), "10.0.1.2", "10.0.1.0/24"},
		{"an IPv6 neighbour in the IPv6 subnet", pfx("10.0.1.0/24", "2001:db8:1::/64"), "2001:db8:1::7", "2001:db8:1::/64"},
		{"a link-local router: the interface's first subnet, IPv4 first", pfx("2001:db8:1::/64", "10.0.2.0/24", "10.0.1.0/24"), "fe80::1", "10.0.1.0/24"},
		{"IPv6 only", pfx("2001:db8:2::/64", "2001:db8:1::/64"), "fe80::1", "2001:db8:1::/64"},
		{"an IPv4-mapped address", pfx("10.0.1.0/24"), "::ffff:10.0.1.9", "10.0.1.0/24"},
		{"no address on the interface", nil, "fe80::1", ""},
	} {
		if got := Segment(tc.prefixes, netip.MustParseAddr(tc.addr)); got != tc.want {
			t.Errorf("%s: Segment(%v, %s) = %q, want %q", tc.name, tc.prefixes, tc.addr, got, tc.want)
		}
	}
}

func TestPrefixesAddMasksOnce(t *testing.T) {
	ps := Prefixes{}
	ps.Add(3, netip.MustParsePrefix("10.0.1.5/24"))
	ps.Add(3, netip.MustParsePrefix("10.0.1.6/24"))
	if got := ps[3]; len(got) != 1 || got[0] != netip.MustParsePrefix("10.0.1.0/24") {
		t.Errorf("two addresses of one subnet: %v, want [10.0.1.0/24]", got)
	}
}
