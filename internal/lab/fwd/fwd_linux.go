package fwd

import (
	"fmt"
	"net"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
)

// Kind is where a forwarder attaches.
type Kind string

// Forwarder kinds.
const (
	TC  Kind = "tc"  // tcx ingress, bpf_redirect()
	XDP Kind = "xdp" // XDP (generic on veth without a peer program), bpf_redirect()
)

// Forwarder is a loaded and attached forwarder; Close removes it.
type Forwarder struct {
	objs fwdObjects
	l    link.Link
}

// Attach loads the forwarder and attaches it to dev. Call it inside the
// interface's network namespace (lab.NS.Do).
func Attach(dev string, kind Kind) (*Forwarder, error) {
	ifi, err := net.InterfaceByName(dev)
	if err != nil {
		return nil, err
	}
	f := &Forwarder{}
	if err := loadFwdObjects(&f.objs, nil); err != nil {
		return nil, fmt.Errorf("load forwarder: %w", err)
	}
	switch kind {
	case TC:
		f.l, err = link.AttachTCX(link.TCXOptions{Interface: ifi.Index, Program: f.objs.FwdTc, Attach: ebpf.AttachTCXIngress})
	case XDP:
		f.l, err = link.AttachXDP(link.XDPOptions{Interface: ifi.Index, Program: f.objs.FwdXdp})
	default:
		err = fmt.Errorf("unknown forwarder kind %q", kind)
	}
	if err != nil {
		f.objs.Close()
		return nil, fmt.Errorf("attach %s forwarder to %s: %w", kind, dev, err)
	}
	return f, nil
}

// Close detaches and unloads the forwarder.
func (f *Forwarder) Close() error {
	err := f.l.Close()
	f.objs.Close()
	return err
}
