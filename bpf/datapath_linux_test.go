package bpf

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/neighwatch/neighwatch/internal/dev/lab"
	"github.com/neighwatch/neighwatch/internal/dev/pkt"
)

const (
	tcActOK       = 0
	tcActRedirect = 7
)

// skbCtx builds the __sk_buff context of a test run: the packet arrives on
// ifindex (ingress_ifindex at offset 36, ifindex at 40).
func skbCtx(ifindex int) []byte {
	b := make([]byte, 192)
	binary.NativeEndian.PutUint32(b[36:], uint32(ifindex))
	binary.NativeEndian.PutUint32(b[40:], uint32(ifindex))
	return b
}

func badIHL(f []byte) []byte {
	f[14] = 0x44
	return f
}

type dpCase struct {
	name     string
	frame    []byte
	legacy   Decision
	neigh    Decision
	wantCode uint32
}

// TestDatapathDecisions runs both variants with BPF_PROG_TEST_RUN on
// crafted frames inside a lab node, for every decision the program makes.
func TestDatapathDecisions(t *testing.T) {
	lab.Require(t)
	t.Parallel()
	l := lab.New(t, "dpd")
	clientMAC := net.HardwareAddr{2, 0, 0, 0, 0xc1, 1}
	if err := l.Node.SetNeigh(lab.NodeClientIf, lab.ClientIP, clientMAC, "stale"); err != nil {
		t.Fatal(err)
	}
	if err := l.Node.SetNeigh(lab.NodeClientIf, lab.ClientIP6, clientMAC, "stale"); err != nil {
		t.Fatal(err)
	}
	l.Node.MustIP(t, "route", "add", "blackhole", "10.9.9.0/24")
	n1, err := l.Node.Ifindex(lab.NodeBackendIf)
	if err != nil {
		t.Fatal(err)
	}
	n0MAC, err := l.Node.MAC(lab.NodeClientIf)
	if err != nil {
		t.Fatal(err)
	}
	n1MAC, _ := l.Node.MAC(lab.NodeBackendIf)
	bMAC := net.HardwareAddr{2, 0, 0, 0, 0xb0, 1}
	udp4 := func(dst netip.Addr, ttl uint8, frag uint16) []byte {
		return pkt.UDP4(n1MAC, bMAC, lab.BackendIP, dst, ttl, frag, 18)
	}
	arp := append(pkt.Ethernet(net.HardwareAddr{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, bMAC, pkt.EtherARP), make([]byte, 46)...)
	cases := []dpCase{
		{"ipv4 to stale neighbour", udp4(lab.ClientIP, 64, 0), Redirect, RedirectNeigh, tcActRedirect},
		{"ipv4 without neighbour entry", udp4(netip.MustParseAddr("10.0.1.3"), 64, 0), RedirectNeighNoNeigh, RedirectNeigh, tcActRedirect},
		{"ipv6 to stale neighbour", pkt.UDP6(n1MAC, bMAC, lab.BackendIP6, lab.ClientIP6, 64, 18), Redirect, RedirectNeigh, tcActRedirect},
		{"ttl 1", udp4(lab.ClientIP, 1, 0), PassTTL, PassTTL, tcActOK},
		{"ipv6 hop limit 1", pkt.UDP6(n1MAC, bMAC, lab.BackendIP6, lab.ClientIP6, 1, 18), PassTTL, PassTTL, tcActOK},
		{"fragment", udp4(lab.ClientIP, 64, 0x2000), PassFragment, PassFragment, tcActOK},
		{"local destination", udp4(lab.NodeBackendIP, 64, 0), PassLocal, PassLocal, tcActOK},
		{"blackhole route", udp4(netip.MustParseAddr("10.9.9.9"), 64, 0), PassFIBOther, PassFIBOther, tcActOK},
		{"arp", arp, PassNotIP, PassNotIP, tcActOK},
		// The kernel refuses test runs of IPv4 frames shorter than an IP
		// header, so a bad IHL stands in for a malformed header.
		{"ipv4 ihl below 5", badIHL(udp4(lab.ClientIP, 64, 0)), PassNotIP, PassNotIP, tcActOK},
	}
	dp, err := LoadDatapath()
	if err != nil {
		t.Fatal(err)
	}
	defer dp.Close()
	for _, mode := range []Mode{ModeLegacy, ModeNeigh} {
		for _, tc := range cases {
			t.Run(string(mode)+"/"+tc.name, func(t *testing.T) {
				want := tc.legacy
				if mode == ModeNeigh {
					want = tc.neigh
				}
				before, err := dp.Counts()
				if err != nil {
					t.Fatal(err)
				}
				out := make([]byte, len(tc.frame)+64)
				var code uint32
				err = l.Node.Do(func() error {
					var err error
					code, err = dp.Program(mode).Run(&ebpf.RunOptions{Data: tc.frame, DataOut: out, Context: skbCtx(n1)})
					return err
				})
				if err != nil {
					t.Fatal(err)
				}
				after, _ := dp.Counts()
				for _, d := range Decisions() {
					delta := after[d] - before[d]
					if (d == want) != (delta == 1) || delta > 1 {
						t.Errorf("decision %s counted %d times, want %s once", d, delta, want)
					}
				}
				if code != tc.wantCode {
					t.Errorf("returned %d, want %d", code, tc.wantCode)
				}
				if want == Redirect {
					checkRewritten(t, out[:len(tc.frame)], clientMAC, n0MAC)
				}
			})
		}
	}
}

// checkRewritten checks a legacy-forwarded frame: MACs from the FIB, TTL or
// hop limit one lower, IPv4 checksum still valid.
func checkRewritten(t *testing.T, f []byte, dst, src net.HardwareAddr) {
	t.Helper()
	if !bytes.Equal(f[0:6], dst) || !bytes.Equal(f[6:12], src) {
		t.Errorf("MACs %s -> %s, want %s -> %s", net.HardwareAddr(f[6:12]), net.HardwareAddr(f[0:6]), src, dst)
	}
	switch binary.BigEndian.Uint16(f[12:14]) {
	case pkt.EtherIPv4:
		if f[14+8] != 63 {
			t.Errorf("ttl %d, want 63", f[14+8])
		}
		if pkt.Checksum(f[14:34]) != 0 {
			t.Errorf("IPv4 header checksum invalid after TTL decrement")
		}
	case pkt.EtherIPv6:
		if f[14+7] != 63 {
			t.Errorf("hop limit %d, want 63", f[14+7])
		}
	}
}

// TestFeedsIntoUsesTheWholeIfindex: two ingress interfaces whose
// ifindexes are 1,024 apart (as on a node after months of pod churn)
// forward to different egress interfaces; each must be named as feeding
// its own egress only. A table indexed by ifindex modulo 1024 gave both
// one slot, so a swap named the wrong interface and swapped an extra one.
func TestFeedsIntoUsesTheWholeIfindex(t *testing.T) {
	lab.Require(t)
	t.Parallel()
	ns := lab.NewNS(t, "alias")
	if err := ns.Sysctl("net.ipv4.ip_forward", "1"); err != nil {
		t.Fatal(err)
	}
	const inA, inB = 2000, 2000 + 1024
	for _, args := range [][]string{
		{"link", "add", "ina", "index", fmt.Sprint(inA), "type", "veth", "peer", "name", "ina-p"},
		{"link", "add", "inb", "index", fmt.Sprint(inB), "type", "veth", "peer", "name", "inb-p"},
		{"link", "add", "outx", "type", "veth", "peer", "name", "outx-p"},
		{"link", "add", "outy", "type", "veth", "peer", "name", "outy-p"},
		{"addr", "add", "10.9.1.1/24", "dev", "outx"}, {"addr", "add", "10.9.2.1/24", "dev", "outy"},
		{"addr", "add", "10.9.3.1/24", "dev", "ina"}, {"addr", "add", "10.9.4.1/24", "dev", "inb"},
	} {
		ns.MustIP(t, args...)
	}
	for _, dev := range []string{"ina", "ina-p", "inb", "inb-p", "outx", "outx-p", "outy", "outy-p"} {
		ns.MustIP(t, "link", "set", dev, "up")
	}
	ns.MustIP(t, "neigh", "add", "10.9.1.2", "lladdr", "02:00:00:00:01:02", "dev", "outx", "nud", "permanent")
	ns.MustIP(t, "neigh", "add", "10.9.2.2", "lladdr", "02:00:00:00:02:02", "dev", "outy", "nud", "permanent")
	outX, err := ns.Ifindex("outx")
	if err != nil {
		t.Fatal(err)
	}
	outY, _ := ns.Ifindex("outy")
	dp, err := LoadDatapath()
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Do(dp.Close)
	for _, in := range []int{inA, inB} {
		if err := ns.Do(func() error { return dp.Attach(in, ModeLegacy) }); err != nil {
			t.Fatal(err)
		}
	}
	run := func(in int, dev string, dst netip.Addr) {
		mac, err := ns.MAC(dev)
		if err != nil {
			t.Fatal(err)
		}
		frame := pkt.UDP4(mac, net.HardwareAddr{2, 0, 0, 0, 0xaa, 1}, netip.MustParseAddr("10.9.3.9"), dst, 64, 0, 18)
		var code uint32
		if err := ns.Do(func() (err error) {
			code, err = dp.Program(ModeLegacy).Run(&ebpf.RunOptions{Data: frame, DataOut: make([]byte, len(frame)+64), Context: skbCtx(in)})
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if code != tcActRedirect {
			t.Fatalf("ingress %d to %s: return code %d, want a redirect", in, dst, code)
		}
	}
	run(inA, "ina", netip.MustParseAddr("10.9.1.2"))
	run(inB, "inb", netip.MustParseAddr("10.9.2.2"))
	for _, c := range []struct{ egress, want int }{{outX, inA}, {outY, inB}} {
		got, err := dp.FeedsInto(c.egress)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 1 || got[0] != c.want {
			t.Errorf("FeedsInto(%d) = %v, want [%d]", c.egress, got, c.want)
		}
	}
}
