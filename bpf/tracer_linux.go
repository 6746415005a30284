package bpf

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/ringbuf"
	"golang.org/x/sys/unix"
)

// Tracer is the loaded and attached tracer.
type Tracer struct {
	objs    tracerObjects // maps and variables; the programs that loaded
	loaders []*progLoader // own the data sections and fentry's maps
	links   []link.Link   // the neighbour hooks
	rd      *ringbuf.Reader

	mode     TracerMode // how bypass packets are counted: xmit, fentry, or off
	fallback error      // why fentry was not used, when it was wanted
	programs []ProgramStatus
	features map[Feature]FeatureStatus
	progs    []*ebpf.Program // every program that loaded, for run counts

	namesMu   sync.Mutex
	progNames []string // the kernel's names of progs, read once

	// fentry mode: the programs attached per window, and their counters.
	fentryProgs []*ebpf.Program
	feRedirects *ebpf.Map
	// The fentry object's own globals that user space writes while it
	// runs, kept equal to the tracer object's.
	feEpoch, feSourceBloom *ebpf.Variable
	hitBuf                 []tracerHitv // HitsOf's per-CPU values

	// fentryKept: on kernels that attach a tracing program only once in
	// its life (before 5.11), the fentry programs stay attached from load
	// to close, and these are their links.
	fentryKept []link.Link

	mu      sync.Mutex
	watched map[int]bool

	hitEntries, mirrorEntries atomic.Int64

	// Per-packet hooks, attached only while SetPerPacket(true).
	inNetNS      func(func() error) error
	perPacket    bool          // any per-packet hook attached
	sourceOn     bool          // the source-MAC program attached where candidates are
	since        time.Time     // when they were last attached
	attached     time.Duration // attached before since
	xmitLink     link.Link
	fentryLinks  []link.Link
	sourceIfaces map[int]bool    // interfaces with candidates
	sourceLinks  map[int]ingress // tr_source on their ingress
	sourceFailed map[int]string  // interfaces where tr_source did not attach, and why
	// The source-MAC candidates are the map's own; these count them per
	// filter slot and per interface, so a change costs O(1).
	candSlots  [16384]int32
	candIfaces map[int]int
	sightings  map[tracerNkey]uint64 // packets already returned by Sightings
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
	// them: drills of the degraded alert, and tests.
	Refuse []string
	// MirrorSize, StaleMACsSize, HitsSize and CandidatesSize set the
	// capacity of the in-kernel mirror, the STALE-MAC map, the bypass hit
	// counters and the source-MAC candidates (0: 262,144, 65,536, 65,536,
	// 65,536). MapSize sets all four, for what the node can hold
	// (MapSizeFor).
	MirrorSize, StaleMACsSize, HitsSize, CandidatesSize int
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
	if _, err := btf.LoadKernelSpec(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNoBTF, err)
	}
	t := &Tracer{watched: make(map[int]bool), inNetNS: opts.InNetNS, sourceIfaces: map[int]bool{},
		sourceLinks: map[int]ingress{}, sourceFailed: map[int]string{}, candIfaces: map[int]int{},
		sightings: map[tracerNkey]uint64{}, features: map[Feature]FeatureStatus{}, mode: TracerOff}
	if t.inNetNS == nil {
		t.inNetNS = func(fn func() error) error { return fn() }
	}
	if opts.NetNSIno == 0 {
		ino, err := NetNSInode("/proc/self/ns/net")
		if err != nil {
			return nil, err
		}
		opts.NetNSIno = ino
	}
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
	for name, n := range map[string]int{"neigh_mirror": opts.MirrorSize, "stale_macs": opts.StaleMACsSize, "hits": opts.HitsSize, "source_candidates": opts.CandidatesSize} {
		if n > 0 {
			spec.Maps[name].MaxEntries = uint32(n)
		}
	}
	l, err := newProgLoader(spec, nil, opts.Refuse)
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
	t.objs.tracerMaps, t.objs.tracerVariables = mv.tracerMaps, mv.tracerVariables
	t.loaders = append(t.loaders, l)

	t.loadNeighbourHooks(l, spec)
	t.loadBypass(l, opts)
	t.loadSource(l)

	// The per-packet hooks start detached: the caller attaches them
	// while some entry needs watching (SetPerPacket).
	if err := t.SetPerPacket(false); err != nil {
		t.Close()
		return nil, err
	}
	rd, err := ringbuf.NewReader(t.objs.TpEvents)
	if err != nil {
		t.Close()
		return nil, fmt.Errorf("open tracer ring buffer: %w", err)
	}
	t.rd = rd
	return t, nil
}

// loadNeighbourHooks loads and attaches the neighbour tracepoints: tp_btf
// where the verifier takes it, else the raw tracepoint.
func (t *Tracer) loadNeighbourHooks(l *progLoader, spec *ebpf.CollectionSpec) {
	attach := attachBySection(spec)
	var missing []string
	via := map[string]bool{}
	for _, h := range []hook{
		{feature: FeatureStates, progs: []string{"tr_update_done", "tr_update_done_raw"}, attach: attach},
		{feature: FeatureStates, progs: []string{"tr_event_send_done", "tr_event_send_done_raw"}, attach: attach},
		{feature: FeatureStates, progs: []string{"tr_timer_handler", "tr_timer_handler_raw"}, attach: attach},
		{feature: FeatureStates, progs: []string{"tr_cleanup", "tr_cleanup_raw"}, attach: attach},
		{feature: FeatureCreated, progs: []string{"tr_create", "tr_create_raw"}, attach: attach},
	} {
		name, p, lk, st := loadHook(l, h)
		t.programs = append(t.programs, st...)
		if p == nil {
			if h.feature == FeatureStates {
				missing = append(missing, strings.TrimPrefix(hookOf(spec, h.progs[0]), "tp_btf/"))
			} else {
				t.features[FeatureCreated] = FeatureStatus{Feature: FeatureCreated, Why: refusedWhy(st)}
			}
			continue
		}
		t.progs = append(t.progs, p)
		t.links = append(t.links, lk)
		kind, _, _ := strings.Cut(hookOf(spec, name), "/")
		if h.feature == FeatureCreated {
			t.features[FeatureCreated] = FeatureStatus{Feature: FeatureCreated, Working: true, Via: kind}
		} else {
			via[kind] = true
		}
		if name == "tr_update_done" || name == "tr_update_done_raw" {
			t.objs.TrUpdateDone = p
		}
	}
	st := FeatureStatus{Feature: FeatureStates, Working: len(missing) == 0, Via: joinKeys(via)}
	if len(missing) > 0 {
		st.Why = "no hook on " + strings.Join(missing, ", ") + ": transitions there are not seen"
	}
	t.features[FeatureStates] = st
}

// Bounds of MapSizeFor. MaxMapEntries is also the default cap
// (--tracer.max-map-entries).
const (
	minMapSize    = 1 << 14
	MaxMapEntries = 1 << 22
	maxMapSize    = MaxMapEntries
)

// MapSizeFor is the capacity the tracer's maps need for a node whose
// neighbour tables may hold entries entries (the gc_thresh3 of both
// families, or more where exempt entries such as PERMANENT ones exceed
// it): a power of two from 16,384 to 4,194,304. The maps allocate their
// elements on demand; the kernel sets aside 16 bytes per slot for their
// buckets.
func MapSizeFor(entries int) int {
	n := minMapSize
	for n < entries && n < maxMapSize {
		n <<= 1
	}
	return n
}

// refusedWhy summarises why a hook's programs were refused.
func refusedWhy(st []ProgramStatus) string {
	var parts []string
	for _, s := range st {
		parts = append(parts, fmt.Sprintf("%s refused (%s): %s", s.Hook, s.Refusal, s.Error))
	}
	return strings.Join(parts, "; ")
}

func joinKeys(m map[string]bool) string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return strings.Join(ks, "+")
}

// loadBypass loads what counts bypass packets: the fentry programs on the
// redirect helpers (fentry or auto mode) where the kernel takes them,
// else the transmit hook. Either needs the state mirror.
func (t *Tracer) loadBypass(l *progLoader, opts TracerOptions) {
	if t.objs.TrUpdateDone == nil {
		why := "needs the neighbour state mirror, whose neigh_update_done hook the kernel refused"
		t.features[FeatureBypass] = FeatureStatus{Feature: FeatureBypass, Why: why}
		t.features[FeatureXDPBypass] = FeatureStatus{Feature: FeatureXDPBypass, Why: why}
		return
	}
	if opts.Mode == TracerFentry || opts.Mode == TracerAuto {
		if err := t.loadFentry(opts); err != nil {
			t.fallback = err
		} else {
			t.mode = TracerFentry
			via := "fentry"
			if t.fentryKept != nil {
				via = "fentry (always attached: this kernel attaches a program once)"
			}
			t.features[FeatureBypass] = FeatureStatus{Feature: FeatureBypass, Working: true, Via: via}
			return
		}
	}
	if _, ok := t.features[FeatureXDPBypass]; !ok {
		why := "counted, with the source MACs of the frames XDP programs redirect, only by fentry on the XDP helpers"
		if t.fallback != nil {
			why += ", which this kernel refused: " + oneLine(t.fallback)
		} else {
			why += " (--tracer=fentry or auto)"
		}
		t.features[FeatureXDPBypass] = FeatureStatus{Feature: FeatureXDPBypass, Why: why}
	}
	_, p, _, st := loadHook(l, hook{feature: FeatureBypass, progs: []string{"tr_xmit"}, attach: proveAttach(attachTracing)})
	t.programs = append(t.programs, st...)
	if p == nil {
		t.features[FeatureBypass] = FeatureStatus{Feature: FeatureBypass, Why: refusedWhy(st)}
		return
	}
	t.objs.TrXmit = p
	t.progs = append(t.progs, p)
	t.mode = TracerXmit
	t.features[FeatureBypass] = FeatureStatus{Feature: FeatureBypass, Working: true, Via: "xmit"}
}

// proveAttach attaches and detaches at once: the per-packet hooks are
// attached only in windows, but whether the kernel takes them is known
// at load.
func proveAttach(attach func(*ebpf.Program, string) (link.Link, error)) func(*ebpf.Program, string) (link.Link, error) {
	return func(p *ebpf.Program, name string) (link.Link, error) {
		lk, err := attach(p, name)
		if err != nil {
			return nil, err
		}
		return nil, lk.Close()
	}
}

// loadSource loads the source-MAC program; it is attached per interface
// (tcx, else clsact) while there are candidates.
func (t *Tracer) loadSource(l *progLoader) {
	_, p, _, st := loadHook(l, hook{feature: FeatureSourceMAC, progs: []string{"tr_source"}})
	t.programs = append(t.programs, st...)
	if p == nil {
		t.features[FeatureSourceMAC] = FeatureStatus{Feature: FeatureSourceMAC, Why: refusedWhy(st)}
		return
	}
	t.objs.TrSource = p
	t.progs = append(t.progs, p)
	t.features[FeatureSourceMAC] = FeatureStatus{Feature: FeatureSourceMAC, Working: true, Via: "tc"}
}

// Mode returns how bypass packets are counted: xmit, fentry, or off when
// the kernel took neither.
func (t *Tracer) Mode() TracerMode { return t.mode }

// Fallback says why fentry was not used when it was asked for, or nil.
func (t *Tracer) Fallback() error { return t.fallback }

// Programs returns every program the tracer tried, and whether the kernel
// took it.
func (t *Tracer) Programs() []ProgramStatus { return slices.Clone(t.programs) }

// Features returns whether each feature works. The source-MAC feature's
// Via says how it attaches (tcx, clsact) once it has.
func (t *Tracer) Features() []FeatureStatus {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]FeatureStatus, 0, len(t.features))
	for _, f := range Features() {
		if st, ok := t.features[f]; ok {
			out = append(out, st)
		}
	}
	return out
}

// SourceFailures returns the interfaces where the source-MAC program
// could not be attached, and why.
func (t *Tracer) SourceFailures() map[int]string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return maps.Clone(t.sourceFailed)
}

// fentry hooks: the TC set is required for fentry mode; the others add
// counts (redirect_neigh, redirect_peer) or XDP.
var (
	fentryTC      = []string{"fe_skb_fib", "fe_redirect"}
	fentryTCExtra = []string{"fe_redirect_neigh", "fe_redirect_peer"}
	fentryXDP     = []string{"fe_xdp_fib", "fe_xdp_redirect"}
)

// fentryLoader prepares the fentry object against the tracer's maps.
func (t *Tracer) fentryLoader(opts TracerOptions) (*progLoader, error) {
	specFn := opts.fentrySpec
	if specFn == nil {
		specFn = loadFentry
	}
	spec, err := specFn()
	if err != nil {
		return nil, err
	}
	// The object's globals are its own: the namespace it mirrors is set
	// here, and what user space writes while it runs (the epoch, the
	// source filter) is written to both objects (feEpoch, feSourceBloom).
	if v := spec.Variables["netns_ino"]; v != nil {
		if err := v.Set(opts.NetNSIno); err != nil {
			return nil, err
		}
	}
	// Share every map the two objects have in common: one mirror, one set
	// of counters, and no second copy of the ring buffer.
	shared := map[string]*ebpf.Map{
		"neigh_mirror": t.objs.NeighMirror, "hits": t.objs.Hits, "tr_stats": t.objs.TrStats,
		"stale_macs": t.objs.StaleMacs, "tp_events": t.objs.TpEvents, "watched_big": t.objs.WatchedBig,
		"source_candidates": t.objs.SourceCandidates,
	}
	// The tracer's maps were sized at load (MapSizeFor); a replacement
	// must match its spec, so the spec takes the sizes they got.
	for name, m := range shared {
		if ms := spec.Maps[name]; ms != nil && m != nil {
			ms.MaxEntries = m.MaxEntries()
		}
	}
	l, err := newProgLoader(spec, shared, opts.Refuse)
	if err != nil {
		return nil, fmt.Errorf("load fentry maps: %w", err)
	}
	return l, nil
}

func (t *Tracer) loadFentry(opts TracerOptions) error {
	l, err := t.fentryLoader(opts)
	if err != nil {
		return err
	}
	// attach proves at load that the kernel takes each program; where it
	// cannot attach one again after a detach, the programs stay attached
	// (keep) and their links are kept.
	keep := false
	attach := func(p *ebpf.Program, name string) (link.Link, error) {
		lk, err := attachTracing(p, name)
		if err != nil || keep {
			return lk, err
		}
		return nil, lk.Close()
	}
	var kept []link.Link
	load := func(names []string, feature Feature) ([]*ebpf.Program, []ProgramStatus) {
		var ps []*ebpf.Program
		var sts []ProgramStatus
		for _, n := range names {
			_, p, lk, st := loadHook(l, hook{feature: feature, progs: []string{n}, attach: attach})
			sts = append(sts, st...)
			if p != nil {
				ps = append(ps, p)
				if lk != nil {
					kept = append(kept, lk)
				}
			}
		}
		return ps, sts
	}
	tc, st := load(fentryTC, FeatureBypass)
	if len(tc) == len(fentryTC) {
		// Before 5.11 a tracing program attaches once in its life: after
		// the proving attach it cannot attach again. Then load afresh and
		// keep the programs attached.
		if lk, err := attachTracing(tc[0], ""); err != nil {
			for _, p := range tc {
				p.Close()
			}
			keep = true
			tc, st = load(fentryTC, FeatureBypass)
		} else {
			lk.Close()
		}
	}
	if len(tc) < len(fentryTC) {
		closeAll(kept)
		for _, p := range tc {
			p.Close()
		}
		l.Close()
		t.programs = append(t.programs, st...)
		for _, s := range st {
			if !s.Loaded {
				if s.Refusal == RefusedPermission {
					return fmt.Errorf("the kernel refused to load fentry/fexit programs (%s): %w", s.Hook, unix.EPERM)
				}
				return fmt.Errorf("fentry program %s refused (%s): %s", s.Hook, s.Refusal, s.Error)
			}
		}
		return errors.New("fentry programs refused")
	}
	t.programs = append(t.programs, st...)
	extra, st := load(fentryTCExtra, FeatureBypass)
	t.programs = append(t.programs, st...)
	xdp, st := load(fentryXDP, FeatureXDPBypass)
	t.programs = append(t.programs, st...)
	// bpf_redirect_map: the devmap operations from 5.13, else the helper.
	xmap, st := load([]string{"fe_dev_map_redirect", "fe_dev_hash_map_redirect"}, FeatureXDPBypass)
	if len(xmap) == 0 {
		var st2 []ProgramStatus
		xmap, st2 = load([]string{"fe_xdp_redirect_map"}, FeatureXDPBypass)
		st = append(st, st2...)
	}
	t.programs = append(t.programs, st...)
	xs := FeatureStatus{Feature: FeatureXDPBypass, Working: len(xdp) == len(fentryXDP), Via: "fentry"}
	switch {
	case !xs.Working:
		xs.Via, xs.Why = "", "fentry on the XDP helpers refused: "+refusedWhy(notLoaded(t.programs, FeatureXDPBypass))
	case len(xmap) == 0:
		xs.Why = "bpf_redirect_map to a devmap is not counted: " + refusedWhy(notLoaded(st, FeatureXDPBypass))
	}
	t.features[FeatureXDPBypass] = xs
	if xs.Working {
		xdp = append(xdp, xmap...)
	} else {
		for _, p := range append(xdp, xmap...) {
			p.Close()
		}
		xdp = nil
	}
	t.fentryProgs = slices.Concat(tc, extra, xdp)
	t.progs = append(t.progs, t.fentryProgs...)
	t.feRedirects = l.maps["fe_redirects"]
	t.feEpoch, t.feSourceBloom = l.own.Variables["epoch"], l.own.Variables["source_bloom"]
	if t.feSourceBloom != nil {
		if err := t.feSourceBloom.Set(t.sourceBloom()); err != nil {
			return fmt.Errorf("set the fentry object's source filter: %w", err)
		}
	}
	t.loaders = append(t.loaders, l)
	if keep {
		// The XDP programs that did not count are closed; their links
		// with them.
		t.fentryKept = kept
	}
	return nil
}

func notLoaded(st []ProgramStatus, f Feature) []ProgramStatus {
	var out []ProgramStatus
	for _, s := range st {
		if !s.Loaded && s.Feature == f {
			out = append(out, s)
		}
	}
	return out
}

// attachFentry attaches the fentry/fexit programs (per packet: they run
// for every FIB lookup and redirect).
func (t *Tracer) attachFentry() error {
	for _, p := range t.fentryProgs {
		l, err := attachTracing(p, "")
		if err != nil {
			closeAll(t.fentryLinks)
			t.fentryLinks = nil
			return fmt.Errorf("attach %s: %w", p, err)
		}
		t.fentryLinks = append(t.fentryLinks, l)
	}
	return nil
}

func closeAll(ls []link.Link) error {
	var errs []error
	for _, l := range ls {
		errs = append(errs, l.Close())
	}
	return errors.Join(errs...)
}

// SetPerPacket attaches (on) or detaches the hooks that run for every
// packet: the transmit hook (xmit mode) or the fentry programs (fentry
// mode), and the source-MAC program on the interfaces with candidates.
// Detached, no program of the tracer runs per packet; the neighbour
// tracepoints, which run per neighbour event, stay. The agent attaches
// them only while some entry needs watching, and then in windows.
func (t *Tracer) SetPerPacket(on bool) error {
	return t.SetHooks(on, on)
}

// SetHooks attaches the bypass hooks (transmit or fentry) and the
// source-MAC program separately: entries neighwatch manages need only
// the second, stale-long ones both.
func (t *Tracer) SetHooks(bypass, source bool) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.setHooksLocked(bypass, source)
}

func (t *Tracer) setHooksLocked(on, source bool) error {
	if any := on || source; any != t.perPacket {
		if any {
			t.since = time.Now()
		} else {
			t.attached += time.Since(t.since)
		}
		t.perPacket = any
	}
	t.sourceOn = source
	var errs []error
	switch {
	case t.mode == TracerFentry && t.fentryKept != nil:
		// Attached for good: nothing to switch.
	case t.mode == TracerFentry && on && t.fentryLinks == nil:
		errs = append(errs, t.attachFentry())
	case t.mode == TracerFentry && !on:
		errs = append(errs, closeAll(t.fentryLinks))
		t.fentryLinks = nil
	case t.mode == TracerXmit && on && t.xmitLink == nil:
		l, err := attachTracing(t.objs.TrXmit, "")
		if err != nil {
			errs = append(errs, fmt.Errorf("attach transmit hook: %w", err))
		} else {
			t.xmitLink = l
		}
	case t.mode == TracerXmit && !on && t.xmitLink != nil:
		errs = append(errs, t.xmitLink.Close())
		t.xmitLink = nil
	}
	errs = append(errs, t.syncSourceLinksLocked())
	return errors.Join(errs...)
}

// syncSourceLinksLocked attaches tr_source where it should run (hooks on,
// interface with candidates) and detaches it elsewhere. An interface that
// is gone is forgotten; one where it does not attach is remembered, with
// why, for the blind-spot metric.
func (t *Tracer) syncSourceLinksLocked() error {
	var errs []error
	for idx, l := range t.sourceLinks {
		if !t.sourceOn || !t.sourceIfaces[idx] {
			errs = append(errs, t.inNetNS(l.Close))
			delete(t.sourceLinks, idx)
		}
	}
	for idx := range t.sourceFailed {
		if !t.sourceIfaces[idx] {
			delete(t.sourceFailed, idx)
		}
	}
	if !t.sourceOn || t.objs.TrSource == nil {
		return errors.Join(errs...)
	}
	for idx := range t.sourceIfaces {
		if t.sourceLinks[idx] != nil {
			continue
		}
		var l ingress
		err := t.inNetNS(func() error {
			var err error
			// At the head of the chain: a datapath program later in it
			// may redirect the packet away.
			l, err = attachIngress(idx, t.objs.TrSource, true, slotSource)
			return err
		})
		if errors.Is(err, unix.ENODEV) {
			delete(t.sourceIfaces, idx)
			delete(t.sourceFailed, idx)
			continue
		}
		if err != nil {
			t.sourceFailed[idx] = oneLine(err)
			errs = append(errs, fmt.Errorf("attach source-MAC program to interface %d: %w", idx, err))
			continue
		}
		delete(t.sourceFailed, idx)
		t.sourceLinks[idx] = l
		if st := t.features[FeatureSourceMAC]; st.Via != string(l.Method()) {
			st.Via = string(l.Method())
			t.features[FeatureSourceMAC] = st
		}
	}
	return errors.Join(errs...)
}

// PerPacket reports whether the per-packet hooks are attached, and for how
// long in all they have been since load.
func (t *Tracer) PerPacket() (bool, time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	d := t.attached
	if t.perPacket {
		d += time.Since(t.since)
	}
	return t.perPacket, d
}

// Candidate is an entry whose own packets the tracer watches for: packets
// from Addr on Ifindex whose Ethernet source is not MAC.
type Candidate struct {
	Ifindex int
	Addr    netip.Addr
	MAC     net.HardwareAddr
}

// SetCandidates replaces the source-MAC candidates: every candidate in
// the map that cs does not name is removed, and cs is added as
// UpdateCandidates adds. It walks the map; the feed calls it at start and
// after the table lost track of its changes, and UpdateCandidates between.
func (t *Tracer) SetCandidates(cs []Candidate) error {
	want := make(map[tracerNkey]struct{}, len(cs))
	for _, c := range cs {
		want[nkeyOf(c.Ifindex, c.Addr)] = struct{}{}
	}
	var gone []Candidate
	var k tracerNkey
	var v tracerCand
	t.mu.Lock()
	it := t.objs.SourceCandidates.Iterate()
	for it.Next(&k, &v) {
		if _, ok := want[k]; !ok {
			hk := k.hitKey()
			gone = append(gone, Candidate{Ifindex: hk.Ifindex, Addr: hk.Addr})
		}
	}
	err := it.Err()
	t.mu.Unlock()
	if err != nil {
		return fmt.Errorf("walk source-MAC candidates: %w", err)
	}
	_, err = t.UpdateCandidates(append(gone, cs...))
	return err
}

// UpdateCandidates adds, changes or removes source-MAC candidates: one
// with a MAC is watched for packets from its address at another MAC, one
// without is no longer watched. A candidate that stays with the same MAC
// keeps what was seen of it. It costs a map lookup and at most one update
// per change, and reports how many candidates did not fit in the map.
func (t *Tracer) UpdateCandidates(cs []Candidate) (notWatched int, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	var errs []error
	slots, ifaces := false, false
	var old tracerCand
	for _, c := range cs {
		k := nkeyOf(c.Ifindex, c.Addr)
		had := t.objs.SourceCandidates.Lookup(k, &old) == nil
		switch {
		case len(c.MAC) != 6:
			if !had {
				continue
			}
			if err := t.objs.SourceCandidates.Delete(k); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
				errs = append(errs, err)
				continue
			}
			delete(t.sightings, k)
			slots = t.candSlot(k, -1) || slots
			ifaces = t.candIface(c.Ifindex, -1) || ifaces
		case had && old.Mac == [6]byte(c.MAC):
		default:
			if err := t.objs.SourceCandidates.Put(k, tracerCand{Mac: [6]byte(c.MAC)}); err != nil {
				notWatched++
				continue
			}
			delete(t.sightings, k) // counts from zero again
			if !had {
				slots = t.candSlot(k, 1) || slots
				ifaces = t.candIface(c.Ifindex, 1) || ifaces
			}
		}
	}
	if notWatched > 0 {
		errs = append(errs, fmt.Errorf("source-MAC candidates map full (%d entries): %d candidates not watched", t.objs.SourceCandidates.MaxEntries(), notWatched))
	}
	if slots {
		bloom := t.sourceBloom()
		if err := t.objs.SourceBloom.Set(bloom); err != nil {
			errs = append(errs, fmt.Errorf("set source filter: %w", err))
		}
		if t.feSourceBloom != nil {
			if err := t.feSourceBloom.Set(bloom); err != nil {
				errs = append(errs, fmt.Errorf("set the fentry object's source filter: %w", err))
			}
		}
	}
	if ifaces {
		errs = append(errs, t.syncSourceLinksLocked())
	}
	return notWatched, errors.Join(errs...)
}

// sourceBloom is the source filter the candidates make: a slot is set
// while some candidate hashes to it.
func (t *Tracer) sourceBloom() (bloom [16384]uint8) {
	for i, n := range t.candSlots {
		if n > 0 {
			bloom[i] = 1
		}
	}
	return bloom
}

// candSlot counts a candidate in or out of its filter slot and reports
// whether the slot turned on or off.
func (t *Tracer) candSlot(k tracerNkey, d int32) bool {
	i := sourceSlot(k)
	was := t.candSlots[i] > 0
	t.candSlots[i] += d
	return was != (t.candSlots[i] > 0)
}

// candIface counts a candidate in or out of its interface and reports
// whether the interface gained its first or lost its last.
func (t *Tracer) candIface(ifindex int, d int) bool {
	n := t.candIfaces[ifindex] + d
	if n > 0 {
		t.candIfaces[ifindex] = n
		t.sourceIfaces[ifindex] = true
		return n == d
	}
	delete(t.candIfaces, ifindex)
	delete(t.sourceIfaces, ifindex)
	return true
}

// Candidates returns how many source-MAC candidates the map holds.
func (t *Tracer) Candidates() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, c := range t.candIfaces {
		n += c
	}
	return n
}

// sourceSlot is source_slot() of tracer.h.
func sourceSlot(k tracerNkey) uint32 {
	w := func(i int) uint64 { return uint64(binary.NativeEndian.Uint32(k.Addr[i*4:])) }
	x := uint64(k.Ifindex)<<32 ^ uint64(k.Family)
	x ^= w(0)
	if k.Family == unix.AF_INET6 {
		x ^= w(1)<<32 ^ w(2) ^ w(3)<<16
	}
	x *= 0x9E3779B97F4A7C15
	return uint32(x>>50) & (16384 - 1)
}

// Sighting is what the source-MAC program saw of a candidate: packets from
// its address at another MAC, and the last such MAC.
type Sighting struct {
	MAC     net.HardwareAddr
	Packets uint64 // since the last call of Sightings
}

// Sightings returns the candidates whose address was seen at another MAC
// since the last call, walking every candidate (tests; the feed asks for
// those the program announced, SightingsOf).
func (t *Tracer) Sightings() (map[HitKey]Sighting, error) {
	var keys []HitKey
	var k tracerNkey
	var v tracerCand
	t.mu.Lock()
	it := t.objs.SourceCandidates.Iterate()
	for it.Next(&k, &v) {
		keys = append(keys, k.hitKey())
	}
	t.mu.Unlock()
	if err := it.Err(); err != nil {
		return nil, err
	}
	out := make(map[HitKey]Sighting)
	return out, t.SightingsOf(keys, out)
}

// SightingsOf returns, of some candidates, those whose address was seen
// at another MAC since the last call, with the packets since then.
func (t *Tracer) SightingsOf(keys []HitKey, out map[HitKey]Sighting) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	clear(out)
	var v tracerCand
	for _, hk := range keys {
		k := nkeyOf(hk.Ifindex, hk.Addr)
		if err := t.objs.SourceCandidates.Lookup(k, &v); err != nil {
			if errors.Is(err, ebpf.ErrKeyNotExist) {
				continue
			}
			return fmt.Errorf("read source-MAC candidates: %w", err)
		}
		if d := v.Packets - t.sightings[k]; v.Packets > t.sightings[k] {
			t.sightings[k] = v.Packets
			out[hk] = Sighting{MAC: bytes.Clone(v.Seen[:]), Packets: d}
		}
	}
	return nil
}

// ProgramRuns returns how many times each of the tracer's programs ran,
// from the kernel's own statistics. The kernel counts only while
// statistics are on, by the kernel.bpf_stats_enabled sysctl or by a
// process holding BPF_ENABLE_STATS (which the sysctl does not show), so
// ok is true when the sysctl reads 1 or any program has a count.
func (t *Tracer) ProgramRuns() (runs map[string]uint64, ok bool) {
	names, ok := t.programNames()
	if !ok {
		return nil, false
	}
	runs = make(map[string]uint64, len(names))
	counted := false
	for i, p := range t.progs {
		st, err := p.Stats()
		if err != nil {
			return nil, false
		}
		runs[names[i]] = st.RunCount
		if st.RunCount > 0 {
			counted = true
		}
	}
	if counted {
		return runs, true
	}
	if enabled, err := os.ReadFile("/proc/sys/kernel/bpf_stats_enabled"); err != nil || strings.TrimSpace(string(enabled)) != "1" {
		return runs, false
	}
	return runs, true
}

// programNames returns the kernel's names of t.progs. They are read once:
// Info also parses /proc/self/fdinfo, which cost every scrape about
// 0.4 ms and 120 kB for the tracer's programs.
func (t *Tracer) programNames() ([]string, bool) {
	t.namesMu.Lock()
	defer t.namesMu.Unlock()
	if t.progNames == nil {
		names := make([]string, len(t.progs))
		for i, p := range t.progs {
			info, err := p.Info()
			if err != nil {
				return nil, false
			}
			names[i] = info.Name
		}
		t.progNames = names
	}
	return t.progNames, true
}

// NetNSInode returns the inode number of a network namespace file
// (/proc/PID/ns/net or /run/netns/NAME), which identifies it in the kernel.
func NetNSInode(path string) (uint32, error) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return 0, fmt.Errorf("identify network namespace %s: %w", path, err)
	}
	return uint32(st.Ino), nil
}

// SetWatched limits the tracer to interfaces; all=true watches every one.
func (t *Tracer) SetWatched(ifindexes []int, all bool) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	var bits [1024]uint64
	want := make(map[int]bool, len(ifindexes))
	for _, i := range ifindexes {
		want[i] = true
		if i >= 0 && i < len(bits)*64 {
			bits[i/64] |= 1 << (i % 64)
		} else if !t.watched[i] {
			if err := t.objs.WatchedBig.Put(uint32(i), uint8(1)); err != nil {
				return fmt.Errorf("watch interface %d: %w", i, err)
			}
		}
	}
	for i := range t.watched {
		if !want[i] && (i < 0 || i >= len(bits)*64) {
			_ = t.objs.WatchedBig.Delete(uint32(i))
		}
	}
	t.watched = want
	if err := t.objs.WatchedBits.Set(bits); err != nil {
		return fmt.Errorf("set watched interfaces: %w", err)
	}
	var a uint32
	if all {
		a = 1
	}
	return t.objs.WatchAll.Set(a)
}

func nkeyOf(ifindex int, a netip.Addr) tracerNkey {
	k := tracerNkey{Ifindex: uint32(ifindex)}
	if a.Is4() {
		k.Family = unix.AF_INET
		b := a.As4()
		copy(k.Addr[:], b[:])
	} else {
		k.Family = unix.AF_INET6
		k.Addr = a.As16()
	}
	return k
}

func (k tracerNkey) hitKey() HitKey {
	if k.Family == unix.AF_INET {
		return HitKey{Ifindex: int(k.Ifindex), Addr: netip.AddrFrom4([4]byte(k.Addr[:4]))}
	}
	return HitKey{Ifindex: int(k.Ifindex), Addr: netip.AddrFrom16(k.Addr)}
}

// Seed fills the in-kernel mirror with entries the tracepoints have not
// reported yet. The tracepoints are attached first, so an entry they have
// already recorded is newer and is left alone. A STALE entry is counted
// in the STALE-MAC map first and in the filters only if it fits, as the
// tracepoints do. What does not fit is returned, not lost: the caller
// counts it and tries again. The per-interface counters and the MAC
// filter are read once, updated in memory and written back once; a
// tracepoint that changes them in between loses that change.
func (t *Tracer) Seed(entries []SeedEntry) (n int, unmirrored []HitKey, err error) {
	var buckets [4096]uint32
	var bloom [16384]uint32
	if err := t.objs.StaleOnIf.Get(&buckets); err != nil {
		return 0, nil, err
	}
	if err := t.objs.MacBloom.Get(&bloom); err != nil {
		return 0, nil, err
	}
	stale := 0
	for _, e := range entries {
		k := nkeyOf(e.Ifindex, e.Addr)
		var probe tracerNval
		if t.objs.NeighMirror.Lookup(k, &probe) == nil {
			continue // a tracepoint got there first
		}
		v := tracerNval{State: e.State}
		copy(v.Mac[:], e.MAC)
		var mk tracerMkey
		if e.State == unix.NUD_STALE && len(e.MAC) >= 6 {
			mk = tracerMkey{Ifindex: uint32(e.Ifindex), Family: k.Family}
			copy(mk.Mac[:], e.MAC)
			if t.countStale(mk, k) {
				v.StaleOk = 1
			}
		}
		if err := t.objs.NeighMirror.Update(k, v, ebpf.UpdateNoExist); err != nil {
			if v.StaleOk == 1 {
				t.uncountStale(mk)
			}
			if errors.Is(err, ebpf.ErrKeyExist) {
				continue
			}
			unmirrored = append(unmirrored, k.hitKey())
			continue
		}
		n++
		if e.State == unix.NUD_STALE && v.StaleOk == 0 {
			unmirrored = append(unmirrored, k.hitKey())
		}
		if v.StaleOk == 1 {
			buckets[e.Ifindex%len(buckets)]++
			bloom[bloomSlot(uint32(e.Ifindex), e.MAC, k.Family)]++
			stale++
		}
	}
	if stale == 0 {
		return n, unmirrored, nil
	}
	if err := t.objs.StaleOnIf.Set(buckets); err != nil {
		return n, unmirrored, err
	}
	return n, unmirrored, t.objs.MacBloom.Set(bloom)
}

// countStale adds one entry to a STALE MAC's count, as count_stale does;
// false when the map is full.
func (t *Tracer) countStale(mk tracerMkey, k tracerNkey) bool {
	var mv tracerMval
	if err := t.objs.StaleMacs.Lookup(mk, &mv); err == nil {
		mv.Count++
		mv.Entry = k
		return t.objs.StaleMacs.Put(mk, mv) == nil
	}
	return t.objs.StaleMacs.Update(mk, tracerMval{Count: 1, Entry: k}, ebpf.UpdateNoExist) == nil
}

func (t *Tracer) uncountStale(mk tracerMkey) {
	var mv tracerMval
	if t.objs.StaleMacs.Lookup(mk, &mv) != nil {
		return
	}
	if mv.Count <= 1 {
		_ = t.objs.StaleMacs.Delete(mk)
		return
	}
	mv.Count--
	_ = t.objs.StaleMacs.Put(mk, mv)
}

// StaleCounted returns how many STALE entries the in-kernel maps count
// (mirrored, in the STALE-MAC map and the filters): with the entries
// reported unmirrored, every STALE entry the tracer watches.
func (t *Tracer) StaleCounted() (uint64, error) {
	var buckets [4096]uint32
	if err := t.objs.StaleOnIf.Get(&buckets); err != nil {
		return 0, err
	}
	var n uint64
	for _, b := range buckets {
		n += uint64(b)
	}
	return n, nil
}

// Mirrored reports whether an entry is in the in-kernel mirror and, when
// STALE, counted in the STALE-MAC map.
func (t *Tracer) Mirrored(k HitKey) bool {
	var v tracerNval
	if t.objs.NeighMirror.Lookup(nkeyOf(k.Ifindex, k.Addr), &v) != nil {
		return false
	}
	return v.State != unix.NUD_STALE || v.StaleOk == 1
}

// BumpEpoch starts a new epoch: the programs announce each entry's hits
// and each candidate's sightings again, once, from now on.
func (t *Tracer) BumpEpoch() error {
	var e uint32
	if err := t.objs.Epoch.Get(&e); err != nil {
		return err
	}
	if t.feEpoch != nil {
		if err := t.feEpoch.Set(e + 1); err != nil {
			return err
		}
	}
	return t.objs.Epoch.Set(e + 1)
}

// bloomSlot is bloom_slot() of tracer.h.
func bloomSlot(ifindex uint32, mac net.HardwareAddr, family uint8) uint32 {
	var x uint64
	for _, b := range mac[:6] {
		x = x<<8 | uint64(b)
	}
	x ^= uint64(ifindex)<<48 ^ uint64(family)<<56
	x *= 0x9E3779B97F4A7C15
	return uint32(x>>50) & (16384 - 1)
}

// Hits returns the bypass packets counted per entry in its current STALE
// period, summed over CPUs, walking the whole map (tests; the feed asks
// for the entries the programs announced, HitsOf).
func (t *Tracer) Hits() (map[HitKey]uint64, error) {
	out := make(map[HitKey]uint64)
	var k tracerNkey
	var per []tracerHitv
	it := t.objs.Hits.Iterate()
	n := 0
	for it.Next(&k, &per) {
		out[k.hitKey()] += sumHits(per)
		n++
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("read tracer hits: %w", err)
	}
	t.hitEntries.Store(int64(n))
	return out, nil
}

// HitsOf returns the bypass packets of some entries in their current
// STALE period, summed over CPUs; an entry without counters is absent.
func (t *Tracer) HitsOf(keys []HitKey, out map[HitKey]uint64) error {
	clear(out)
	per := t.hitBuf[:0]
	for _, hk := range keys {
		if err := t.objs.Hits.Lookup(nkeyOf(hk.Ifindex, hk.Addr), &per); err != nil {
			if errors.Is(err, ebpf.ErrKeyNotExist) {
				continue
			}
			return fmt.Errorf("read tracer hits: %w", err)
		}
		out[hk] = sumHits(per)
	}
	t.hitBuf = per
	return nil
}

func sumHits(per []tracerHitv) uint64 {
	var n uint64
	for _, v := range per {
		n += v.Packets
	}
	return n
}

// Stats reads the counters and how full the maps are.
func (t *Tracer) Stats() (TracerStats, error) {
	var s TracerStats
	for stat, dst := range map[tracerTrStat]*uint64{
		tracerTrStatST_HITS_DROPPED:       &s.HitsDropped,
		tracerTrStatST_MIRROR_DROPPED:     &s.MirrorDropped,
		tracerTrStatST_EVENTS_DROPPED:     &s.EventsDropped,
		tracerTrStatST_XMIT_LOOKUPS:       &s.XmitLookups,
		tracerTrStatST_XMIT_LOOKUPS6:      &s.XmitLookups6,
		tracerTrStatST_STALE_MACS_DROPPED: &s.StaleMACsDropped,
	} {
		v, err := perCPUCounter(t.objs.TrStats, uint32(stat))
		if err != nil {
			return s, fmt.Errorf("read tracer counters: %w", err)
		}
		*dst = v
	}
	s.XmitLookups += s.XmitLookups6
	s.HitCapacity = int(t.objs.Hits.MaxEntries())
	s.StaleMACsCapacity = int(t.objs.StaleMacs.MaxEntries())
	s.MirrorCapacity = int(t.objs.NeighMirror.MaxEntries())
	s.HitEntries = int(t.hitEntries.Load())
	s.MirrorEntries = int(t.mirrorEntries.Load())
	return s, nil
}

// RefreshMirrorSize counts the mirror's entries. It walks the map with a
// syscall per key, so callers should call it rarely and off the scrape path.
func (t *Tracer) RefreshMirrorSize() {
	t.mirrorEntries.Store(int64(countKeys(t.objs.NeighMirror)))
}

func countKeys(m *ebpf.Map) int {
	var k tracerNkey
	n := 0
	it := m.Iterate()
	var v []byte
	for it.Next(&k, &v) {
		n++
	}
	return n
}

// Redirects returns, in fentry mode, the redirect helper calls counted
// per helper and next-hop state. It returns nil in xmit mode.
func (t *Tracer) Redirects() (RedirectCounts, error) {
	if t.feRedirects == nil {
		return nil, nil
	}
	out := make(RedirectCounts, numHelpers)
	slot := func(h Helper, nh fentryFeNexthop) uint32 {
		return uint32(h)*uint32(fentryFeNexthopNH_MAX) + uint32(nh)
	}
	for _, h := range Helpers() {
		stale, err := perCPUCounter(t.feRedirects, slot(h, fentryFeNexthopNH_STALE))
		if err != nil {
			return nil, fmt.Errorf("read fentry redirect counters: %w", err)
		}
		other, err := perCPUCounter(t.feRedirects, slot(h, fentryFeNexthopNH_OTHER))
		if err != nil {
			return nil, fmt.Errorf("read fentry redirect counters: %w", err)
		}
		out[h] = struct{ Stale, Other uint64 }{stale, other}
	}
	return out, nil
}

// sources name the tracepoints of enum tp_source.
var sources = map[tracerTpSource]string{
	tracerTpSourceSRC_UPDATE:     "neigh_update_done",
	tracerTpSourceSRC_EVENT_SEND: "neigh_event_send_done",
	tracerTpSourceSRC_TIMER:      "neigh_timer_handler",
	tracerTpSourceSRC_CREATE:     "neigh_create",
	tracerTpSourceSRC_CLEANUP:    "neigh_cleanup_and_release",
	tracerTpSourceSRC_HIT:        SourceHit,
	tracerTpSourceSRC_SIGHTING:   SourceSighting,
	tracerTpSourceSRC_UNMIRRORED: SourceUnmirrored,
	tracerTpSourceSRC_OWN:        SourceOwn,
}

// ReadTransitions calls fn for each silent transition the tracepoints
// report, until ctx ends or the tracer is closed. Records that do not
// decode go to bad.
func (t *Tracer) ReadTransitions(ctx context.Context, fn func(SilentTransition), bad func(error)) error {
	// Flush wakes a blocked read without the reader's lock, which a
	// blocked read holds (SetDeadline would wait for it).
	stop := context.AfterFunc(ctx, func() { _ = t.rd.Flush() })
	defer stop()
	var rec ringbuf.Record
	for {
		if err := t.rd.ReadInto(&rec); err != nil {
			if ctx.Err() != nil || errors.Is(err, ringbuf.ErrClosed) || errors.Is(err, os.ErrClosed) {
				return nil
			}
			if errors.Is(err, ringbuf.ErrFlushed) {
				continue
			}
			return fmt.Errorf("read tracer events: %w", err)
		}
		st, err := decodeTransition(rec.RawSample)
		if err != nil {
			bad(err)
			continue
		}
		fn(st)
	}
}

// decodeTransition decodes one ring buffer record, a struct tp_event.
func decodeTransition(b []byte) (SilentTransition, error) {
	var ev tracerTpEvent
	if err := binary.Read(bytes.NewReader(b), binary.NativeEndian, &ev); err != nil {
		return SilentTransition{}, fmt.Errorf("tracer event of %d bytes: %w", len(b), err)
	}
	if ev.Key.Family != unix.AF_INET && ev.Key.Family != unix.AF_INET6 {
		return SilentTransition{}, fmt.Errorf("tracer event for address family %d", ev.Key.Family)
	}
	return SilentTransition{
		Key:    ev.Key.hitKey(),
		From:   ev.From,
		To:     ev.To,
		MAC:    net.HardwareAddr(bytes.Clone(ev.Mac[:])),
		Source: sources[tracerTpSource(ev.Source)],
	}, nil
}

// Close detaches and unloads everything.
func (t *Tracer) Close() error {
	var errs []error
	if t.rd != nil {
		errs = append(errs, t.rd.Close())
	}
	for _, l := range t.links {
		errs = append(errs, l.Close())
	}
	t.links = nil
	t.mu.Lock()
	if t.xmitLink != nil {
		errs = append(errs, t.xmitLink.Close())
		t.xmitLink = nil
	}
	errs = append(errs, closeAll(t.fentryLinks), closeAll(t.fentryKept))
	t.fentryLinks, t.fentryKept = nil, nil
	for idx, l := range t.sourceLinks {
		errs = append(errs, t.inNetNS(l.Close))
		delete(t.sourceLinks, idx)
	}
	t.mu.Unlock()
	for _, p := range t.progs {
		errs = append(errs, p.Close())
	}
	errs = append(errs, t.objs.tracerMaps.Close())
	for _, l := range t.loaders {
		l.Close()
	}
	return errors.Join(errs...)
}
