package evidence

import (
	"errors"
	"net"
	"net/netip"
	"testing"

	"github.com/mdlayher/arp"
	"github.com/mdlayher/ndp"
	"golang.org/x/net/bpf"
)

// ndFrame builds Ethernet + IPv6 + an ND message, as a listener sees it.
func ndFrame(t testing.TB, srcMAC net.HardwareAddr, src netip.Addr, hop uint8, m ndp.Message) []byte {
	t.Helper()
	body, err := ndp.MarshalMessage(m)
	if err != nil {
		t.Fatal(err)
	}
	f := make([]byte, 14+40, 14+40+len(body))
	copy(f[0:6], []byte{0x33, 0x33, 0, 0, 0, 1})
	copy(f[6:12], srcMAC)
	f[12], f[13] = 0x86, 0xdd
	ip := f[14:]
	ip[0] = 0x60
	ip[4], ip[5] = byte(len(body)>>8), byte(len(body))
	ip[6], ip[7] = 58, hop
	s := src.As16()
	copy(ip[8:24], s[:])
	d := netip.MustParseAddr("ff02::1").As16()
	copy(ip[24:40], d[:])
	return append(f, body...)
}

func TestParseNDP(t *testing.T) {
	host := netip.MustParseAddr("fd00::2")
	tlla := &ndp.LinkLayerAddress{Direction: ndp.Target, Addr: macB}
	slla := &ndp.LinkLayerAddress{Direction: ndp.Source, Addr: macA}
	tests := []struct {
		name    string
		frame   []byte
		kind    Kind
		mac     net.HardwareAddr
		wantErr error
	}{
		{"unsolicited advertisement", ndFrame(t, macB, host, 255, &ndp.NeighborAdvertisement{Override: true, TargetAddress: host, Options: []ndp.Option{tlla}}), NDPUnsolicitedAdv, macB, nil},
		{"solicited advertisement", ndFrame(t, macB, host, 255, &ndp.NeighborAdvertisement{Solicited: true, TargetAddress: host, Options: []ndp.Option{tlla}}), NDPAdvertisement, macB, nil},
		{"solicitation", ndFrame(t, macA, host, 255, &ndp.NeighborSolicitation{TargetAddress: netip.MustParseAddr("fd00::1"), Options: []ndp.Option{slla}}), NDPSolicitation, macA, nil},
		{"DAD solicitation", ndFrame(t, macA, netip.IPv6Unspecified(), 255, &ndp.NeighborSolicitation{TargetAddress: host}), 0, nil, ErrNoSenderIP},
		{"advertisement without target address option", ndFrame(t, macB, host, 255, &ndp.NeighborAdvertisement{TargetAddress: host}), 0, nil, ErrNoLinkLayer},
		{"hop limit not 255", ndFrame(t, macB, host, 64, &ndp.NeighborAdvertisement{TargetAddress: host, Options: []ndp.Option{tlla}}), 0, nil, ErrNotND},
		{"router solicitation", ndFrame(t, macB, host, 255, &ndp.RouterSolicitation{}), 0, nil, ErrNotND},
		{"own frame", ndFrame(t, ownMAC, host, 255, &ndp.NeighborAdvertisement{TargetAddress: host, Options: []ndp.Option{tlla}}), 0, nil, ErrOwnFrame},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, err := ParseNDP(tt.frame, ownMAC)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			if err == nil && (o.Kind != tt.kind || o.SenderMAC.String() != tt.mac.String() || !o.SenderIP.Is6()) {
				t.Fatalf("got %+v", o)
			}
		})
	}
}

// TestNDPFilter runs the socket filter in x/net/bpf's virtual machine:
// solicitations and advertisements pass whole, everything else is dropped.
func TestNDPFilter(t *testing.T) {
	raw, err := ndpFilter()
	if err != nil {
		t.Fatal(err)
	}
	insns, ok := bpf.Disassemble(raw)
	if !ok {
		t.Fatal("filter does not disassemble")
	}
	vm, err := bpf.NewVM(insns)
	if err != nil {
		t.Fatal(err)
	}
	host := netip.MustParseAddr("fd00::2")
	echo := ndFrame(t, macA, host, 64, &ndp.NeighborSolicitation{TargetAddress: host})
	echo[14+40] = 128 // ICMPv6 echo request
	udp := ndFrame(t, macA, host, 64, &ndp.NeighborSolicitation{TargetAddress: host})
	udp[14+6] = 17
	// The ICMPv6 types on either side of Neighbor Discovery's two: router
	// solicitations and advertisements (133, 134), redirects (137).
	icmp := func(typ byte) []byte {
		f := ndFrame(t, macA, host, 255, &ndp.NeighborSolicitation{TargetAddress: host})
		f[14+40] = typ
		return f
	}
	for _, tc := range []struct {
		name  string
		frame []byte
		keep  bool
	}{
		{"solicitation", ndFrame(t, macA, host, 255, &ndp.NeighborSolicitation{TargetAddress: host}), true},
		{"advertisement", ndFrame(t, macB, host, 255, &ndp.NeighborAdvertisement{TargetAddress: host}), true},
		{"echo request", echo, false},
		{"router solicitation", icmp(133), false},
		{"router advertisement", icmp(134), false},
		{"redirect", icmp(137), false},
		{"udp", udp, false},
		{"arp", arpFrame(t, arp.OperationRequest, macA, "10.0.0.1", "10.0.0.9", macB), false},
	} {
		n, err := vm.Run(tc.frame)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if (n >= len(tc.frame)) != tc.keep || (!tc.keep && n != 0) {
			t.Errorf("%s: filter kept %d of %d bytes, want keep=%v", tc.name, n, len(tc.frame), tc.keep)
		}
	}
}

func FuzzParseNDP(f *testing.F) {
	host := netip.MustParseAddr("fd00::2")
	f.Add(ndFrame(f, macB, host, 255, &ndp.NeighborAdvertisement{TargetAddress: host, Options: []ndp.Option{&ndp.LinkLayerAddress{Direction: ndp.Target, Addr: macB}}}))
	f.Add(ndFrame(f, macA, host, 255, &ndp.NeighborSolicitation{TargetAddress: host}))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		o, err := ParseNDP(b, ownMAC)
		if err == nil && (!o.SenderIP.Is6() || len(o.SenderMAC) != 6 || o.Kind < NDPSolicitation) {
			t.Fatalf("accepted inconsistent observation %+v", o)
		}
	})
}
