package mirror

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/neighwatch/neighwatch/monitor/internal/nsenter"
	"github.com/neighwatch/neighwatch/monitor/internal/rtnl"
	"github.com/neighwatch/neighwatch/table"
	"golang.org/x/sys/unix"
)

// Lookup asks the kernel for single entries (RTM_GETNEIGH with NDA_DST)
// and adds to the table those it does not hold yet: the kernel creates
// some entries, IPv6 multicast and NOARP ones, without any netlink
// notification, and the tracer's neigh_create tracepoint names them. It
// returns how many entries it added.
func (m *Mirror) Lookup(keys []table.Key) (int, error) {
	m.applyMu.Lock() // see applyBatch: no interface deletion in between
	defer m.applyMu.Unlock()
	var found []table.Update
	var errs []error
	var c *rtnl.Conn
	for _, k := range keys {
		if _, ok := m.entries.Lookup(k); ok || !m.watchedIndex(k.Ifindex) {
			continue
		}
		if c == nil {
			// One socket for the lot, opened in the mirror's namespace.
			var err error
			if c, err = nsenter.Open(m.ns(), rtnl.Dial); err != nil {
				return 0, err
			}
			defer c.Close()
		}
		// struct ndmsg, then NDA_DST.
		req := make([]byte, unix.SizeofNdMsg, unix.SizeofNdMsg+unix.SizeofRtAttr+16)
		req[0] = uint8(k.Family())
		binary.NativeEndian.PutUint32(req[4:8], uint32(k.Ifindex))
		req = rtnl.AppendAttr(req, unix.NDA_DST, k.Addr.AsSlice())
		err := c.Do(unix.RTM_GETNEIGH, 0, req, func(typ uint16, b []byte) error {
			if typ != unix.RTM_NEWNEIGH {
				return nil
			}
			u, err := DecodeNeigh(unix.RTM_NEWNEIGH, b)
			if err != nil {
				m.c.add(ErrDecode)
				return nil
			}
			u.LLAddr = append([]byte(nil), u.LLAddr...) // b is not ours to keep
			found = append(found, u)
			return nil
		})
		if errors.Is(err, unix.ENOENT) {
			continue // gone already
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("look up neighbour %v: %w", k, err))
		}
	}
	added := 0
	for _, u := range found {
		if _, ok := m.entries.Lookup(table.Key{Ifindex: u.Ifindex, Addr: u.Addr}); ok {
			continue // netlink got there first
		}
		m.table.Apply(table.CauseTracepoint, u)
		added++
	}
	m.c[Lookups].Add(uint64(added))
	return added, errors.Join(errs...)
}
