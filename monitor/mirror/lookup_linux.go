package mirror

import (
	"errors"

	"github.com/neighwatch/neighwatch/monitor/internal/nsenter"
	"github.com/neighwatch/neighwatch/table"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
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
	for _, k := range keys {
		if _, ok := m.table.Lookup(k); ok || !m.watchedIndex(k.Ifindex) {
			continue
		}
		var msgs [][]byte
		err := nsenter.Run(m.ns(), func() error {
			req := nl.NewNetlinkRequest(unix.RTM_GETNEIGH, 0)
			msg := netlink.Ndmsg{Family: uint8(k.Family()), Index: uint32(k.Ifindex)}
			req.AddData(&msg)
			req.AddData(nl.NewRtAttr(unix.NDA_DST, k.Addr.AsSlice()))
			var err error
			msgs, err = req.Execute(unix.NETLINK_ROUTE, unix.RTM_NEWNEIGH)
			return err
		})
		if errors.Is(err, unix.ENOENT) {
			continue // gone already
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, b := range msgs {
			u, err := DecodeNeigh(unix.RTM_NEWNEIGH, b)
			if err != nil {
				m.c.errDecode.Add(1)
				continue
			}
			u.LLAddr = append([]byte(nil), u.LLAddr...) // b is not ours to keep
			found = append(found, u)
		}
	}
	added := 0
	for _, u := range found {
		if _, ok := m.table.Lookup(table.Key{Ifindex: u.Ifindex, Addr: u.Addr}); ok {
			continue // netlink got there first
		}
		m.table.Apply(table.CauseTracepoint, u)
		added++
	}
	m.c.lookups.Add(uint64(added))
	return added, errors.Join(errs...)
}
