package bpf

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
	"sort"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"
)

// loadNeighbourHooks loads and attaches the neighbour tracepoints: tp_btf
// where the verifier takes it, else the raw tracepoint.
func (t *tracerCore) loadNeighbourHooks(l *progLoader, spec *ebpf.CollectionSpec) {
	attach := attachBySection(spec)
	var missing []string
	via := map[string]bool{}
	for _, h := range hooksOf(kindNeighbour) {
		name, p, lk, st := loadHook(l, h, attach)
		t.programs = append(t.programs, st...)
		if p == nil {
			if h.feature == FeatureStates {
				missing = append(missing, strings.TrimPrefix(hookOf(spec, h.progs[0]), "tp_btf/")+": "+h.lost+" are not seen")
			} else {
				t.features[h.feature] = FeatureStatus{Feature: h.feature, Why: refusedWhy(st)}
			}
			continue
		}
		t.progs = append(t.progs, p)
		t.links = append(t.links, lk)
		kind, _, _ := strings.Cut(hookOf(spec, name), "/")
		if h.feature == FeatureStates {
			via[kind] = true
		} else {
			t.features[h.feature] = FeatureStatus{Feature: h.feature, Working: true, Via: kind}
		}
		if h.role == roleMirror {
			t.objs.TrUpdateDone = p
		}
	}
	st := FeatureStatus{Feature: FeatureStates, Working: len(missing) == 0, Via: joinKeys(via)}
	if len(missing) > 0 {
		st.Why = "no hook on " + strings.Join(missing, "; no hook on ")
	}
	t.features[FeatureStates] = st
}

// loadBypass loads what counts bypass packets: the fentry programs on the
// redirect helpers (fentry or auto mode) where the kernel takes them,
// else the transmit hook. Either needs the state mirror.
func (t *tracerCore) loadBypass(l *progLoader, opts TracerOptions) {
	if t.objs.TrUpdateDone == nil {
		why := "needs the neighbour state mirror, whose neigh_update_done hook the kernel refused"
		t.features[FeatureBypass] = FeatureStatus{Feature: FeatureBypass, Why: why}
		t.features[FeatureXDPBypass] = FeatureStatus{Feature: FeatureXDPBypass, Why: why}
		return
	}
	if opts.Mode == TracerFentry || opts.Mode == TracerAuto {
		if err := t.loadFentry(opts, l.kernelBTF); err != nil {
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
	_, p, _, st := loadHook(l, hooksOf(kindXmit)[0], proveAttach(attachTracing))
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
func (t *tracerCore) loadSource(l *progLoader) {
	_, p, _, st := loadHook(l, hooksOf(kindSource)[0], nil)
	t.programs = append(t.programs, st...)
	if p == nil {
		t.features[FeatureSourceMAC] = FeatureStatus{Feature: FeatureSourceMAC, Why: refusedWhy(st)}
		return
	}
	t.objs.TrSource = p
	t.progs = append(t.progs, p)
	t.features[FeatureSourceMAC] = FeatureStatus{Feature: FeatureSourceMAC, Working: true, Via: "tc"}
}

// fentryLoader prepares the fentry object against the tracer's maps.
func (t *tracerCore) fentryLoader(opts TracerOptions, kernelBTF *btf.Cache) (*progLoader, error) {
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
	if v := spec.Variables["cands_in_mirror"]; v != nil && t.candInMirror {
		if err := v.Set(uint32(1)); err != nil {
			return nil, err
		}
	}
	// Share every map the two objects have in common: one mirror, one set
	// of counters, and no second copy of the ring buffer.
	shared := map[string]*ebpf.Map{
		"neigh_mirror": t.objs.NeighMirror, "hits": t.objs.Hits, "tr_stats": t.objs.TrStats,
		"via_macs": t.objs.ViaMacs, "tp_events": t.objs.TpEvents, "watched_big": t.objs.WatchedBig,
		"source_candidates": t.objs.SourceCandidates,
	}
	// The tracer's maps were sized at load (MapSizeFor); a replacement
	// must match its spec, so the spec takes the sizes they got.
	for name, m := range shared {
		if ms := spec.Maps[name]; ms != nil && m != nil {
			ms.MaxEntries = m.MaxEntries()
		}
	}
	l, err := newProgLoader(spec, shared, opts.Refuse, opts.RefuseWhy, kernelBTF)
	if err != nil {
		return nil, fmt.Errorf("load fentry maps: %w", err)
	}
	return l, nil
}

// fentryLoad loads fentry hooks by kind, proving at load that the kernel
// attaches each; where it cannot attach one again after a detach, the
// programs stay attached (keep) and their links are kept.
type fentryLoad struct {
	l    *progLoader
	keep bool
	kept []link.Link
}

func (f *fentryLoad) attach(p *ebpf.Program, name string) (link.Link, error) {
	lk, err := attachTracing(p, name)
	if err != nil || f.keep {
		return lk, err
	}
	return nil, lk.Close()
}

// load loads the hooks of a kind: those the kernel took, and a status
// for every program tried.
func (f *fentryLoad) load(kind hookKind) ([]*ebpf.Program, []ProgramStatus) {
	var ps []*ebpf.Program
	var sts []ProgramStatus
	for _, h := range hooksOf(kind) {
		_, p, lk, st := loadHook(f.l, h, f.attach)
		sts = append(sts, st...)
		if p != nil {
			ps = append(ps, p)
			if lk != nil {
				f.kept = append(f.kept, lk)
			}
		}
	}
	return ps, sts
}

// loadTC loads the fentry hooks on the TC helpers, every one of which
// fentry mode needs: nil and why, when the kernel refused any.
func (f *fentryLoad) loadTC() ([]*ebpf.Program, []ProgramStatus, error) {
	want := len(hooksOf(kindFentryTC))
	tc, st := f.load(kindFentryTC)
	if len(tc) == want {
		// Before 5.11 a tracing program attaches once in its life: after
		// the proving attach it cannot attach again. Then load afresh and
		// keep the programs attached.
		if lk, err := attachTracing(tc[0], ""); err != nil {
			for _, p := range tc {
				p.Close()
			}
			f.keep = true
			tc, st = f.load(kindFentryTC)
		} else {
			lk.Close()
		}
	}
	if len(tc) == want {
		return tc, st, nil
	}
	closeAll(f.kept)
	for _, p := range tc {
		p.Close()
	}
	for _, s := range st {
		if !s.Loaded {
			if s.Refusal == RefusedPermission {
				return nil, st, fmt.Errorf("the kernel refused to load fentry/fexit programs (%s): %w", s.Hook, unix.EPERM)
			}
			return nil, st, errors.New(fentryRefusal(s, runtime.GOARCH))
		}
	}
	return nil, st, errors.New("fentry programs refused")
}

// fentryRefusal says why the kernel refused a fentry program the TC
// helpers need, for the fallback the log and neighwatch tracer show. On
// arm64, fentry attaches to kernel functions from 6.4 (the BPF
// trampoline came in 6.0, but it reaches a kernel function through
// ftrace's direct calls, which arm64 got in 6.4): an older kernel answers
// that attaching is not supported, and an operator needs to read why,
// not only the call that failed. Debian 12's 6.1 is one.
func fentryRefusal(s ProgramStatus, arch string) string {
	why := fmt.Sprintf("fentry program %s refused (%s): %s", s.Hook, s.Refusal, s.Error)
	if s.Refusal == RefusedUnsupported && arch == "arm64" {
		why += " (arm64 kernels attach fentry to kernel functions from 6.4)"
	}
	return why
}

// loadFentryXDP loads the fentry hooks on the XDP helpers and sets the XDP
// feature: all of them, or none is kept.
func (t *tracerCore) loadFentryXDP(f *fentryLoad) []*ebpf.Program {
	xdp, st := f.load(kindFentryXDP)
	t.programs = append(t.programs, st...)
	// bpf_redirect_map: the devmap operations where the kernel has them,
	// else the helper.
	xmap, st := f.load(kindFentryDevmap)
	if len(xmap) == 0 {
		var st2 []ProgramStatus
		xmap, st2 = f.load(kindFentryDevmapOld)
		st = append(st, st2...)
	}
	t.programs = append(t.programs, st...)
	xs := FeatureStatus{Feature: FeatureXDPBypass, Working: len(xdp) == len(hooksOf(kindFentryXDP)), Via: "fentry"}
	switch {
	case !xs.Working:
		xs.Via, xs.Why = "", "fentry on the XDP helpers refused: "+refusedWhy(notLoaded(t.programs, FeatureXDPBypass))
	case len(xmap) == 0:
		xs.Why = "bpf_redirect_map to a devmap is not counted: " + refusedWhy(notLoaded(st, FeatureXDPBypass))
	}
	t.features[FeatureXDPBypass] = xs
	if !xs.Working {
		for _, p := range append(xdp, xmap...) {
			p.Close()
		}
		return nil
	}
	return append(xdp, xmap...)
}

func (t *tracerCore) loadFentry(opts TracerOptions, kernelBTF *btf.Cache) error {
	l, err := t.fentryLoader(opts, kernelBTF)
	if err != nil {
		return err
	}
	f := &fentryLoad{l: l}
	tc, st, err := f.loadTC()
	t.programs = append(t.programs, st...)
	if err != nil {
		l.Close()
		return err
	}
	extra, st := f.load(kindFentryTCMore)
	t.programs = append(t.programs, st...)
	xdp := t.loadFentryXDP(f)
	t.fentryProgs = slices.Concat(tc, extra, xdp)
	t.progs = append(t.progs, t.fentryProgs...)
	t.feRedirects = l.maps["fe_redirects"]
	t.feEpoch, t.feSourceBloom = l.own.Variables["epoch"], l.own.Variables["source_bloom"]
	if t.feSourceBloom != nil {
		if err := t.feSourceBloom.Set(t.cands.sourceBloom()); err != nil {
			return fmt.Errorf("set the fentry object's source filter: %w", err)
		}
	}
	t.loaders = append(t.loaders, l)
	if f.keep {
		// The XDP programs that did not count are closed; their links
		// with them.
		t.fentryKept = f.kept
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
func (t *tracerCore) attachFentry() error {
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

// refusedWhy summarises why a hook's programs were refused.
func refusedWhy(st []ProgramStatus) string {
	var parts []string
	for _, s := range st {
		p := fmt.Sprintf("%s refused (%s): %s", s.Hook, s.Refusal, s.Error)
		if s.Needs != "" && s.Refusal != RefusedDisabled {
			p += " (it needs " + s.Needs + ")"
		}
		parts = append(parts, p)
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

// Mode returns how bypass packets are counted: xmit, fentry, or off when
// the kernel took neither.
func (t Loader) Mode() TracerMode { return t.mode }

// Fallback says why fentry was not used when it was asked for, or nil.
func (t Loader) Fallback() error { return t.fallback }

// Programs returns every program the tracer tried, and whether the kernel
// took it.
func (t Loader) Programs() []ProgramStatus { return slices.Clone(t.programs) }

// Features returns whether each feature works. The source-MAC feature's
// Via says how it attaches (tcx, clsact) once it has.
func (t Loader) Features() []FeatureStatus {
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

// ProgramRuns returns how many times each of the tracer's programs ran,
// from the kernel's own statistics. The kernel counts only while
// statistics are on, by the kernel.bpf_stats_enabled sysctl or by a
// process holding BPF_ENABLE_STATS (which the sysctl does not show), so
// ok is true when the sysctl reads 1 or any program has a count.
func (t Loader) ProgramRuns() (runs map[string]uint64, ok bool) {
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
func (t *tracerCore) programNames() ([]string, bool) {
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
