package control

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/neighwatch/neighwatch/table"
)

// The stream's own encoder writes what encoding/json writes for the
// rendered event, byte for byte: the events a test names (every kind of
// field it treats apart) and a few thousand made at random, names with
// quotes, HTML characters, control bytes, non-ASCII and invalid UTF-8
// among them.
func TestAppendEventJSONIsEncodingJSONs(t *testing.T) {
	at := time.Date(2026, 12, 7, 10, 0, 0, 123456789, time.FixedZone("x", 3600))
	mac := net.HardwareAddr{0x02, 0xab, 0, 1, 0xfe, 0x10}
	named := []table.Event{
		{},
		{Time: at, Ifindex: 3, Interface: "br0", Family: table.FamilyInet, IP: netip.MustParseAddr("10.0.0.1"),
			From: table.StateReachable, To: table.StateStale, LLAddr: mac, Cause: table.CauseNetlink, Kind: table.KindTransition, Class: table.ClassStaleLong},
		{Time: at, Interface: "eth0", Family: table.FamilyInet6, IP: netip.MustParseAddr("fe80::1%eth0"), Created: true, Deleted: true,
			OldLLAddr: mac, LLAddr: mac[:3], Kind: table.KindClass, Detail: `turned "stale-long" <after> 1m & more`},
		{Time: at, Interface: "we\x01ird\u2028\xff", Family: 9, IP: netip.MustParseAddr("2001:db8::7"), From: 0x7f, To: 0xee,
			Cause: "a\tb\nc", Kind: "k\\", Detail: "\u00e9\x00"},
	}
	check := func(ev table.Event) {
		t.Helper()
		var want bytes.Buffer
		if err := json.NewEncoder(&want).Encode(EventFromTable(ev)); err != nil {
			t.Fatal(err)
		}
		if got := AppendEventJSON(nil, ev); !bytes.Equal(got, want.Bytes()) {
			t.Fatalf("event %+v:\n got %s\nwant %s", ev, got, want.Bytes())
		}
	}
	for _, ev := range named {
		check(ev)
	}
	r := rand.New(rand.NewPCG(1, 2))
	str := func() string {
		b := make([]byte, r.IntN(12))
		for i := range b {
			if r.IntN(3) == 0 {
				b[i] = byte(r.IntN(256))
			} else {
				b[i] = byte('a' + r.IntN(26))
			}
		}
		return string(b)
	}
	for range 5000 {
		var a16 [16]byte
		for i := range a16 {
			a16[i] = byte(r.IntN(256))
		}
		ip := netip.AddrFrom16(a16)
		if r.IntN(2) == 0 {
			ip = netip.AddrFrom4([4]byte(a16[:4]))
		} else if r.IntN(4) == 0 {
			ip = ip.WithZone(str())
		}
		ll := make(net.HardwareAddr, r.IntN(9))
		for i := range ll {
			ll[i] = byte(r.IntN(256))
		}
		check(table.Event{
			Time: time.Unix(r.Int64N(4e9), r.Int64N(1e9)), Interface: str(), Family: table.Family(r.IntN(12)), IP: ip,
			From: table.State(r.IntN(256)), To: table.State(r.IntN(256)), Created: r.IntN(5) == 0, Deleted: r.IntN(5) == 0,
			OldLLAddr: ll[:r.IntN(len(ll)+1)], LLAddr: ll, Cause: table.Cause(str()), Kind: table.Kind(str()),
			Class: table.Class(r.IntN(6)), Detail: str(),
		})
	}
}

// BenchmarkEventLine: one event line the stream writes, by the
// appending encoder and by the encoding/json path it replaces.
func BenchmarkEventLine(b *testing.B) {
	ev := table.Event{Time: time.Now(), Ifindex: 3, Interface: "br0", Family: table.FamilyInet, IP: netip.MustParseAddr("10.20.30.40"),
		From: table.StateStale, To: table.StateStale, OldLLAddr: net.HardwareAddr{2, 0, 0, 0, 0, 1}, LLAddr: net.HardwareAddr{2, 0, 0, 0, 0, 2},
		Cause: table.CauseNetlink, Kind: table.KindTransition, Class: table.ClassStaleLong}
	b.Run("append", func(b *testing.B) {
		b.ReportAllocs()
		var line []byte
		for b.Loop() {
			line = AppendEventJSON(line[:0], ev)
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		var w bytes.Buffer
		enc := json.NewEncoder(&w)
		for b.Loop() {
			w.Reset()
			_ = enc.Encode(EventFromTable(ev))
		}
	})
}
