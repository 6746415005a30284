package bpf

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
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
	objs   tracerObjects
	fentry *fentryObjects
	links  []link.Link
	rd     *ringbuf.Reader

	mode     TracerMode // xmit or fentry
	fallback error      // why fentry was not used, when it was wanted

	mu      sync.Mutex
	watched map[int]bool

	hitEntries, mirrorEntries atomic.Int64

	// Per-packet hooks, attached only while SetPerPacket(true).
	inNetNS      func(func() error) error
	perPacket    bool
	since        time.Time     // when they were last attached
	attached     time.Duration // attached before since
	xmitLink     link.Link
	fentryLinks  []link.Link
	sourceIfaces map[int]bool      // interfaces with candidates
	sourceLinks  map[int]link.Link // tcx ingress of tr_source
	candidates   map[tracerNkey][6]byte
	sightings    map[tracerNkey]uint64 // packets already returned by Sightings
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
	// MirrorSize, HitsSize and CandidatesSize override the capacity of the
	// in-kernel mirror, the bypass hit counters and the source-MAC
	// candidates (0: 262,144, 65,536, 65,536).
	MirrorSize, HitsSize, CandidatesSize int
	// InNetNS runs fn inside the network namespace whose interfaces the
	// tracer attaches to (the NetNSIno one); nil runs it where it is.
	InNetNS func(fn func() error) error
}

// LoadTracer loads the tracer and attaches it. In fentry or auto mode it
// tries the fentry programs first and falls back to xmit mode when the
// kernel refuses them, recording why (Fallback).
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
		sourceLinks: map[int]link.Link{}, candidates: map[tracerNkey][6]byte{}, sightings: map[tracerNkey]uint64{}}
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
	for name, n := range map[string]int{"neigh_mirror": opts.MirrorSize, "hits": opts.HitsSize, "source_candidates": opts.CandidatesSize} {
		if n > 0 {
			spec.Maps[name].MaxEntries = uint32(n)
		}
	}
	if err := spec.LoadAndAssign(&t.objs, nil); err != nil {
		return nil, fmt.Errorf("load tracer: %w", verifierDetail(err))
	}
	mirror := []*ebpf.Program{t.objs.TrUpdateDone, t.objs.TrEventSendDone, t.objs.TrTimerHandler, t.objs.TrCreate, t.objs.TrCleanup}
	for _, p := range mirror {
		if err := t.attach(p, 0); err != nil {
			t.Close()
			return nil, err
		}
	}
	t.mode = TracerXmit
	if opts.Mode == TracerFentry || opts.Mode == TracerAuto {
		if err := t.loadFentry(opts.fentrySpec); err != nil {
			t.fallback = err
		} else {
			t.mode = TracerFentry
		}
	}
	// The per-packet hooks start detached: the caller attaches them
	// while some entry needs watching (SetPerPacket). The fentry ones
	// were attached once to prove that the kernel takes them.
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

// Mode returns the mode that runs: xmit or fentry.
func (t *Tracer) Mode() TracerMode { return t.mode }

// Fallback says why fentry was not used when it was asked for, or nil.
func (t *Tracer) Fallback() error { return t.fallback }

func (t *Tracer) attach(p *ebpf.Program, at ebpf.AttachType) error {
	l, err := link.AttachTracing(link.TracingOptions{Program: p, AttachType: at})
	if err != nil {
		return fmt.Errorf("attach %s: %w", p, err)
	}
	t.links = append(t.links, l)
	return nil
}

func (t *Tracer) loadFentry(specFn func() (*ebpf.CollectionSpec, error)) error {
	if specFn == nil {
		specFn = loadFentry
	}
	spec, err := specFn()
	if err != nil {
		return err
	}
	var objs fentryObjects
	// Share every map the two objects have in common: one mirror, one set
	// of counters, and no second copy of the ring buffer.
	err = spec.LoadAndAssign(&objs, &ebpf.CollectionOptions{MapReplacements: map[string]*ebpf.Map{
		"neigh_mirror": t.objs.NeighMirror, "hits": t.objs.Hits, "tr_stats": t.objs.TrStats,
		"stale_macs": t.objs.StaleMacs, "tp_events": t.objs.TpEvents, "watched_big": t.objs.WatchedBig,
		"source_candidates": t.objs.SourceCandidates,
	}})
	if err != nil {
		if errors.Is(err, unix.EPERM) {
			// cilium/ebpf adds a MEMLOCK hint to EPERM; with a memlock
			// limit that is not the cause (lockdown, an LSM or a kernel
			// without fentry support are), so say only what happened.
			return fmt.Errorf("the kernel refused to load fentry/fexit programs: %w", unix.EPERM)
		}
		return fmt.Errorf("load fentry programs: %w", verifierDetail(err))
	}
	t.fentry = &objs
	if err := t.attachFentry(); err != nil {
		objs.Close()
		t.fentry = nil
		return err
	}
	return nil
}

// attachFentry attaches the fentry/fexit programs (per packet: they run
// for every FIB lookup and redirect).
func (t *Tracer) attachFentry() error {
	for _, p := range []struct {
		prog *ebpf.Program
		at   ebpf.AttachType
	}{
		{t.fentry.FeSkbFib, ebpf.AttachTraceFExit}, {t.fentry.FeXdpFib, ebpf.AttachTraceFExit},
		{t.fentry.FeRedirect, ebpf.AttachTraceFEntry}, {t.fentry.FeRedirectNeigh, ebpf.AttachTraceFEntry}, {t.fentry.FeRedirectPeer, ebpf.AttachTraceFEntry},
	} {
		l, err := link.AttachTracing(link.TracingOptions{Program: p.prog, AttachType: p.at})
		if err != nil {
			closeAll(t.fentryLinks)
			t.fentryLinks = nil
			return fmt.Errorf("attach %s: %w", p.prog, err)
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
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.setPerPacketLocked(on)
}

func (t *Tracer) setPerPacketLocked(on bool) error {
	if on != t.perPacket {
		if on {
			t.since = time.Now()
		} else {
			t.attached += time.Since(t.since)
		}
		t.perPacket = on
	}
	var errs []error
	switch {
	case t.mode == TracerFentry && on && t.fentryLinks == nil:
		errs = append(errs, t.attachFentry())
	case t.mode == TracerFentry && !on:
		errs = append(errs, closeAll(t.fentryLinks))
		t.fentryLinks = nil
	case t.mode == TracerXmit && on && t.xmitLink == nil:
		l, err := link.AttachTracing(link.TracingOptions{Program: t.objs.TrXmit})
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
// is gone is forgotten.
func (t *Tracer) syncSourceLinksLocked() error {
	var errs []error
	for idx, l := range t.sourceLinks {
		if !t.perPacket || !t.sourceIfaces[idx] {
			errs = append(errs, l.Close())
			delete(t.sourceLinks, idx)
		}
	}
	if !t.perPacket {
		return errors.Join(errs...)
	}
	for idx := range t.sourceIfaces {
		if t.sourceLinks[idx] != nil {
			continue
		}
		var l link.Link
		err := t.inNetNS(func() error {
			var err error
			// At the head of the chain: a datapath program later in it
			// may redirect the packet away.
			l, err = link.AttachTCX(link.TCXOptions{Interface: idx, Program: t.objs.TrSource, Attach: ebpf.AttachTCXIngress, Anchor: link.Head()})
			return err
		})
		if errors.Is(err, unix.ENODEV) {
			delete(t.sourceIfaces, idx)
			continue
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("attach source-MAC program to interface %d: %w", idx, err))
			continue
		}
		t.sourceLinks[idx] = l
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

// SetCandidates replaces the source-MAC candidates. A candidate that stays
// with the same MAC keeps what was seen of it.
func (t *Tracer) SetCandidates(cs []Candidate) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	want := make(map[tracerNkey][6]byte, len(cs))
	ifaces := make(map[int]bool)
	var bloom [16384]uint8
	for _, c := range cs {
		if len(c.MAC) != 6 {
			continue
		}
		k := nkeyOf(c.Ifindex, c.Addr)
		want[k] = [6]byte(c.MAC)
		ifaces[c.Ifindex] = true
		bloom[sourceSlot(k)] = 1
	}
	var errs []error
	for k := range t.candidates {
		if _, ok := want[k]; !ok {
			if err := t.objs.SourceCandidates.Delete(k); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
				errs = append(errs, err)
			}
			delete(t.candidates, k)
			delete(t.sightings, k)
		}
	}
	full := 0
	for k, mac := range want {
		if old, ok := t.candidates[k]; ok && old == mac {
			continue
		}
		if err := t.objs.SourceCandidates.Put(k, tracerCand{Mac: mac}); err != nil {
			full++
			continue
		}
		t.candidates[k] = mac
		delete(t.sightings, k) // counts from zero again
	}
	if full > 0 {
		errs = append(errs, fmt.Errorf("source-MAC candidates map full: %d of %d candidates not watched", full, len(want)))
	}
	if err := t.objs.SourceBloom.Set(bloom); err != nil {
		errs = append(errs, fmt.Errorf("set source filter: %w", err))
	}
	t.sourceIfaces = ifaces
	errs = append(errs, t.syncSourceLinksLocked())
	return errors.Join(errs...)
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
// since the last call.
func (t *Tracer) Sightings() (map[HitKey]Sighting, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make(map[HitKey]Sighting)
	var k tracerNkey
	var v tracerCand
	it := t.objs.SourceCandidates.Iterate()
	for it.Next(&k, &v) {
		if _, ok := t.candidates[k]; !ok {
			continue
		}
		if d := v.Packets - t.sightings[k]; v.Packets > t.sightings[k] {
			t.sightings[k] = v.Packets
			out[k.hitKey()] = Sighting{MAC: bytes.Clone(v.Seen[:]), Packets: d}
		}
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("read source-MAC candidates: %w", err)
	}
	return out, nil
}

// DeleteHits forgets the hit counters of entries that no longer need them
// (no longer STALE, or gone), so the hits map holds only live ones.
func (t *Tracer) DeleteHits(keys []HitKey) {
	for _, k := range keys {
		_ = t.objs.Hits.Delete(nkeyOf(k.Ifindex, k.Addr))
	}
}

// ProgramRuns returns how many times each of the tracer's programs ran,
// from the kernel's own statistics. The kernel counts only while
// statistics are on, by the kernel.bpf_stats_enabled sysctl or by a
// process holding BPF_ENABLE_STATS (which the sysctl does not show), so
// ok is true when the sysctl reads 1 or any program has a count.
func (t *Tracer) ProgramRuns() (runs map[string]uint64, ok bool) {
	runs = make(map[string]uint64)
	counted := false
	progs := []*ebpf.Program{t.objs.TrXmit, t.objs.TrSource, t.objs.TrUpdateDone, t.objs.TrEventSendDone,
		t.objs.TrTimerHandler, t.objs.TrCreate, t.objs.TrCleanup}
	if t.fentry != nil {
		progs = append(progs, t.fentry.FeSkbFib, t.fentry.FeXdpFib, t.fentry.FeRedirect, t.fentry.FeRedirectNeigh, t.fentry.FeRedirectPeer)
	}
	for _, p := range progs {
		st, err := p.Stats()
		if err != nil {
			return nil, false
		}
		info, err := p.Info()
		if err != nil {
			return nil, false
		}
		runs[info.Name] = st.RunCount
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
// already recorded is newer and is left alone. The per-interface counters
// and the MAC filter are read once, updated in memory and written back
// once; a tracepoint that changes them in between loses that change.
func (t *Tracer) Seed(entries []SeedEntry) (int, error) {
	var buckets [4096]uint32
	var bloom [16384]uint32
	if err := t.objs.StaleOnIf.Get(&buckets); err != nil {
		return 0, err
	}
	if err := t.objs.MacBloom.Get(&bloom); err != nil {
		return 0, err
	}
	n, stale := 0, 0
	for _, e := range entries {
		k := nkeyOf(e.Ifindex, e.Addr)
		v := tracerNval{State: e.State}
		copy(v.Mac[:], e.MAC)
		if err := t.objs.NeighMirror.Update(k, v, ebpf.UpdateNoExist); err != nil {
			if errors.Is(err, ebpf.ErrKeyExist) {
				continue
			}
			return n, fmt.Errorf("seed tracer mirror: %w", err)
		}
		n++
		if e.State != unix.NUD_STALE || len(e.MAC) < 6 {
			continue
		}
		mk := tracerMkey{Ifindex: uint32(e.Ifindex), Family: k.Family}
		copy(mk.Mac[:], e.MAC)
		var mv tracerMval
		if err := t.objs.StaleMacs.Lookup(mk, &mv); err != nil {
			mv = tracerMval{}
		}
		mv.Count++
		mv.Entry = k
		if err := t.objs.StaleMacs.Put(mk, mv); err != nil {
			return n, fmt.Errorf("seed STALE MACs: %w", err)
		}
		buckets[e.Ifindex%len(buckets)]++
		bloom[bloomSlot(uint32(e.Ifindex), e.MAC, k.Family)]++
		stale++
	}
	if stale == 0 {
		return n, nil
	}
	if err := t.objs.StaleOnIf.Set(buckets); err != nil {
		return n, err
	}
	return n, t.objs.MacBloom.Set(bloom)
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

// Hits returns the bypass packets counted per entry since load, summed
// over CPUs.
func (t *Tracer) Hits() (map[HitKey]uint64, error) {
	out := make(map[HitKey]uint64)
	var k tracerNkey
	var per []uint64
	it := t.objs.Hits.Iterate()
	n := 0
	for it.Next(&k, &per) {
		out[k.hitKey()] += sum(per)
		n++
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("read tracer hits: %w", err)
	}
	t.hitEntries.Store(int64(n))
	return out, nil
}

// Stats reads the counters and how full the maps are.
func (t *Tracer) Stats() (TracerStats, error) {
	var s TracerStats
	for stat, dst := range map[tracerTrStat]*uint64{
		tracerTrStatST_HITS_DROPPED:   &s.HitsDropped,
		tracerTrStatST_MIRROR_DROPPED: &s.MirrorDropped,
		tracerTrStatST_EVENTS_DROPPED: &s.EventsDropped,
		tracerTrStatST_XMIT_LOOKUPS:   &s.XmitLookups,
		tracerTrStatST_XMIT_LOOKUPS6:  &s.XmitLookups6,
	} {
		v, err := perCPUCounter(t.objs.TrStats, uint32(stat))
		if err != nil {
			return s, fmt.Errorf("read tracer counters: %w", err)
		}
		*dst = v
	}
	s.XmitLookups += s.XmitLookups6
	s.HitCapacity = int(t.objs.Hits.MaxEntries())
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
	if t.fentry == nil {
		return nil, nil
	}
	out := make(RedirectCounts, numHelpers)
	slot := func(h Helper, nh fentryFeNexthop) uint32 {
		return uint32(h)*uint32(fentryFeNexthopNH_MAX) + uint32(nh)
	}
	for _, h := range Helpers() {
		stale, err := perCPUCounter(t.fentry.FeRedirects, slot(h, fentryFeNexthopNH_STALE))
		if err != nil {
			return nil, fmt.Errorf("read fentry redirect counters: %w", err)
		}
		other, err := perCPUCounter(t.fentry.FeRedirects, slot(h, fentryFeNexthopNH_OTHER))
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
	errs = append(errs, closeAll(t.fentryLinks))
	t.fentryLinks = nil
	for idx, l := range t.sourceLinks {
		errs = append(errs, l.Close())
		delete(t.sourceLinks, idx)
	}
	t.mu.Unlock()
	if t.fentry != nil {
		errs = append(errs, t.fentry.Close())
	}
	errs = append(errs, t.objs.Close())
	return errors.Join(errs...)
}
