package monitor

import (
	"encoding/binary"
	"fmt"

	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"
)

// TableParams are a kernel neighbour table's GC thresholds and statistics
// (RTM_GETNEIGHTBL). The thresholds are host-wide: they live in the initial
// namespace and apply to every namespace.
type TableParams struct {
	Family                 Family
	Name                   string // "arp_cache", "ndisc_cache"
	Thresh1, Thresh2       uint32
	Thresh3                uint32
	Entries                uint32 // ndtc_entries: all entries of the table, every namespace
	Allocs, Destroys       uint64
	ForcedGCRuns           uint64
	TableFulls             uint64
	ResFailed              uint64
	PeriodicGCRuns         uint64
	HasConfig, HasStats    bool
	HasThresholds          bool
	GCIntervalMilliseconds uint64
}

// NDTA_* attribute types (include/uapi/linux/neighbour.h).
const (
	ndtaName       = 1
	ndtaThresh1    = 2
	ndtaThresh2    = 3
	ndtaThresh3    = 4
	ndtaConfig     = 5
	ndtaStats      = 7
	ndtaGCInterval = 8
)

// ReadTableParams dumps the neighbour tables' parameters in the monitor's
// namespace.
func (m *Monitor) ReadTableParams() ([]TableParams, error) {
	var msgs [][]byte
	err := inNetns(m.ns(), func() error {
		req := nl.NewNetlinkRequest(unix.RTM_GETNEIGHTBL, unix.NLM_F_DUMP)
		req.AddData(nl.NewRtGenMsg()) // struct ndtmsg starts like rtgenmsg: family AF_UNSPEC
		var err error
		msgs, err = req.Execute(unix.NETLINK_ROUTE, unix.RTM_NEWNEIGHTBL)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("dump neighbour table parameters: %w", err)
	}
	var out []TableParams
	for _, b := range msgs {
		p, err := DecodeNeighTable(b)
		if err != nil {
			continue
		}
		// Per-device parameter messages carry no thresholds; the table's
		// own message does.
		if p.HasThresholds && (p.Family == FamilyInet || p.Family == FamilyInet6) {
			out = append(out, p)
		}
	}
	return out, nil
}

// DecodeNeighTable decodes the body of one RTM_NEWNEIGHTBL message.
func DecodeNeighTable(b []byte) (TableParams, error) {
	var p TableParams
	if len(b) < 4 {
		return p, fmt.Errorf("neighbour table message of %d bytes", len(b))
	}
	p.Family = Family(b[0])
	u32 := func(v []byte) uint32 {
		if len(v) < 4 {
			return 0
		}
		return binary.NativeEndian.Uint32(v)
	}
	err := walkAttrs(b[4:], func(t uint16, v []byte) error {
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
				p.GCIntervalMilliseconds = binary.NativeEndian.Uint64(v)
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
