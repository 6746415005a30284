package fwd

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// Suppressor drops the gratuitous ARPs for one address that enter an
// interface, as a switch doing ARP suppression keeps them from the other
// ports: requests or replies whose sender and target address are both
// that address. Everything else passes (answers to probes, requests for
// other addresses). Close removes it.
type Suppressor struct {
	prog   *ebpf.Program
	l      link.Link
	filter *netlink.BpfFilter
	ns     netns.NsHandle
}

// Offsets in struct __sk_buff (include/uapi/linux/bpf.h).
const skbData, skbDataEnd = 76, 80

// SuppressGratuitousARP attaches a Suppressor for ip to dev's ingress
// (tcx, or clsact before 6.6). Call it inside the interface's namespace.
// The program is assembled here: the lab needs no compiler for it.
func SuppressGratuitousARP(dev string, ip netip.Addr) (*Suppressor, error) {
	if !ip.Is4() {
		return nil, fmt.Errorf("gratuitous ARP of %s: an IPv4 address is needed", ip)
	}
	ifi, err := net.InterfaceByName(dev)
	if err != nil {
		return nil, err
	}
	a4 := ip.As4()
	addr := int64(binary.LittleEndian.Uint32(a4[:])) // as a 4-byte load of the packet reads it
	ethARP := int64(binary.LittleEndian.Uint16([]byte{0x08, 0x06}))
	spec := &ebpf.ProgramSpec{
		Name: "lab_garp_drop",
		Type: ebpf.SchedCLS,
		Instructions: asm.Instructions{
			asm.LoadMem(asm.R2, asm.R1, skbData, asm.Word),
			asm.LoadMem(asm.R3, asm.R1, skbDataEnd, asm.Word),
			asm.Mov.Reg(asm.R4, asm.R2),
			asm.Add.Imm(asm.R4, 42), // Ethernet and ARP for IPv4
			asm.JGT.Reg(asm.R4, asm.R3, "pass"),
			asm.LoadMem(asm.R5, asm.R2, 12, asm.Half),
			asm.JNE.Imm(asm.R5, int32(ethARP), "pass"),
			asm.LoadMem(asm.R5, asm.R2, 28, asm.Word), // sender protocol address
			asm.JNE.Imm32(asm.R5, int32(uint32(addr)), "pass"),
			asm.LoadMem(asm.R5, asm.R2, 38, asm.Word), // target protocol address
			asm.JNE.Imm32(asm.R5, int32(uint32(addr)), "pass"),
			asm.Mov.Imm(asm.R0, 2), // TC_ACT_SHOT
			asm.Return(),
			asm.Mov.Imm(asm.R0, -1).WithSymbol("pass"), // TC_ACT_UNSPEC, TCX_NEXT: on to the next program
			asm.Return(),
		},
		License: "GPL",
	}
	s := &Suppressor{}
	if s.prog, err = ebpf.NewProgram(spec); err != nil {
		return nil, fmt.Errorf("load ARP suppressor: %w", err)
	}
	s.l, err = link.AttachTCX(link.TCXOptions{Interface: ifi.Index, Program: s.prog, Attach: ebpf.AttachTCXIngress})
	if errors.Is(err, ebpf.ErrNotSupported) {
		if s.filter, err = attachClsact(ifi.Index, s.prog); err == nil {
			s.ns, err = netns.Get()
		}
	}
	if err != nil {
		s.prog.Close()
		return nil, fmt.Errorf("attach ARP suppressor to %s: %w", dev, err)
	}
	return s, nil
}

// Close detaches and unloads the suppressor.
func (s *Suppressor) Close() error {
	var err error
	if s.l != nil {
		err = s.l.Close()
	} else if s.filter != nil {
		var h *netlink.Handle
		if h, err = netlink.NewHandleAt(s.ns); err == nil {
			if err = h.FilterDel(s.filter); errors.Is(err, unix.ENODEV) || errors.Is(err, unix.ENOENT) || errors.Is(err, unix.EINVAL) {
				err = nil
			}
			h.Close()
		}
		s.ns.Close()
	}
	s.prog.Close()
	return err
}
