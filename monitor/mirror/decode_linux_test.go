package mirror

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"reflect"
	"testing"
	"time"

	"github.com/neighwatch/neighwatch/monitor/internal/rtnl"
	"github.com/neighwatch/neighwatch/table"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

func attr(typ uint16, v []byte) []byte { return rtnl.AppendAttr(nil, typ, v) }

func ndmsg(family uint8, ifindex int32, state uint16, flags uint8, attrs ...[]byte) []byte {
	b := make([]byte, unix.SizeofNdMsg)
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

func u32(v uint32) []byte { return binary.NativeEndian.AppendUint32(nil, v) }

func TestDecodeNeigh(t *testing.T) {
	mac := []byte{2, 0, 0, 0, 0, 1}
	v4 := netip.MustParseAddr("10.0.0.1").AsSlice()
	v6 := netip.MustParseAddr("fd00::1").AsSlice()
	tests := []struct {
		name    string
		typ     uint16
		msg     []byte
		want    table.Update
		wantErr bool
	}{
		{
			name: "stale ipv4 with cacheinfo",
			typ:  unix.RTM_NEWNEIGH,
			msg:  ndmsg(unix.AF_INET, 3, unix.NUD_STALE, 0, attr(unix.NDA_DST, v4), attr(unix.NDA_LLADDR, mac), cacheinfo(100, 200, 1500)),
			want: table.Update{Family: table.FamilyInet, Ifindex: 3, State: table.StateStale, Addr: netip.MustParseAddr("10.0.0.1"), LLAddr: mac,
				HasCacheInfo: true, ConfirmedAge: time.Second, UsedAge: 2 * time.Second, UpdatedAge: 15 * time.Second},
		},
		{
			name: "delete ipv6 router managed",
			typ:  unix.RTM_DELNEIGH,
			msg:  ndmsg(unix.AF_INET6, 7, unix.NUD_REACHABLE, unix.NTF_ROUTER, attr(unix.NDA_DST, v6), attr(netlink.NDA_FLAGS_EXT, u32(netlink.NTF_EXT_MANAGED))),
			want: table.Update{Delete: true, Family: table.FamilyInet6, Ifindex: 7, State: table.StateReachable, Flags: table.FlagRouter, FlagsExt: table.FlagExtManaged,
				Addr: netip.MustParseAddr("fd00::1")},
		},
		{
			name: "incomplete without lladdr",
			typ:  unix.RTM_NEWNEIGH,
			msg:  ndmsg(unix.AF_INET, 2, unix.NUD_INCOMPLETE, 0, attr(unix.NDA_DST, v4)),
			want: table.Update{Family: table.FamilyInet, Ifindex: 2, State: table.StateIncomplete, Addr: netip.MustParseAddr("10.0.0.1")},
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

// FuzzDecode feeds arbitrary datagrams through the same path the socket
// loop uses: nothing may panic, and what decodes has an address and the
// family of its header.
func FuzzDecode(f *testing.F) {
	v4 := netip.MustParseAddr("10.0.0.1").AsSlice()
	f.Add(rtnl.AppendMessage(nil, unix.RTM_NEWNEIGH, 0, 0, ndmsg(unix.AF_INET, 1, unix.NUD_STALE, 0, attr(unix.NDA_DST, v4), cacheinfo(1, 2, 3))))
	f.Add(rtnl.AppendMessage(nil, unix.RTM_DELNEIGH, 0, 0, ndmsg(unix.AF_INET6, 1, 0, 0, attr(unix.NDA_DST, make([]byte, 16)))))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		_ = rtnl.ParseDatagram(b, func(m rtnl.Message) error {
			u, err := DecodeNeigh(m.Header.Type, m.Body)
			if err == nil && (!u.Addr.IsValid() || u.Family != table.Family(m.Body[0]) || len(u.LLAddr) > len(m.Body)) {
				t.Fatalf("accepted an inconsistent update %+v", u)
			}
			return nil
		})
	})
}
