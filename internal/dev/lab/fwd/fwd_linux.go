package fwd

import (
	"errors"
	"fmt"
	"net"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// Kind is where a forwarder attaches and how it redirects.
type Kind string

// Forwarder kinds.
const (
	TC     Kind = "tc"      // TC ingress (tcx, or clsact before 6.6), bpf_redirect()
	XDP    Kind = "xdp"     // generic XDP, bpf_redirect()
	XDPMap Kind = "xdp-map" // generic XDP, bpf_redirect_map() to a devmap
	Peer   Kind = "peer"    // TC ingress, bpf_redirect_peer() to Options.Peer's peer, no FIB lookup
)

// Options are what some kinds need.
type Options struct {
	// Peer is the veth whose other end receives every IP packet (Peer
	// kind).
	Peer string
}

// Forwarder is a loaded and attached forwarder; Close removes it.
type Forwarder struct {
	objs   fwdObjects
	l      link.Link
	filter *netlink.BpfFilter // a TC forwarder on kernels without tcx
	ns     netns.NsHandle     // where the filter is
}

// Attach loads the forwarder and attaches it to dev. Call it inside the
// interface's network namespace (lab.NS.Do).
func Attach(dev string, kind Kind) (*Forwarder, error) {
	return AttachWith(dev, kind, Options{})
}

// AttachWith is Attach with options.
func AttachWith(dev string, kind Kind, o Options) (*Forwarder, error) {
	ifi, err := net.InterfaceByName(dev)
	if err != nil {
		return nil, err
	}
	spec, err := loadFwd()
	if err != nil {
		return nil, err
	}
	if kind == Peer {
		peer, err := net.InterfaceByName(o.Peer)
		if err != nil {
			return nil, fmt.Errorf("peer forwarder: %w", err)
		}
		if err := spec.Variables["peer_ifindex"].Set(uint32(peer.Index)); err != nil {
			return nil, err
		}
	}
	f := &Forwarder{}
	if err := spec.LoadAndAssign(&f.objs, nil); err != nil {
		return nil, fmt.Errorf("load forwarder: %w", err)
	}
	switch kind {
	case TC, Peer:
		prog := f.objs.FwdTc
		if kind == Peer {
			prog = f.objs.FwdPeer
		}
		f.l, err = link.AttachTCX(link.TCXOptions{Interface: ifi.Index, Program: prog, Attach: ebpf.AttachTCXIngress})
		if errors.Is(err, ebpf.ErrNotSupported) {
			// Before 6.6: a cls_bpf filter on clsact, as tc(8) adds it.
			f.filter, err = attachClsact(ifi.Index, prog)
			if err == nil {
				f.ns, err = netns.Get()
			}
		}
	case XDP:
		// Generic (skb) mode: veth's native XDP drops frames redirected
		// to a veth whose peer has no NAPI (no XDP program, no GRO).
		f.l, err = link.AttachXDP(link.XDPOptions{Interface: ifi.Index, Program: f.objs.FwdXdp, Flags: link.XDPGenericMode})
	case XDPMap:
		if err = fillDevmap(f.objs.TxPorts); err == nil {
			f.l, err = link.AttachXDP(link.XDPOptions{Interface: ifi.Index, Program: f.objs.FwdXdpMap, Flags: link.XDPGenericMode})
		}
	default:
		err = fmt.Errorf("unknown forwarder kind %q", kind)
	}
	if err != nil {
		f.objs.Close()
		return nil, fmt.Errorf("attach %s forwarder to %s: %w", kind, dev, err)
	}
	return f, nil
}

// fillDevmap maps every interface of the namespace to itself.
func fillDevmap(m *ebpf.Map) error {
	ifs, err := net.Interfaces()
	if err != nil {
		return err
	}
	for _, ifi := range ifs {
		if ifi.Index >= int(m.MaxEntries()) || ifi.Flags&net.FlagLoopback != 0 {
			continue
		}
		if err := m.Put(uint32(ifi.Index), uint32(ifi.Index)); err != nil {
			return fmt.Errorf("devmap %s: %w", ifi.Name, err)
		}
	}
	return nil
}

// Close detaches and unloads the forwarder.
func (f *Forwarder) Close() error {
	var err error
	if f.l != nil {
		err = f.l.Close()
	} else if f.filter != nil {
		var h *netlink.Handle
		if h, err = netlink.NewHandleAt(f.ns); err == nil {
			if err = h.FilterDel(f.filter); errors.Is(err, unix.ENODEV) || errors.Is(err, unix.ENOENT) || errors.Is(err, unix.EINVAL) {
				err = nil
			}
			h.Close()
		}
		f.ns.Close()
	}
	f.objs.Close()
	return err
}

func attachClsact(ifindex int, prog *ebpf.Program) (*netlink.BpfFilter, error) {
	q := &netlink.Clsact{QdiscAttrs: netlink.QdiscAttrs{LinkIndex: ifindex, Handle: netlink.MakeHandle(0xffff, 0), Parent: netlink.HANDLE_CLSACT}}
	if err := netlink.QdiscAdd(q); err != nil && !errors.Is(err, unix.EEXIST) {
		return nil, err
	}
	filter := &netlink.BpfFilter{
		FilterAttrs:  netlink.FilterAttrs{LinkIndex: ifindex, Parent: netlink.HANDLE_MIN_INGRESS, Handle: 1, Priority: 10, Protocol: unix.ETH_P_ALL},
		Fd:           prog.FD(),
		Name:         "lab-fwd",
		DirectAction: true,
	}
	if err := netlink.FilterAdd(filter); err != nil {
		return nil, err
	}
	filter.Fd = -1
	return filter, nil
}
