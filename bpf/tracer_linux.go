package bpf

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/ringbuf"
)

// Tracer is the loaded and attached tracer: one core (its objects,
// maps and state) behind five jobs, each a type in its own file:
//
//   - Loader (tracer_load_linux.go): loading and attaching program by
//     program, and what loaded: mode, programs, features, run counts;
//   - Hooks (tracer_hooks_linux.go): the per-packet hooks' duty cycle and
//     the interfaces they watch;
//   - CandidateFilter (tracer_candidates_linux.go): the source-MAC
//     program's candidates and its filter;
//   - Seeder (tracer_seed_linux.go): the in-kernel mirror of STALE
//     entries, seeded and counted;
//   - Readout (tracer_read_linux.go): bypass hits, sightings, redirects
//     and the ring buffer of transitions.
//
// Close releases it all.
//
// A Tracer has every job's methods; a reader declares the few it calls
// as its own interface (metrics.TracerSource, feed.Hooks, ...), which a
// *Tracer satisfies as it is.
type Tracer struct {
	Loader
	Hooks
	CandidateFilter
	Seeder
	Readout
	core *tracerCore
}

// The jobs: views of one core.
type (
	Loader          struct{ *tracerCore }
	Hooks           struct{ *tracerCore }
	CandidateFilter struct{ *tracerCore }
	Seeder          struct{ *tracerCore }
	Readout         struct{ *tracerCore }
)

// newTracer returns a Tracer of core c.
func newTracer(c *tracerCore) *Tracer {
	return &Tracer{Loader{c}, Hooks{c}, CandidateFilter{c}, Seeder{c}, Readout{c}, c}
}

// tracerCore is the state the jobs share, and, each in a struct of its
// own, the state one job keeps.
type tracerCore struct {
	objs    tracerObjects // maps and variables; the programs that loaded
	loaders []*progLoader // own the data sections and fentry's maps
	links   []link.Link   // the neighbour hooks
	rd      *ringbuf.Reader
	// The fentry object's own globals that user space writes while it
	// runs, kept equal to the tracer object's (the candidate filter
	// writes them).
	feEpoch, feSourceBloom *ebpf.Variable
	// fentryKept: on kernels that attach a tracing program only once in
	// its life (before 5.11), the fentry programs stay attached from load
	// to close, and these are their links.
	fentryKept []link.Link
	// candInMirror: the candidates are in neigh_mirror's values
	// (tr_candidates writes them), not in source_candidates.
	candInMirror bool

	// mu guards the hooks' state and the candidate filter's, which share
	// it: a candidate update attaches or detaches the source-MAC program
	// where an interface gains its first candidate or loses its last.
	// The seed's batch has its own lock (seeding.mu), the program names
	// theirs (namesMu).
	mu sync.Mutex

	loadState                 // the Loader's (tracer_load_linux.go)
	hookState                 // the Hooks' (tracer_hooks_linux.go)
	cands     candidateCounts // the CandidateFilter's (tracer_candidates_linux.go)
	seed      seeding         // the Seeder's: tr_seed, where the kernel took it
	readState                 // the Readout's (tracer_read_linux.go)
}

// loadState is what loading found: the mode, each program's status and
// each feature's.
type loadState struct {
	mode     TracerMode // how bypass packets are counted: xmit, fentry, or off
	fallback error      // why fentry was not used, when it was wanted
	programs []ProgramStatus
	features map[Feature]FeatureStatus
	progs    []*ebpf.Program // every program that loaded, for run counts

	namesMu   sync.Mutex
	progNames []string // the kernel's names of progs, read once

	// fentry mode: the programs attached per window.
	fentryProgs []*ebpf.Program
}

// hookState is the per-packet hooks', attached only while
// SetPerPacket(true), and the interfaces they watch. Under mu.
type hookState struct {
	watched      map[int]bool
	inNetNS      func(func() error) error
	perPacket    bool          // any per-packet hook attached
	sourceOn     bool          // the source-MAC program attached where candidates are
	since        time.Time     // when they were last attached
	attached     time.Duration // attached before since
	xmitLink     link.Link
	fentryLinks  []link.Link
	sourceIfaces map[int]bool    // interfaces with candidates (the candidate filter keeps it)
	sourceLinks  map[int]ingress // tr_source on their ingress
	sourceFailed map[int]string  // interfaces where tr_source did not attach, and why
}

// readState is the Readout's: the fentry programs' redirect counters,
// one buffer for per-CPU reads, and what was already returned.
type readState struct {
	feRedirects               *ebpf.Map
	hitBuf                    []tracerHitv // HitsOf's per-CPU values
	hitEntries, mirrorEntries atomic.Int64
	sightings                 map[tracerNkey]uint32 // packets already returned by SightingsOf (the count wraps)
}

// newTracerCore is a core with nothing loaded yet: its maps made, the
// mode off; inNetNS nil runs in the caller's namespace.
func newTracerCore(inNetNS func(func() error) error) *tracerCore {
	c := &tracerCore{
		loadState: loadState{features: map[Feature]FeatureStatus{}, mode: TracerOff},
		hookState: hookState{watched: make(map[int]bool), inNetNS: inNetNS, sourceIfaces: map[int]bool{},
			sourceLinks: map[int]ingress{}, sourceFailed: map[int]string{}},
		cands:     candidateCounts{ifaces: map[int]int{}},
		readState: readState{sightings: map[tracerNkey]uint32{}},
	}
	if c.inNetNS == nil {
		c.inNetNS = func(fn func() error) error { return fn() }
	}
	return c
}

// TracerOptions configure LoadTracer.
type TracerOptions struct {
	Mode TracerMode
	// NetNSIno is the inode number of the namespace whose neighbours the
	// tracer mirrors (see NetNSInode); 0 means the caller's.
	NetNSIno uint32
	// xmitFilter is xmit_filter+1 (benchmarks only); 0 means the
	// default, all filters.
	xmitFilter uint32
	// vmlinux is the kernel BTF file (tests point it elsewhere).
	vmlinux string
	// fentrySpec overrides the fentry object (tests make loading fail).
	fentrySpec func() (*ebpf.CollectionSpec, error)
	// Refuse names programs not to load, as if the kernel had refused
	// them: drills of the degraded alert, and tests. RefuseWhy says why,
	// after "not loaded on request: " in their status (the caller names
	// its option).
	Refuse    []string
	RefuseWhy string
	// MirrorSize, HitsSize and CandidatesSize set the capacity of the
	// in-kernel mirror, the bypass hit counters and the source-MAC
	// candidates where they have a map of their own (0: 262,144, 65,536,
	// 65,536); the caller sizes them for what the node holds
	// (MapSizeFor).
	MirrorSize, HitsSize, CandidatesSize int
	// InNetNS runs fn inside the network namespace whose interfaces the
	// tracer attaches to (the NetNSIno one); nil runs it where it is.
	InNetNS func(fn func() error) error
}

// LoadTracer loads the tracer program by program and attaches its
// neighbour hooks. A program the kernel refuses disables only the
// feature it serves (Features, Programs say which and why); only a
// tracer with no map or ring buffer at all is an error. In fentry or auto
// mode bypass packets are counted by fentry programs on the redirect
// helpers where the kernel takes them, else at transmit (xmit mode,
// Fallback says why).
func LoadTracer(opts TracerOptions) (*Tracer, error) {
	if opts.Mode == TracerOff || opts.Mode == "" {
		return nil, errors.New("tracer mode is off")
	}
	if opts.vmlinux == "" {
		opts.vmlinux = "/sys/kernel/btf/vmlinux"
	}
	if _, err := os.Stat(opts.vmlinux); err != nil {
		return nil, ErrNoBTF
	}
	// One decode of the kernel's types serves every program of both
	// objects; the loaders drop it once loading is over.
	kernelBTF := btf.NewCache()
	if _, err := kernelBTF.Kernel(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNoBTF, err)
	}
	c := newTracerCore(opts.InNetNS)
	t := newTracer(c)
	if opts.NetNSIno == 0 {
		ino, err := NetNSInode("/proc/self/ns/net")
		if err != nil {
			return nil, err
		}
		opts.NetNSIno = ino
	}
	spec, err := tracerSpec(opts)
	if err != nil {
		return nil, err
	}
	// Where tr_candidates loads, the candidates live in the mirror's
	// values, and their own map is left with one slot.
	if c.candInMirror = candidatesInMirror(spec, opts.Refuse, kernelBTF); c.candInMirror {
		spec.Maps["source_candidates"].MaxEntries = 1
		if err := spec.Variables["cands_in_mirror"].Set(uint32(1)); err != nil {
			return nil, err
		}
	}
	l, err := newProgLoader(spec, nil, opts.Refuse, opts.RefuseWhy, kernelBTF)
	if err != nil {
		return nil, fmt.Errorf("load tracer maps: %w", verifierDetail(err))
	}
	var mv struct {
		tracerMaps
		tracerVariables
	}
	if err := l.own.Assign(&mv); err != nil {
		l.Close()
		return nil, fmt.Errorf("load tracer maps: %w", err)
	}
	c.objs.tracerMaps, c.objs.tracerVariables = mv.tracerMaps, mv.tracerVariables
	c.loaders = append(c.loaders, l)

	c.loadNeighbourHooks(l, spec)
	c.loadBypass(l, opts)
	c.loadSource(l)
	t.Seeder.loadSeed(l)
	for _, l := range c.loaders {
		l.loaded()
	}

	// The per-packet hooks start detached: the caller attaches them
	// while some entry needs watching (SetPerPacket).
	if err := t.SetPerPacket(false); err != nil {
		t.Close()
		return nil, err
	}
	rd, err := ringbuf.NewReader(c.objs.TpEvents)
	if err != nil {
		t.Close()
		return nil, fmt.Errorf("open tracer ring buffer: %w", err)
	}
	c.rd = rd
	return t, nil
}

// tracerSpec is the tracer's object as opts set it: the namespace it
// mirrors, the transmit filter, the maps' sizes.
func tracerSpec(opts TracerOptions) (*ebpf.CollectionSpec, error) {
	spec, err := loadTracer()
	if err != nil {
		return nil, err
	}
	if err := spec.Variables["netns_ino"].Set(opts.NetNSIno); err != nil {
		return nil, err
	}
	if opts.xmitFilter != 0 {
		if err := spec.Variables["xmit_filter"].Set(opts.xmitFilter - 1); err != nil {
			return nil, err
		}
	}
	for name, n := range map[string]int{"neigh_mirror": opts.MirrorSize, "hits": opts.HitsSize, "source_candidates": opts.CandidatesSize} {
		if n > 0 {
			spec.Maps[name].MaxEntries = uint32(n)
		}
	}
	return spec, nil
}

// Close detaches and unloads everything.
func (t *Tracer) Close() error {
	c := t.core
	var errs []error
	if c.rd != nil {
		errs = append(errs, c.rd.Close())
	}
	for _, l := range c.links {
		errs = append(errs, l.Close())
	}
	c.links = nil
	c.mu.Lock()
	if c.xmitLink != nil {
		errs = append(errs, c.xmitLink.Close())
		c.xmitLink = nil
	}
	errs = append(errs, closeAll(c.fentryLinks), closeAll(c.fentryKept))
	c.fentryLinks, c.fentryKept = nil, nil
	for idx, l := range c.sourceLinks {
		errs = append(errs, c.inNetNS(l.Close))
		delete(c.sourceLinks, idx)
	}
	c.mu.Unlock()
	errs = append(errs, t.Seeder.closeSeed())
	for _, p := range c.progs {
		errs = append(errs, p.Close())
	}
	errs = append(errs, c.objs.tracerMaps.Close())
	for _, l := range c.loaders {
		l.Close()
	}
	return errors.Join(errs...)
}

func closeAll(ls []link.Link) error {
	var errs []error
	for _, l := range ls {
		errs = append(errs, l.Close())
	}
	return errors.Join(errs...)
}
