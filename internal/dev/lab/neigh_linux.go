package lab

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/neighwatch/neighwatch/table"
)

// KernelNeigh is one neighbour entry as the kernel's own netlink dump
// carries it, flags included: ip(8) drops some of them from its JSON
// (managed) and prints others differently between versions.
type KernelNeigh struct {
	LLAddr   net.HardwareAddr
	State    int    // NUD_* bits
	Flags    int    // NTF_*
	FlagsExt uint32 // NTF_EXT_* (NDA_FLAGS_EXT)
	// Updated is the time since the entry's state last changed
	// (NDA_CACHEINFO's updated, in USER_HZ ticks of 10 ms).
	Updated time.Duration
}

// Managed reports whether the kernel holds the entry managed
// (NTF_EXT_MANAGED).
func (k KernelNeigh) Managed() bool { return k.FlagsExt&ntfExtManaged != 0 }

const ntfExtManaged = 0x01 // NTF_EXT_MANAGED, include/uapi/linux/neighbour.h

// KernelEntry reads one entry from the kernel over netlink; ErrNoEntry
// when there is none.
func (n NS) KernelEntry(dev string, ip netip.Addr) (KernelNeigh, error) {
	h, err := n.Handle()
	if err != nil {
		return KernelNeigh{}, err
	}
	defer h.Close()
	nh, err := netlink.NewHandleAt(h)
	if err != nil {
		return KernelNeigh{}, err
	}
	defer nh.Close()
	link, err := nh.LinkByName(dev)
	if err != nil {
		return KernelNeigh{}, fmt.Errorf("%s in %s: %w", dev, n.Name, err)
	}
	fam := netlink.FAMILY_V4
	if ip.Is6() {
		fam = netlink.FAMILY_V6
	}
	all, err := nh.NeighList(link.Attrs().Index, fam)
	if err != nil {
		return KernelNeigh{}, err
	}
	for _, e := range all {
		if a, ok := netip.AddrFromSlice(e.IP); ok && a.Unmap() == ip {
			return KernelNeigh{LLAddr: e.HardwareAddr, State: e.State, Flags: e.Flags, FlagsExt: uint32(e.FlagsExt),
				Updated: time.Duration(e.Updated) * 10 * time.Millisecond}, nil
		}
	}
	return KernelNeigh{}, ErrNoEntry
}

// TableDiffers compares the table's entry for ip on dev with the
// kernel's, field by field: present or not, state, MAC, the router and
// extern_learn flags, NDA_FLAGS_EXT (managed), and the time in its state
// (the kernel's updated) within a second. It returns what differs, or
// nil.
func (n NS) TableDiffers(t *table.Table, dev string, ip netip.Addr) error {
	idx, err := n.Ifindex(dev)
	if err != nil {
		return err
	}
	e, inTable := t.Lookup(table.Key{Ifindex: int32(idx), Addr: ip})
	now := time.Now()
	k, err := n.KernelEntry(dev, ip)
	switch {
	case errors.Is(err, ErrNoEntry) && !inTable:
		return nil
	case errors.Is(err, ErrNoEntry):
		return fmt.Errorf("%v: in the table (%v), not in the kernel", ip, e.State)
	case err != nil:
		return err
	case !inTable:
		return fmt.Errorf("%v: in the kernel (state 0x%02x), not in the table", ip, k.State)
	}
	var out []string
	if int(e.State) != k.State {
		out = append(out, fmt.Sprintf("state %v, kernel 0x%02x", e.State, k.State))
	}
	if e.HardwareAddr().String() != k.LLAddr.String() {
		out = append(out, fmt.Sprintf("lladdr %v, kernel %v", e.HardwareAddr(), k.LLAddr))
	}
	const kept = table.FlagRouter | table.FlagExtLearned
	if got, want := e.Flags&kept, uint8(k.Flags)&kept; got != want {
		out = append(out, fmt.Sprintf("flags 0x%02x, kernel 0x%02x", got, want))
	}
	if e.FlagsExt != k.FlagsExt {
		out = append(out, fmt.Sprintf("flags_ext 0x%x, kernel 0x%x", e.FlagsExt, k.FlagsExt))
	}
	if age := now.Sub(time.Unix(0, e.Since)); age-k.Updated > time.Second || k.Updated-age > time.Second {
		out = append(out, fmt.Sprintf("in its state for %v, kernel %v", age.Round(10*time.Millisecond), k.Updated))
	}
	if len(out) > 0 {
		return fmt.Errorf("%v: %v", ip, out)
	}
	return nil
}

// RequireTableMatches waits for the table's entry for ip on dev to equal
// the kernel's, field by field (TableDiffers), and fails the test with
// what differs if it does not within Patience(10s).
func RequireTableMatches(tb testing.TB, n NS, t *table.Table, dev string, ip netip.Addr, what string) {
	tb.Helper()
	deadline := time.Now().Add(Patience(10 * time.Second))
	for {
		err := n.TableDiffers(t, dev, ip)
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("%s: the table differs from the kernel: %v", what, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// VethPair makes a namespace with a veth, v0, whose peer v1 is in a
// namespace of its own (peer), both ends up, with no duplicate address
// detection (link-local addresses answer and ask at once) and no GC of
// v0's STALE entries within the hour: a test's entries stay as it sets
// them. Both go with the test.
func VethPair(tb testing.TB, prefix string) (ns, peer NS) {
	tb.Helper()
	ns, peer = NewNS(tb, prefix), NewNS(tb, prefix+"p")
	for _, n := range []NS{ns, peer} {
		if err := n.Sysctl("net.ipv6.conf.default.accept_dad", "0"); err != nil {
			tb.Fatal(err)
		}
	}
	if err := ns.Batch([]string{"link add v0 type veth peer name v1 netns " + peer.Name, "link set v0 up"}); err != nil {
		tb.Fatal(err)
	}
	peer.MustIP(tb, "link", "set", "v1", "up")
	for _, k := range []string{"net.ipv4.neigh.v0.gc_stale_time", "net.ipv6.neigh.v0.gc_stale_time"} {
		if err := ns.Sysctl(k, "3600"); err != nil {
			tb.Fatal(err)
		}
	}
	return ns, peer
}
