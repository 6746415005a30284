package lab

import (
	"fmt"
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"
)

// KernelNeigh is one neighbour entry as the kernel's own netlink dump
// carries it, flags included: ip(8) drops some of them from its JSON
// (managed) and prints others differently between versions.
type KernelNeigh struct {
	LLAddr   net.HardwareAddr
	State    int    // NUD_* bits
	Flags    int    // NTF_*
	FlagsExt uint32 // NTF_EXT_* (NDA_FLAGS_EXT)
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
			return KernelNeigh{LLAddr: e.HardwareAddr, State: e.State, Flags: e.Flags, FlagsExt: uint32(e.FlagsExt)}, nil
		}
	}
	return KernelNeigh{}, ErrNoEntry
}
