package neightbl

import (
	"encoding/binary"
	"testing"

	"github.com/neighwatch/neighwatch/monitor/internal/rtnl"
	"github.com/neighwatch/neighwatch/table"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

func u32(v uint32) []byte { return binary.NativeEndian.AppendUint32(nil, v) }

func TestDecode(t *testing.T) {
	stats := make([]byte, 11*8)
	binary.NativeEndian.PutUint64(stats[9*8:], 4)   // forced_gc_runs
	binary.NativeEndian.PutUint64(stats[10*8:], 17) // table_fulls
	cfg := make([]byte, 32)
	binary.NativeEndian.PutUint32(cfg[4:8], 1234)
	msg := []byte{unix.AF_INET, 0, 0, 0}
	msg = rtnl.AppendAttr(msg, ndtaName, []byte("arp_cache\x00"))
	msg = rtnl.AppendAttr(msg, ndtaThresh1, u32(128))
	msg = rtnl.AppendAttr(msg, ndtaThresh2, u32(512))
	msg = rtnl.AppendAttr(msg, ndtaThresh3, u32(1024))
	msg = rtnl.AppendAttr(msg, ndtaConfig, cfg)
	msg = rtnl.AppendAttr(msg, ndtaStats, stats)
	p, err := Decode(msg)
	if err != nil {
		t.Fatal(err)
	}
	want := Params{Family: table.FamilyInet, Name: "arp_cache", Thresh1: 128, Thresh2: 512, Thresh3: 1024, Entries: 1234,
		ForcedGCRuns: 4, TableFulls: 17, HasConfig: true, HasStats: true, HasThresholds: true}
	if p != want {
		t.Fatalf("got  %+v\nwant %+v", p, want)
	}
	if _, err := Decode([]byte{2, 0}); err == nil {
		t.Fatal("a 2-byte message decoded")
	}
}

func FuzzDecode(f *testing.F) {
	f.Add(rtnl.AppendAttr([]byte{unix.AF_INET6, 0, 0, 0}, ndtaThresh1, u32(1)))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		if p, err := Decode(b); err == nil && p.Family != table.Family(b[0]) {
			t.Fatalf("family %d from header byte %d", p.Family, b[0])
		}
	})
}

// TestReadKernel reads the real tables: an unprivileged read works too,
// and the thresholds are the host's (gc_thresh3 >= gc_thresh1).
func TestReadKernel(t *testing.T) {
	ps, err := NewReader(netns.None()).Read()
	if err != nil {
		t.Fatal(err)
	}
	fams := map[table.Family]bool{}
	for _, p := range ps {
		fams[p.Family] = true
		if !p.HasStats || !p.HasConfig || p.Thresh3 < p.Thresh1 {
			t.Errorf("%s: %+v", p.Name, p)
		}
	}
	if !fams[table.FamilyInet] || !fams[table.FamilyInet6] {
		t.Errorf("tables read: %v, want inet and inet6", fams)
	}
}
