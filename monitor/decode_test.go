package monitor

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"reflect"
	"testing"

	"golang.org/x/sys/unix"
)

// attr encodes one rtattr, padded to 4 bytes.
func attr(typ uint16, v []byte) []byte {
	l := 4 + len(v)
	b := make([]byte, (l+3)&^3)
	binary.NativeEndian.PutUint16(b[0:2], uint16(l))
	binary.NativeEndian.PutUint16(b[2:4], typ)
	copy(b[4:], v)
	return b
}

func ndmsg(family uint8, ifindex int32, state uint16, flags uint8, attrs ...[]byte) []byte {
	b := make([]byte, sizeofNdmsg)
	b[0] = family
	binary.NativeEndian.PutUint32(b[4:8], uint32(ifindex))
	binary.NativeEndian.PutUint16(b[8:10], state)
	b[10] = flags
	for _, a := range attrs {
		b = append(b, a...)
	}
	return b
}

func cacheinfo(confirmed, used, updated uint32) []byte {
	v := make([]byte, 16)
	binary.NativeEndian.PutUint32(v[0:], confirmed)
	binary.NativeEndian.PutUint32(v[4:], used)
	binary.NativeEndian.PutUint32(v[8:], updated)
	return attr(unix.NDA_CACHEINFO, v)
}

func u32(v uint32) []byte {
	b := make([]byte, 4)
	binary.NativeEndian.PutUint32(b, v)
	return b
}

func TestDecodeNeigh(t *testing.T) {
	mac := []byte{2, 0, 0, 0, 0, 1}
	v4 := netip.MustParseAddr("10.0.0.1").AsSlice()
	v6 := netip.MustParseAddr("fd00::1").AsSlice()
	tests := []struct {
		name    string
		typ     uint16
		msg     []byte
		want    Update
		wantErr bool
	}{
		{
			name: "stale ipv4 with cacheinfo",
			typ:  unix.RTM_NEWNEIGH,
			msg:  ndmsg(unix.AF_INET, 3, unix.NUD_STALE, 0, attr(unix.NDA_DST, v4), attr(unix.NDA_LLADDR, mac), cacheinfo(100, 200, 1500)),
			want: Update{Family: unix.AF_INET, Ifindex: 3, State: StateStale, Addr: netip.MustParseAddr("10.0.0.1"), LLAddr: mac,
				HasCacheInfo: true, Confirmed: 100, Used: 200, Updated: 1500},
		},
		{
			name: "delete ipv6 router managed",
			typ:  unix.RTM_DELNEIGH,
			msg:  ndmsg(unix.AF_INET6, 7, unix.NUD_REACHABLE, unix.NTF_ROUTER, attr(unix.NDA_DST, v6), attr(ndaFlagsExt, u32(1))),
			want: Update{Delete: true, Family: unix.AF_INET6, Ifindex: 7, State: StateReachable, Flags: FlagRouter, FlagsExt: FlagExtManaged,
				Addr: netip.MustParseAddr("fd00::1")},
		},
		{
			name: "incomplete without lladdr",
			typ:  unix.RTM_NEWNEIGH,
			msg:  ndmsg(unix.AF_INET, 2, unix.NUD_INCOMPLETE, 0, attr(unix.NDA_DST, v4)),
			want: Update{Family: unix.AF_INET, Ifindex: 2, State: StateIncomplete, Addr: netip.MustParseAddr("10.0.0.1")},
		},
		{name: "no destination", typ: unix.RTM_NEWNEIGH, msg: ndmsg(unix.AF_INET, 2, unix.NUD_STALE, 0, attr(unix.NDA_LLADDR, mac)), wantErr: true},
		{name: "short header", typ: unix.RTM_NEWNEIGH, msg: []byte{2, 0, 0}, wantErr: true},
		{name: "wrong type", typ: unix.RTM_NEWLINK, msg: ndmsg(unix.AF_INET, 2, 0, 0, attr(unix.NDA_DST, v4)), wantErr: true},
		{name: "attribute overruns", typ: unix.RTM_NEWNEIGH, msg: append(ndmsg(unix.AF_INET, 2, 0, 0), 0xff, 0, 1, 0), wantErr: true},
		{name: "address of 5 bytes", typ: unix.RTM_NEWNEIGH, msg: ndmsg(unix.AF_INET, 2, 0, 0, attr(unix.NDA_DST, []byte{1, 2, 3, 4, 5})), wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := DecodeNeigh(tt.typ, tt.msg)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tt.wantErr)
			}
			if tt.wantErr {
				return
			}
			if !bytes.Equal(got.LLAddr, tt.want.LLAddr) {
				t.Errorf("lladdr = %x, want %x", got.LLAddr, tt.want.LLAddr)
			}
			got.LLAddr, tt.want.LLAddr = nil, nil
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got  %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func nlhdr(typ, flags uint16, seq uint32, body []byte) []byte {
	b := make([]byte, 16, 16+len(body)+3)
	binary.NativeEndian.PutUint32(b[0:], uint32(16+len(body)))
	binary.NativeEndian.PutUint16(b[4:], typ)
	binary.NativeEndian.PutUint16(b[6:], flags)
	binary.NativeEndian.PutUint32(b[8:], seq)
	b = append(b, body...)
	for len(b)%4 != 0 {
		b = append(b, 0)
	}
	return b
}

func TestParseDatagram(t *testing.T) {
	v4 := netip.MustParseAddr("10.0.0.1").AsSlice()
	d := append(nlhdr(unix.RTM_NEWNEIGH, unix.NLM_F_MULTI, 9, ndmsg(unix.AF_INET, 1, unix.NUD_STALE, 0, attr(unix.NDA_DST, v4))),
		nlhdr(unix.NLMSG_DONE, unix.NLM_F_MULTI, 9, make([]byte, 4))...)
	var types []uint16
	if err := parseDatagram(d, func(m nlmsg) error { types = append(types, m.Type); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(types) != 2 || types[0] != unix.RTM_NEWNEIGH || types[1] != unix.NLMSG_DONE {
		t.Fatalf("types = %v", types)
	}
	bad := nlhdr(unix.RTM_NEWNEIGH, 0, 0, nil)
	binary.NativeEndian.PutUint32(bad[0:], 1000)
	if err := parseDatagram(bad, func(nlmsg) error { return nil }); err == nil {
		t.Fatal("length past the datagram accepted")
	}
}

// FuzzDecode feeds arbitrary datagrams through the same path the socket
// loop uses; nothing may panic, and what decodes must round-trip its
// address family.
func FuzzDecode(f *testing.F) {
	v4 := netip.MustParseAddr("10.0.0.1").AsSlice()
	f.Add(nlhdr(unix.RTM_NEWNEIGH, 0, 0, ndmsg(unix.AF_INET, 1, unix.NUD_STALE, 0, attr(unix.NDA_DST, v4), cacheinfo(1, 2, 3))))
	f.Add(nlhdr(unix.RTM_DELNEIGH, 0, 0, ndmsg(unix.AF_INET6, 1, 0, 0, attr(unix.NDA_DST, make([]byte, 16)))))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		_ = parseDatagram(b, func(m nlmsg) error {
			u, err := DecodeNeigh(m.Type, m.Body)
			if err == nil && u.Addr.Is4() != (len(u.Addr.AsSlice()) == 4) {
				t.Fatalf("address %v inconsistent", u.Addr)
			}
			_, _ = DecodeNeighTable(m.Body)
			return nil
		})
	})
}

func TestDecodeNeighTable(t *testing.T) {
	stats := make([]byte, 11*8)
	binary.NativeEndian.PutUint64(stats[9*8:], 4)   // forced_gc_runs
	binary.NativeEndian.PutUint64(stats[10*8:], 17) // table_fulls
	cfg := make([]byte, 32)
	binary.NativeEndian.PutUint32(cfg[4:8], 1234)
	msg := append([]byte{unix.AF_INET, 0, 0, 0}, attr(ndtaName, []byte("arp_cache\x00"))...)
	msg = append(msg, attr(ndtaThresh1, u32(128))...)
	msg = append(msg, attr(ndtaThresh2, u32(512))...)
	msg = append(msg, attr(ndtaThresh3, u32(1024))...)
	msg = append(msg, attr(ndtaConfig, cfg)...)
	msg = append(msg, attr(ndtaStats, stats)...)
	p, err := DecodeNeighTable(msg)
	if err != nil {
		t.Fatal(err)
	}
	want := TableParams{Family: FamilyInet, Name: "arp_cache", Thresh1: 128, Thresh2: 512, Thresh3: 1024, Entries: 1234,
		ForcedGCRuns: 4, TableFulls: 17, HasConfig: true, HasStats: true, HasThresholds: true}
	if p != want {
		t.Fatalf("got  %+v\nwant %+v", p, want)
	}
}
