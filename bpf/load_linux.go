package bpf

import (
	"errors"
	"fmt"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"
)

// progLoader loads the programs of one object one at a time, all against
// one set of maps, so that a program the kernel refuses costs only the
// feature it serves. Loading the object whole would fail on its first
// refused program and take the others down with it.
type progLoader struct {
	spec *ebpf.CollectionSpec
	maps map[string]*ebpf.Map // every map the spec names
	own  *ebpf.Collection     // the maps made for this object
	// refuse: programs not to load (TracerOptions.Refuse), and why
	// (TracerOptions.RefuseWhy).
	refuse    map[string]bool
	refuseWhy string
	// kernelBTF is the kernel's types as the loads of one tracer share
	// them: decoded once for all its programs, not once per program
	// (each decode of vmlinux's BTF allocates megabytes).
	kernelBTF *btf.Cache
}

// errRefused is what a program the caller refused fails with, with the
// caller's reason after it.
var errRefused = errors.New("not loaded on request")

// newProgLoader makes the object's maps, except those in shared, which
// its programs use instead. kernelBTF is shared by every load until
// loaded.
func newProgLoader(spec *ebpf.CollectionSpec, shared map[string]*ebpf.Map, refuse []string, refuseWhy string, kernelBTF *btf.Cache) (*progLoader, error) {
	ms := &ebpf.CollectionSpec{Maps: spec.Maps, Variables: spec.Variables, Types: spec.Types, ByteOrder: spec.ByteOrder}
	repl := map[string]*ebpf.Map{}
	for name := range spec.Maps {
		if m := shared[name]; m != nil {
			repl[name] = m
		}
	}
	own, err := ebpf.NewCollectionWithOptions(ms, ebpf.CollectionOptions{MapReplacements: repl, Cache: kernelBTF})
	if err != nil {
		return nil, err
	}
	l := &progLoader{spec: spec, maps: map[string]*ebpf.Map{}, own: own, refuse: map[string]bool{}, refuseWhy: refuseWhy, kernelBTF: kernelBTF}
	for _, n := range refuse {
		l.refuse[n] = true
	}
	for name := range spec.Maps {
		if m := repl[name]; m != nil {
			l.maps[name] = m
		} else {
			l.maps[name] = own.Maps[name]
		}
	}
	return l, nil
}

// loaded drops what only loading needs: the parsed object (its
// instructions and data sections, 0.7 MB of heap for the tracer's), the
// map by name and the kernel's types. The maps stay, in own, until Close.
func (l *progLoader) loaded() { l.spec, l.maps, l.kernelBTF = nil, nil, nil }

// load loads one program.
func (l *progLoader) load(name string) (*ebpf.Program, error) {
	if l.spec == nil {
		return nil, fmt.Errorf("load %s: the object's loading is over", name)
	}
	ps := l.spec.Programs[name]
	if ps == nil {
		return nil, fmt.Errorf("no program %s in the object", name)
	}
	if l.refuse[name] {
		if l.refuseWhy != "" {
			return nil, fmt.Errorf("%w: %s", errRefused, l.refuseWhy)
		}
		return nil, errRefused
	}
	// The object with only this program, sharing the rest: the library
	// copies what it changes as it loads (the program, each map's spec),
	// as it does loading a whole object, so a copy of every program and
	// of the types for each of them was garbage.
	s := &ebpf.CollectionSpec{Maps: l.spec.Maps, Programs: map[string]*ebpf.ProgramSpec{name: ps},
		Variables: l.spec.Variables, Types: l.spec.Types, ByteOrder: l.spec.ByteOrder}
	coll, err := ebpf.NewCollectionWithOptions(s, ebpf.CollectionOptions{MapReplacements: l.maps, Cache: l.kernelBTF})
	if err != nil {
		return nil, err
	}
	defer coll.Close()
	return coll.DetachProgram(name), nil
}

// Close closes the maps the loader made that nobody took (Assign takes
// them out of own).
func (l *progLoader) Close() { l.own.Close() }

// refusal classifies a load or attach error.
func refusal(err error, attaching bool) Refusal {
	var ve *ebpf.VerifierError
	switch {
	case errors.Is(err, errRefused):
		return RefusedDisabled
	case errors.Is(err, unix.EPERM):
		// Not the verifier's EACCES: lockdown, an LSM or capabilities.
		return RefusedPermission
	case errors.As(err, &ve):
		return RefusedVerifier
	case errors.Is(err, btf.ErrNotFound):
		return RefusedNoTarget
	case errors.Is(err, ebpf.ErrNotSupported):
		return RefusedUnsupported
	case errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ESRCH):
		return RefusedNoTarget
	case attaching:
		return RefusedAttach
	}
	return RefusedOther
}

// hookOf returns "section" (tp_btf/neigh_create) of a program.
func hookOf(spec *ebpf.CollectionSpec, name string) string {
	if ps := spec.Programs[name]; ps != nil {
		return ps.SectionName
	}
	return name
}

// attachTracing attaches tp_btf, fentry and fexit programs.
func attachTracing(p *ebpf.Program, _ string) (link.Link, error) {
	return link.AttachTracing(link.TracingOptions{Program: p})
}

// attachRawTP attaches a raw tracepoint program to the tracepoint its
// section names.
func attachRawTP(spec *ebpf.CollectionSpec) func(*ebpf.Program, string) (link.Link, error) {
	return func(p *ebpf.Program, name string) (link.Link, error) {
		tp := strings.TrimPrefix(hookOf(spec, name), "raw_tp/")
		return link.AttachRawTracepoint(link.RawTracepointOptions{Name: tp, Program: p})
	}
}

// attachBySection picks the attach function from a program's section.
func attachBySection(spec *ebpf.CollectionSpec) func(*ebpf.Program, string) (link.Link, error) {
	raw := attachRawTP(spec)
	return func(p *ebpf.Program, name string) (link.Link, error) {
		if strings.HasPrefix(hookOf(spec, name), "raw_tp/") {
			return raw(p, name)
		}
		return attachTracing(p, name)
	}
}

// loadHook tries a hook's programs in order and returns the first that
// the kernel takes (and its link, when attach attaches it at load; nil
// loads only, to attach later), with a status for every program tried.
func loadHook(l *progLoader, h hookDecl, attach func(p *ebpf.Program, name string) (link.Link, error)) (name string, p *ebpf.Program, lk link.Link, st []ProgramStatus) {
	for _, n := range h.progs {
		s := ProgramStatus{Program: n, Hook: hookOf(l.spec, n), Feature: h.feature, Needs: h.needs}
		prog, err := l.load(n)
		if err != nil {
			s.Refusal, s.Error = refusal(err, false), oneLine(err)
			st = append(st, s)
			continue
		}
		if attach != nil {
			lk, err = attach(prog, n)
			if err != nil {
				prog.Close()
				s.Refusal, s.Error = refusal(err, true), oneLine(err)
				st = append(st, s)
				continue
			}
		}
		s.Loaded = true
		return n, prog, lk, append(st, s)
	}
	return "", nil, nil, st
}

// oneLine is an error's first line: verifier logs go to the debug log,
// not to metrics and tables.
func oneLine(err error) string {
	// cilium/ebpf suggests MEMLOCK on any EPERM; the agent removes the
	// limit, so that is never the cause here.
	s := strings.Replace(err.Error(), " (MEMLOCK may be too low, consider rlimit.RemoveMemlock)", "", 1)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return s
}
