package bpf

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/ringbuf"
	"golang.org/x/sys/unix"
)

// TracerMode selects how bypass packets are counted.
type TracerMode string

// Tracer modes. Auto tries fentry and falls back to xmit.
const (
	TracerOff    TracerMode = "off"
	TracerAuto   TracerMode = "auto"
	TracerXmit   TracerMode = "xmit"
	TracerFentry TracerMode = "fentry"
)

// ParseTracerMode checks a --tracer value.
func ParseTracerMode(s string) (TracerMode, error) {
	switch TracerMode(s) {
	case TracerOff, TracerAuto, TracerXmit, TracerFentry:
		return TracerMode(s), nil
	}
	return "", fmt.Errorf("tracer mode %q: want off, auto, xmit or fentry", s)
}

// ErrNoBTF means the kernel exposes no BTF (/sys/kernel/btf/vmlinux), which
// tp_btf and fentry programs need.
var ErrNoBTF = errors.New("kernel has no BTF (/sys/kernel/btf/vmlinux missing); the tracer needs CONFIG_DEBUG_INFO_BTF")

// Tracer is the loaded and attached tracer.
type Tracer struct {
	objs   tracerObjects
	fentry *fentryObjects
	links  []link.Link
	rd     *ringbuf.Reader

	// Mode is the mode that runs: xmit or fentry.
	Mode TracerMode
	// Fallback says why fentry was not used, when it was wanted.
	Fallback error

	mu      sync.Mutex
	watched map[int]bool

	hitEntries, mirrorEntries atomic.Int64
	xmitLink                  link.Link
}

// HitKey names a neighbour entry in the tracer's maps.
type HitKey struct {
	Ifindex int
	Addr    netip.Addr
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
}

// LoadTracer loads the tracer and attaches it. In fentry or auto mode it
// tries the fentry programs first and falls back to xmit mode when the
// kernel refuses them, recording why in Fallback.
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
	t := &Tracer{watched: make(map[int]bool)}
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
	t.Mode = TracerXmit
	if opts.Mode == TracerFentry || opts.Mode == TracerAuto {
		if err := t.loadFentry(opts.fentrySpec); err != nil {
			t.Fallback = err
		} else {
			t.Mode = TracerFentry
		}
	}
	if t.Mode == TracerXmit {
		if err := t.SetXmitAttached(true); err != nil {
			t.Close()
			return nil, err
		}
	}
	rd, err := ringbuf.NewReader(t.objs.TpEvents)
	if err != nil {
		t.Close()
		return nil, fmt.Errorf("open tracer ring buffer: %w", err)
	}
	t.rd = rd
	return t, nil
}

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
	n := len(t.links)
	for _, p := range []struct {
		prog *ebpf.Program
		at   ebpf.AttachType
	}{
		{objs.FeSkbFib, ebpf.AttachTraceFExit}, {objs.FeXdpFib, ebpf.AttachTraceFExit},
		{objs.FeRedirect, ebpf.AttachTraceFEntry}, {objs.FeRedirectNeigh, ebpf.AttachTraceFEntry}, {objs.FeRedirectPeer, ebpf.AttachTraceFEntry},
	} {
		if err := t.attach(p.prog, p.at); err != nil {
			for _, l := range t.links[n:] {
				l.Close()
			}
			t.links = t.links[:n]
			objs.Close()
			return err
		}
	}
	t.fentry = &objs
	return nil
}

// SetXmitAttached attaches or detaches the transmit hook alone; the mirror
// keeps running. Benchmarks use it to compare with and without the hook on
// the same machine state.
func (t *Tracer) SetXmitAttached(on bool) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if on == (t.xmitLink != nil) {
		return nil
	}
	if !on {
		err := t.xmitLink.Close()
		t.xmitLink = nil
		return err
	}
	l, err := link.AttachTracing(link.TracingOptions{Program: t.objs.TrXmit})
	if err != nil {
		return fmt.Errorf("attach transmit hook: %w", err)
	}
	t.xmitLink = l
	return nil
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

// SeedEntry is one entry of the monitor's table at tracer start.
type SeedEntry struct {
	Ifindex int
	Addr    netip.Addr
	State   uint8
	MAC     net.HardwareAddr
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
		if e.State != 0x04 || len(e.MAC) < 6 { // NUD_STALE
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

// TracerStats are the tracer's own counters.
type TracerStats struct {
	HitsDropped, MirrorDropped, EventsDropped, XmitLookups uint64
	XmitLookups6                                           uint64 // the IPv6 part of XmitLookups
	HitEntries, HitCapacity                                int
	MirrorEntries, MirrorCapacity                          int
}

// Stats reads the counters and how full the maps are.
func (t *Tracer) Stats() (TracerStats, error) {
	var s TracerStats
	vals := make([]uint64, 5)
	for i := range vals {
		v, err := perCPUCounter(t.objs.TrStats, uint32(i))
		if err != nil {
			return s, err
		}
		vals[i] = v
	}
	s.HitsDropped, s.MirrorDropped, s.EventsDropped = vals[0], vals[1], vals[2]
	s.XmitLookups = vals[3] + vals[4]
	s.XmitLookups6 = vals[4]
	s.HitCapacity = int(t.objs.Hits.MaxEntries())
	s.MirrorCapacity = int(t.objs.NeighMirror.MaxEntries())
	s.HitEntries = int(t.hitEntries.Load())
	s.MirrorEntries = int(t.mirrorEntries.Load())
	return s, nil
}

// refreshMirrorSize counts the mirror's entries. It walks the map with a
// syscall per key, so the feed calls it rarely and off the scrape path.
func (t *Tracer) refreshMirrorSize() {
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

// RedirectHelpers names the helpers the fentry tracer counts, in the
// order of fentry.c.
var RedirectHelpers = []string{"bpf_redirect", "bpf_redirect_neigh", "bpf_redirect_peer"}

// Redirects returns, in fentry mode, the redirects counted per helper and
// whether the FIB lookup before them had resolved to a STALE entry
// ([helper][0] other, [helper][1] stale). ok is false in xmit mode.
func (t *Tracer) Redirects() (counts [3][2]uint64, ok bool, err error) {
	if t.fentry == nil {
		return counts, false, nil
	}
	for h := range counts {
		for c := range counts[h] {
			v, err := perCPUCounter(t.fentry.FeRedirects, uint32(h*2+c))
			if err != nil {
				return counts, true, fmt.Errorf("read fentry redirect counters: %w", err)
			}
			counts[h][c] = v
		}
	}
	return counts, true, nil
}

// SilentTransition is a transition the tracepoints saw and netlink never
// reports.
type SilentTransition struct {
	Key      HitKey
	From, To uint8
	MAC      net.HardwareAddr
	Source   string
}

var sources = []string{"neigh_update_done", "neigh_event_send_done", "neigh_timer_handler", "neigh_create", "neigh_cleanup_and_release"}

// ReadTransition blocks for the next silent transition; it returns
// ringbuf.ErrClosed after Close.
func (t *Tracer) ReadTransition() (SilentTransition, error) {
	rec, err := t.rd.Read()
	if err != nil {
		return SilentTransition{}, err
	}
	return decodeTransition(rec.RawSample)
}

func decodeTransition(b []byte) (SilentTransition, error) {
	// struct tp_event: nkey (24 bytes), from, to, source, pad, mac[6], pad[2].
	if len(b) < 34 {
		return SilentTransition{}, fmt.Errorf("tracer event of %d bytes", len(b))
	}
	var k tracerNkey
	k.Ifindex = uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24
	k.Family = b[4]
	copy(k.Addr[:], b[8:24])
	st := SilentTransition{Key: k.hitKey(), From: b[24], To: b[25], MAC: net.HardwareAddr(append([]byte(nil), b[28:34]...))}
	if int(b[26]) < len(sources) {
		st.Source = sources[b[26]]
	}
	return st, nil
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
	if t.xmitLink != nil {
		errs = append(errs, t.xmitLink.Close())
		t.xmitLink = nil
	}
	if t.fentry != nil {
		errs = append(errs, t.fentry.Close())
	}
	errs = append(errs, t.objs.Close())
	return errors.Join(errs...)
}
