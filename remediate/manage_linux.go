package remediate

import (
	"errors"
	"fmt"
	"net"

	"github.com/neighwatch/neighwatch/internal/kver"
	"github.com/neighwatch/neighwatch/table"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"
)

// ManagedSupported reports whether the running kernel keeps managed
// neighbours (NTF_EXT_MANAGED, Linux 5.16). Older kernels ignore the
// attribute without an error, so the version is the only test.
func ManagedSupported() (bool, string) {
	ok, rel, err := kver.AtLeast(5, 16)
	switch {
	case err != nil && rel == "":
		return false, "uname: " + err.Error()
	case err != nil:
		return false, err.Error()
	case !ok:
		return false, "kernel " + rel + " is older than 5.16"
	}
	return true, rel
}

// neighRequest sends one RTM_NEWNEIGH or RTM_DELNEIGH for k with the
// given state, flags and extended flags; proto 0 leaves the protocol.
func neighRequest(typ int, k table.Key, state uint16, flagsExt uint32, withExt bool, proto uint8, lladdr ...byte) error {
	fam := unix.AF_INET
	if k.Addr.Is6() {
		fam = unix.AF_INET6
	}
	flags := unix.NLM_F_ACK
	if typ == unix.RTM_NEWNEIGH {
		flags |= unix.NLM_F_REPLACE
	}
	req := nl.NewNetlinkRequest(typ, flags)
	req.AddData(&netlink.Ndmsg{Family: uint8(fam), Index: uint32(k.Ifindex), State: state})
	req.AddData(nl.NewRtAttr(unix.NDA_DST, k.Addr.AsSlice()))
	if len(lladdr) > 0 {
		req.AddData(nl.NewRtAttr(unix.NDA_LLADDR, lladdr))
	}
	if withExt {
		req.AddData(nl.NewRtAttr(netlink.NDA_FLAGS_EXT, nl.Uint32Attr(flagsExt)))
	}
	if proto != 0 {
		req.AddData(nl.NewRtAttr(netlink.NDA_PROTOCOL, []byte{proto}))
	}
	_, err := req.Execute(unix.NETLINK_ROUTE, 0)
	return err
}

// Manage sets NTF_EXT_MANAGED and neighwatch's protocol on the entry. No
// state and no address: the kernel keeps the entry's lladdr and starts
// re-validating it at once (as `ip neigh replace IP dev DEV managed`).
func (a *NetActor) Manage(en *table.Entry) error {
	if err := neighRequest(unix.RTM_NEWNEIGH, en.Key, 0, table.FlagExtManaged, true, table.ProtocolNeighwatch); err != nil {
		return fmt.Errorf("manage %s on %d: %w", en.Addr, en.Ifindex, kernelRefusal(err))
	}
	return nil
}

// Repoint gives an entry neighwatch manages the address a probe proved
// (its host moved), in two requests: the kernel ignores a state and an
// address given with the managed flag, so first STALE at mac (which
// clears managed; neighwatch's protocol stays), then managed again, which
// makes the kernel re-validate it there at once.
func (a *NetActor) Repoint(en *table.Entry, mac net.HardwareAddr) error {
	if err := neighRequest(unix.RTM_NEWNEIGH, en.Key, unix.NUD_STALE, 0, true, table.ProtocolNeighwatch, mac...); err != nil {
		return fmt.Errorf("repoint %s on %d to %s: %w", en.Addr, en.Ifindex, mac, kernelRefusal(err))
	}
	return a.Manage(en)
}

// Release clears managed. A valid entry is set STALE with its address
// kept (an administrative update without the managed flag clears it); an
// invalid one is deleted, as the garbage collector would.
func (a *NetActor) Release(k table.Key, valid bool) error {
	var err error
	if valid {
		err = neighRequest(unix.RTM_NEWNEIGH, k, unix.NUD_STALE, 0, true, 0)
	} else {
		err = neighRequest(unix.RTM_DELNEIGH, k, 0, 0, false, 0)
	}
	if err != nil && !errors.Is(err, unix.ENOENT) && !errors.Is(err, unix.ENODEV) {
		return fmt.Errorf("release %s on %d: %w", k.Addr, k.Ifindex, kernelRefusal(err))
	}
	return nil
}
