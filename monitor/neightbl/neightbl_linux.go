package neightbl

import (
	"encoding/binary"
	"fmt"

	"github.com/neighwatch/neighwatch/monitor/internal/nsenter"
	"github.com/neighwatch/neighwatch/monitor/internal/rtnl"
	"github.com/neighwatch/neighwatch/table"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// NDTA_* attribute types (include/uapi/linux/neighbour.h); neither
// golang.org/x/sys/unix nor vishvananda/netlink defines them.
const (
	ndtaName       = 1
	ndtaThresh1    = 2
	ndtaThresh2    = 3
	ndtaThresh3    = 4
	ndtaConfig     = 5
	ndtaStats      = 7
	ndtaGCInterval = 8
)

// sizeofNdtmsg is struct ndtmsg: family and three bytes of padding.
const sizeofNdtmsg = 4

// Reader dumps the neighbour tables' parameters in one namespace.
type Reader struct {
	ns netns.NsHandle
}

// NewReader returns a reader for namespace ns (netns.None(): the caller's).
func NewReader(ns netns.NsHandle) *Reader { return &Reader{ns: ns} }

// Read dumps the IPv4 and IPv6 tables' parameters.
func (r *Reader) Read() ([]Params, error) {
	c, err := nsenter.Open(r.ns, rtnl.Dial)
	if err != nil {
		return nil, fmt.Errorf("dump neighbour table parameters: %w", err)
	}
	defer c.Close()
	var out []Params
	// struct ndtmsg: family AF_UNSPEC and padding.
	err = c.Do(unix.RTM_GETNEIGHTBL, unix.NLM_F_DUMP, make([]byte, sizeofNdtmsg), func(typ uint16, b []byte) error {
		if typ != unix.RTM_NEWNEIGHTBL {
			return nil
		}
		p, err := Decode(b)
		// Per-device parameter messages carry no thresholds; the table's
		// own message does.
		if err == nil && p.HasThresholds && (p.Family == table.FamilyInet || p.Family == table.FamilyInet6) {
			out = append(out, p)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("dump neighbour table parameters: %w", err)
	}
	return out, nil
}

// Decode decodes the body of one RTM_NEWNEIGHTBL message.
func Decode(b []byte) (Params, error) {
	var p Params
	if len(b) < sizeofNdtmsg {
		return p, fmt.Errorf("neighbour table message of %d bytes", len(b))
	}
	p.Family = table.Family(b[0])
	u32 := func(v []byte) uint32 {
		if len(v) < 4 {
			return 0
		}
		return binary.NativeEndian.Uint32(v)
	}
	err := rtnl.WalkAttrs(b[sizeofNdtmsg:], func(t uint16, v []byte) error {
		switch t {
		case ndtaName:
			if n := len(v); n > 0 && v[n-1] == 0 {
				v = v[:n-1]
			}
			p.Name = string(v)
		case ndtaThresh1:
			p.Thresh1, p.HasThresholds = u32(v), true
		case ndtaThresh2:
			p.Thresh2 = u32(v)
		case ndtaThresh3:
			p.Thresh3 = u32(v)
		case ndtaGCInterval:
			if len(v) >= 8 {
				p.GCInterval = binary.NativeEndian.Uint64(v)
			}
		case ndtaConfig:
			// struct ndt_config: u16 key_len, u16 entry_size, u32 entries, ...
			if len(v) >= 8 {
				p.HasConfig = true
				p.Entries = binary.NativeEndian.Uint32(v[4:8])
			}
		case ndtaStats:
			// struct ndt_stats: u64 allocs, destroys, hash_grows,
			// res_failed, lookups, hits, rcv_probes_mcast,
			// rcv_probes_ucast, periodic_gc_runs, forced_gc_runs and,
			// since 4.x, table_fulls.
			if len(v) >= 10*8 {
				p.HasStats = true
				c := func(i int) uint64 { return binary.NativeEndian.Uint64(v[i*8:]) }
				p.Allocs, p.Destroys, p.ResFailed = c(0), c(1), c(3)
				p.PeriodicGCRuns, p.ForcedGCRuns = c(8), c(9)
				if len(v) >= 11*8 {
					p.TableFulls = c(10)
				}
			}
		}
		return nil
	})
	if err != nil {
		return p, fmt.Errorf("neighbour table message: %w", err)
	}
	return p, nil
}
