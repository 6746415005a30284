package bpf

import (
	"errors"
	"fmt"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// AttachMethod is how a TC program is attached to an interface's ingress.
type AttachMethod string

// Attach methods: tcx links (Linux 6.6 and later), or a cls_bpf filter
// on a clsact qdisc through netlink where tcx is missing.
const (
	AttachTCX    AttachMethod = "tcx"
	AttachClsact AttachMethod = "clsact"
)

// ingress is a TC program attached to an interface's ingress.
type ingress interface {
	// Update swaps the program atomically: every packet sees the old
	// or the new one, never none.
	Update(*ebpf.Program) error
	Close() error
	Method() AttachMethod
}

// clsact filter slots: the source-MAC program runs first (it only
// watches), then the datapath (it may redirect).
type tcSlot struct {
	prio   uint16
	handle uint32
	name   string
}

var (
	slotSource   = tcSlot{prio: 1, handle: 0x6e01, name: "neighwatch-source"}
	slotDatapath = tcSlot{prio: 2, handle: 0x6e02, name: "neighwatch-datapath"}
)

// attachIngress attaches prog to ifindex's ingress with tcx, at the head
// of the chain when head is set; on kernels without tcx (before 6.6) it
// adds a direct-action cls_bpf filter to a clsact qdisc, in slot. Call it
// in the interface's network namespace.
func attachIngress(ifindex int, prog *ebpf.Program, head bool, slot tcSlot) (ingress, error) {
	opts := link.TCXOptions{Interface: ifindex, Program: prog, Attach: ebpf.AttachTCXIngress}
	if head {
		opts.Anchor = link.Head()
	}
	l, err := link.AttachTCX(opts)
	if err == nil {
		return tcxIngress{l}, nil
	}
	if !errors.Is(err, ebpf.ErrNotSupported) {
		return nil, err
	}
	c := &clsactIngress{ifindex: ifindex, slot: slot}
	if err := c.ensureQdisc(); err != nil {
		return nil, err
	}
	if err := c.Update(prog); err != nil {
		return nil, err
	}
	return c, nil
}

type tcxIngress struct{ link.Link }

func (t tcxIngress) Method() AttachMethod { return AttachTCX }

// clsactIngress is a cls_bpf filter with a fixed priority and handle:
// replacing it swaps the program in place. Unlike a tcx link it outlives
// the agent if the agent is killed; the next start replaces it.
type clsactIngress struct {
	ifindex int
	slot    tcSlot
}

func (c *clsactIngress) Method() AttachMethod { return AttachClsact }

func (c *clsactIngress) ensureQdisc() error {
	q := &netlink.Clsact{QdiscAttrs: netlink.QdiscAttrs{LinkIndex: c.ifindex, Handle: netlink.MakeHandle(0xffff, 0), Parent: netlink.HANDLE_CLSACT}}
	if err := netlink.QdiscAdd(q); err != nil && !errors.Is(err, unix.EEXIST) {
		return fmt.Errorf("add clsact qdisc to interface %d: %w", c.ifindex, err)
	}
	return nil
}

func (c *clsactIngress) filter(fd int) *netlink.BpfFilter {
	return &netlink.BpfFilter{
		FilterAttrs: netlink.FilterAttrs{
			LinkIndex: c.ifindex,
			Parent:    netlink.HANDLE_MIN_INGRESS,
			Handle:    c.slot.handle,
			Priority:  c.slot.prio,
			Protocol:  unix.ETH_P_ALL,
		},
		Fd:           fd,
		Name:         c.slot.name,
		DirectAction: true,
	}
}

// Update replaces the filter (RTM_NEWTFILTER without NLM_F_EXCL): cls_bpf
// swaps the program of the existing filter under RCU.
func (c *clsactIngress) Update(prog *ebpf.Program) error {
	if err := netlink.FilterReplace(c.filter(prog.FD())); err != nil {
		return fmt.Errorf("cls_bpf filter on clsact ingress of interface %d: %w", c.ifindex, err)
	}
	return nil
}

// Close deletes the filter; the clsact qdisc stays for whoever else uses
// it. An interface that is gone has taken the filter with it.
func (c *clsactIngress) Close() error {
	err := netlink.FilterDel(c.filter(-1))
	if err == nil || errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENODEV) || errors.Is(err, unix.EINVAL) {
		return nil
	}
	return fmt.Errorf("delete cls_bpf filter from interface %d: %w", c.ifindex, err)
}

// RemoveStaleFilters deletes the cls_bpf filters an earlier neighwatch
// left on clsact qdiscs in the caller's network namespace (a killed agent
// leaves them; tcx links go with the process) and returns how many.
func RemoveStaleFilters() (int, error) {
	links, err := netlink.LinkList()
	if err != nil {
		return 0, fmt.Errorf("list interfaces: %w", err)
	}
	n := 0
	var errs []error
	for _, l := range links {
		filters, err := netlink.FilterList(l, netlink.HANDLE_MIN_INGRESS)
		if err != nil {
			continue // no clsact qdisc, or the link went away
		}
		for _, f := range filters {
			bf, ok := f.(*netlink.BpfFilter)
			if !ok || (bf.Name != slotSource.name && bf.Name != slotDatapath.name) {
				continue
			}
			bf.Fd = -1
			if err := netlink.FilterDel(bf); err != nil && !errors.Is(err, unix.ENOENT) {
				errs = append(errs, fmt.Errorf("delete %s from %s: %w", bf.Name, l.Attrs().Name, err))
				continue
			}
			n++
		}
	}
	return n, errors.Join(errs...)
}
