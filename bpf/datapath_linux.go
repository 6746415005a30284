package bpf

import (
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"
)

// Datapath is the loaded forwarding program pair and its attachments.
type Datapath struct {
	objs      datapathObjects
	skipNeigh bool

	mu    sync.Mutex
	links map[int]*attachment
}

type attachment struct {
	link ingress
	mode Mode
}

// ProbeSkipNeigh asks the kernel whether bpf_fib_lookup() takes
// BPF_FIB_LOOKUP_SKIP_NEIGH, by running a one-line program.
func ProbeSkipNeigh() (bool, error) {
	spec, err := loadDatapath()
	if err != nil {
		return false, err
	}
	prog, err := ebpf.NewProgram(spec.Programs["probe_skip_neigh"])
	if err != nil {
		return false, fmt.Errorf("load SKIP_NEIGH probe: %w", verifierDetail(err))
	}
	defer prog.Close()
	ret, err := prog.Run(&ebpf.RunOptions{Data: make([]byte, 64)})
	if err != nil {
		return false, fmt.Errorf("run SKIP_NEIGH probe: %w", err)
	}
	return int32(ret) != -int32(unix.EINVAL), nil
}

// LoadDatapath loads both variants. Nothing is attached yet.
func LoadDatapath() (*Datapath, error) {
	skip, err := ProbeSkipNeigh()
	if err != nil {
		return nil, err
	}
	spec, err := loadDatapath()
	if err != nil {
		return nil, err
	}
	var flags uint32
	if skip {
		flags = unix.BPF_FIB_LOOKUP_SKIP_NEIGH
	}
	if err := spec.Variables["neigh_lookup_flags"].Set(flags); err != nil {
		return nil, err
	}
	d := &Datapath{skipNeigh: skip, links: make(map[int]*attachment)}
	if err := spec.LoadAndAssign(&d.objs, nil); err != nil {
		return nil, fmt.Errorf("load datapath: %w", verifierDetail(err))
	}
	return d, nil
}

// SkipNeigh reports whether the kernel accepts BPF_FIB_LOOKUP_SKIP_NEIGH
// (6.5 and later), which the neigh mode then uses.
func (d *Datapath) SkipNeigh() bool { return d.skipNeigh }

// Program returns the program of a mode.
func (d *Datapath) Program(m Mode) *ebpf.Program {
	if m == ModeNeigh {
		return d.objs.DpNeigh
	}
	return d.objs.DpLegacy
}

// Attach attaches the datapath in mode m to an interface's ingress: a tcx
// link, or a cls_bpf filter on clsact where the kernel has no tcx (before
// 6.6).
func (d *Datapath) Attach(ifindex int, m Mode) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if a := d.links[ifindex]; a != nil {
		return fmt.Errorf("datapath already attached to interface %d", ifindex)
	}
	l, err := attachIngress(ifindex, d.Program(m), false, slotDatapath)
	if err != nil {
		return fmt.Errorf("attach datapath (%s) to the ingress of interface %d: %w", m, ifindex, err)
	}
	d.links[ifindex] = &attachment{link: l, mode: m}
	return nil
}

// SetMode swaps the program of an attached interface atomically
// (BPF_LINK_UPDATE with tcx, a filter replace with clsact): every packet
// sees either the old or the new program.
func (d *Datapath) SetMode(ifindex int, m Mode) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	a := d.links[ifindex]
	if a == nil {
		return fmt.Errorf("datapath not attached to interface %d", ifindex)
	}
	if a.mode == m {
		return nil
	}
	if err := a.link.Update(d.Program(m)); err != nil {
		return fmt.Errorf("swap datapath of interface %d to %s: %w", ifindex, m, err)
	}
	a.mode = m
	return nil
}

// Mode returns the mode of an interface, or "" when not attached.
func (d *Datapath) Mode(ifindex int) Mode {
	d.mu.Lock()
	defer d.mu.Unlock()
	if a := d.links[ifindex]; a != nil {
		return a.mode
	}
	return ""
}

// Method returns how the datapath is attached to an interface: tcx or
// clsact, or "" when it is not.
func (d *Datapath) Method(ifindex int) AttachMethod {
	d.mu.Lock()
	defer d.mu.Unlock()
	if a := d.links[ifindex]; a != nil {
		return a.link.Method()
	}
	return ""
}

// Attached returns the mode of each attached interface.
func (d *Datapath) Attached() map[int]Mode {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make(map[int]Mode, len(d.links))
	for i, a := range d.links {
		out[i] = a.mode
	}
	return out
}

// Detach removes the program from an interface; the kernel forwards as
// usual from the next packet on.
func (d *Datapath) Detach(ifindex int) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	a := d.links[ifindex]
	if a == nil {
		return nil
	}
	delete(d.links, ifindex)
	_ = d.objs.LastEgress.Delete(uint32(ifindex))
	return a.link.Close()
}

// FeedsInto returns the attached interfaces whose legacy datapath last
// redirected packets to egress.
func (d *Datapath) FeedsInto(egress int) ([]int, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []int
	for in := range d.links {
		var last uint32
		err := d.objs.LastEgress.Lookup(uint32(in), &last)
		if errors.Is(err, ebpf.ErrKeyNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("read datapath paths: %w", err)
		}
		if last == uint32(egress) {
			out = append(out, in)
		}
	}
	slices.Sort(out)
	return out, nil
}

// Counts returns the decision counters summed over CPUs.
func (d *Datapath) Counts() (map[Decision]uint64, error) {
	out := make(map[Decision]uint64, numDecisions)
	for _, dec := range Decisions() {
		v, err := perCPUCounter(d.objs.DpDecisions, uint32(dec))
		if err != nil {
			return nil, fmt.Errorf("read datapath counters: %w", err)
		}
		out[dec] = v
	}
	return out, nil
}

// Close detaches everything and unloads the programs. tcx links are not
// pinned, so if the agent dies the kernel detaches them when their file
// descriptors close, and forwarding falls back to the stack. A clsact
// filter stays until the next start replaces it or RemoveStaleFilters
// removes it.
func (d *Datapath) Close() error {
	d.mu.Lock()
	var errs []error
	for i, a := range d.links {
		errs = append(errs, a.link.Close())
		delete(d.links, i)
	}
	d.mu.Unlock()
	errs = append(errs, d.objs.Close())
	return errors.Join(errs...)
}

// perCPUCounter reads one slot of a per-CPU array of u64 counters, summed
// over CPUs.
func perCPUCounter(m *ebpf.Map, slot uint32) (uint64, error) {
	var per []uint64
	if err := m.Lookup(slot, &per); err != nil {
		return 0, err
	}
	return sum(per), nil
}

func sum(vs []uint64) uint64 {
	var s uint64
	for _, v := range vs {
		s += v
	}
	return s
}

// verifierDetail keeps the whole verifier log in the error.
func verifierDetail(err error) error {
	var ve *ebpf.VerifierError
	if errors.As(err, &ve) {
		return fmt.Errorf("%w\n%+v", err, ve)
	}
	return err
}
