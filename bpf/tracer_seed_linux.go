package bpf

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/features"
	"golang.org/x/sys/unix"
)

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

// NetNSInode returns the inode number of a network namespace file
// (/proc/PID/ns/net or /run/netns/NAME), which identifies it in the kernel.
func NetNSInode(path string) (uint32, error) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return 0, fmt.Errorf("identify network namespace %s: %w", path, err)
	}
	return uint32(st.Ino), nil
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
// already recorded is newer and is left alone: the insert does not
// replace (BPF_NOEXIST), and a STALE entry counted before an insert that
// found one is uncounted. A STALE entry is counted in the filters, as the
// tracepoints do. What does not fit is returned, not lost: the caller
// counts it and tries again.
//
// Where the kernel took tr_seed (6.0 on), the kernel does this, a batch
// of 1,024 entries a syscall (seedInKernel); else user space does it
// entry by entry (seedEach).
func (t Seeder) Seed(entries []SeedEntry) (n int, unmirrored []HitKey, err error) {
	if n, unmirrored, ok, err := t.seedInKernel(entries); ok {
		return n, unmirrored, err
	}
	return t.seedEach(entries)
}

// seeding is tr_seed and tr_candidates, and the batch they read, mapped
// into this process.
type seeding struct {
	mu         sync.Mutex // one batch at a time
	prog, cand *ebpf.Program
	mem        []byte
	batch      []tracerSeedEntry // mem as entries
}

// loadSeed loads tr_seed and tr_candidates, and maps their batch; where
// the kernel refuses them, Seed and UpdateCandidates go on entry by entry
// and Programs says why.
func (t Seeder) loadSeed(l *progLoader) {
	var sts []ProgramStatus
	var progs []*ebpf.Program // by sts's index, nil where refused
	// Before 5.14 the kernel has no syscall programs, and its EINVAL
	// would read as the verifier's.
	noType := features.HaveProgramType(ebpf.Syscall)
	hooks := hooksOf(kindSeed)
	for _, h := range hooks {
		if noType != nil {
			sts = append(sts, ProgramStatus{Program: h.progs[0], Hook: hookOf(l.spec, h.progs[0]), Feature: h.feature, Needs: h.needs,
				Refusal: refusal(noType, false), Error: oneLine(noType)})
			progs = append(progs, nil)
			continue
		}
		_, p, _, st := loadHook(l, h, nil)
		sts = append(sts, st...)
		progs = append(progs, p)
	}
	if slices.ContainsFunc(progs, func(p *ebpf.Program) bool { return p != nil }) {
		m := t.objs.SeedBatch
		size := int(m.MaxEntries()) * int(unsafe.Sizeof(tracerSeedEntry{}))
		mem, err := unix.Mmap(m.FD(), 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
		if err != nil {
			for i, p := range progs {
				if p != nil {
					p.Close()
					sts[i] = ProgramStatus{Program: sts[i].Program, Hook: sts[i].Hook, Feature: sts[i].Feature, Needs: sts[i].Needs,
						Refusal: RefusedOther, Error: "map the batch: " + err.Error()}
					progs[i] = nil
				}
			}
		} else {
			t.seed.mem = mem
			t.seed.batch = unsafe.Slice((*tracerSeedEntry)(unsafe.Pointer(unsafe.SliceData(mem))), m.MaxEntries())
		}
	}
	for i, p := range progs {
		if p == nil {
			continue
		}
		switch hooks[i].role {
		case roleSeedMirror:
			t.seed.prog = p
		case roleSeedCandidates:
			t.seed.cand = p
		}
		t.progs = append(t.progs, p)
	}
	t.programs = append(t.programs, sts...)
}

// inBatches runs p (tr_seed or tr_candidates) over n items a batch at a
// time: fill writes items [off, off+len(b)) into the batch, and read
// takes what the kernel wrote back. ok is false, and nothing done,
// without p (refused, or the tracer closed).
func (t Seeder) inBatches(p func() *ebpf.Program, n int, fill func(off int, b []tracerSeedEntry), read func(b []tracerSeedEntry) error) (ok bool, err error) {
	t.seed.mu.Lock()
	defer t.seed.mu.Unlock()
	prog := p()
	if prog == nil {
		return false, nil
	}
	for off := 0; off < n; {
		b := t.seed.batch[:min(n-off, len(t.seed.batch))]
		fill(off, b)
		if _, err := prog.Run(&ebpf.RunOptions{Context: uint32(len(b))}); err != nil {
			return true, err
		}
		if err := read(b); err != nil {
			return true, err
		}
		off += len(b)
	}
	return true, nil
}

// SeedsInKernel reports whether Seed runs in the kernel (tr_seed), a
// batch a syscall, rather than entry by entry.
func (t Seeder) SeedsInKernel() bool {
	t.seed.mu.Lock()
	defer t.seed.mu.Unlock()
	return t.seed.prog != nil
}

// closeSeed unmaps the batch, once no batch is in flight; the program
// closes with the others.
func (t Seeder) closeSeed() error {
	t.seed.mu.Lock()
	defer t.seed.mu.Unlock()
	if t.seed.mem == nil {
		return nil
	}
	err := unix.Munmap(t.seed.mem)
	t.seed.mem, t.seed.batch, t.seed.prog, t.seed.cand = nil, nil, nil, nil
	return err
}

// seedInKernel hands the entries to tr_seed a batch at a time: it counts
// and inserts each as seedEach would, in the kernel, and writes back what
// became of it. ok is false, and nothing done, without tr_seed.
func (t Seeder) seedInKernel(entries []SeedEntry) (n int, unmirrored []HitKey, ok bool, err error) {
	fill := func(off int, b []tracerSeedEntry) {
		for i := range b {
			e := &entries[off+i]
			b[i] = tracerSeedEntry{Key: nkeyOf(e.Ifindex, e.Addr), State: e.State}
			copy(b[i].Mac[:], e.MAC)
			if len(e.MAC) >= 6 {
				b[i].HasMac = 1
			}
		}
	}
	read := func(b []tracerSeedEntry) error {
		for i := range b {
			switch tracerSeedResult(b[i].Result) {
			case tracerSeedResultSEED_INSERTED:
				n++
			case tracerSeedResultSEED_UNCOUNTED:
				n++
				unmirrored = append(unmirrored, b[i].Key.hitKey())
			case tracerSeedResultSEED_UNMIRRORED:
				unmirrored = append(unmirrored, b[i].Key.hitKey())
			case tracerSeedResultSEED_EXISTS:
			default:
				return fmt.Errorf("entry %d of %d has no result (%d)", i, len(b), b[i].Result)
			}
		}
		return nil
	}
	ok, err = t.inBatches(func() *ebpf.Program { return t.seed.prog }, len(entries), fill, read)
	if err != nil {
		err = fmt.Errorf("seed the mirror in the kernel: %w", err)
	}
	return n, unmirrored, ok, err
}

// seedEach seeds entry by entry with map syscalls. The per-interface
// counters and the MAC filter are read once, updated in memory and
// written back once; a tracepoint that changes them in between loses that
// change. An entry costs one map syscall.
func (t Seeder) seedEach(entries []SeedEntry) (n int, unmirrored []HitKey, err error) {
	// On the heap, as in StaleCounted: 80 KiB on the stack would stay
	// with the caller's goroutine until collections shrink it.
	buckets, bloom := new([4096]uint32), new([16384]uint32)
	if err := t.objs.StaleOnIf.Get(buckets); err != nil {
		return 0, nil, err
	}
	if err := t.objs.MacBloom.Get(bloom); err != nil {
		return 0, nil, err
	}
	stale := 0
	// An answer that no STALE entry had a MAC (via_macs) is wrong once an
	// entry with it is seeded STALE; count_stale drops it in the kernel,
	// and here the unanswered MACs, at most the LRU's 4,096, are read
	// once and dropped as such entries come.
	asked := t.unansweredVias()
	// What the syscalls read, declared once: handed over as pointers,
	// they live on the heap.
	var (
		k  tracerNkey
		v  tracerNval
		mk tracerMkey
	)
	for _, e := range entries {
		k = nkeyOf(e.Ifindex, e.Addr)
		v = tracerNval{State: e.State}
		copy(v.Mac[:], e.MAC)
		if e.State == unix.NUD_STALE && len(e.MAC) >= 6 {
			v.StaleOk = 1 // counted in the filters below, once mirrored
		}
		if err := t.objs.NeighMirror.Update(raw(&k), raw(&v), ebpf.UpdateNoExist); err != nil {
			if errors.Is(err, ebpf.ErrKeyExist) {
				continue // a tracepoint got there first
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
			mk = tracerMkey{Ifindex: k.Ifindex, Mac: v.Mac, Family: k.Family}
			if asked[mk] {
				// Gone already (an eviction, or the kernel's own drop)
				// is as good: the next routed packet asks again.
				_ = t.objs.ViaMacs.Delete(raw(&mk))
				delete(asked, mk)
			}
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

// unansweredVias returns the MACs of routed bypass traffic whose
// question no STALE entry answers (asked, or answered "none").
func (t Seeder) unansweredVias() map[tracerMkey]bool {
	out := map[tracerMkey]bool{}
	var (
		k tracerMkey
		v tracerVia
	)
	it := t.objs.ViaMacs.Iterate()
	for it.Next(&k, &v) {
		if v.State != uint8(tracerViaStateVIA_STALE) {
			out[k] = true
		}
	}
	// A walk cut short leaves some answers standing their epochs, as
	// before this pass existed.
	return out
}

// StaleCounted returns how many STALE entries the in-kernel maps count
// (mirrored, and in the filters): with the entries reported unmirrored,
// every STALE entry the tracer watches.
func (t Seeder) StaleCounted() (uint64, error) {
	// 16 KiB on the heap: on the stack they would grow the scrape's
	// connection goroutine, which a keep-alive holds between scrapes.
	buckets := new([4096]uint32)
	if err := t.objs.StaleOnIf.Get(buckets); err != nil {
		return 0, err
	}
	var n uint64
	for _, b := range buckets {
		n += uint64(b)
	}
	return n, nil
}

// Mirrored reports whether an entry is in the in-kernel mirror and, when
// STALE, counted in the filters.
func (t Seeder) Mirrored(k HitKey) bool {
	var v tracerNval
	if t.objs.NeighMirror.Lookup(nkeyOf(k.Ifindex, k.Addr), &v) != nil {
		return false
	}
	return v.State != unix.NUD_STALE || v.StaleOk == 1
}

// RefreshMirrorSize counts the mirror's entries, a batch of 4,096 per
// syscall, so callers should still call it rarely and off the scrape path.
func (t Seeder) RefreshMirrorSize() {
	t.mirrorEntries.Store(int64(countKeys(t.objs.NeighMirror)))
}

// countKeys counts the entries of the mirror (or of a map with its key
// and value types): with BPF_MAP_LOOKUP_BATCH, 4,096 a syscall, else key
// by key (two syscalls each: at a million entries, seconds of CPU). Under
// concurrent changes the count is approximate either way.
func countKeys(m *ebpf.Map) int {
	keys := make([]tracerNkey, 4096)
	vals := make([]tracerNval, 4096)
	var cur ebpf.MapBatchCursor
	n := 0
	for {
		k, err := m.BatchLookup(&cur, keys, vals, nil)
		n += k
		if errors.Is(err, ebpf.ErrKeyNotExist) {
			return n
		}
		if err != nil {
			return countKeysOneByOne(m)
		}
	}
}

func countKeysOneByOne(m *ebpf.Map) int {
	var k tracerNkey
	n := 0
	it := m.Iterate()
	var v []byte
	for it.Next(&k, &v) {
		n++
	}
	return n
}

// raw hands a generated key or value to the kernel as it lies in memory,
// so the per-entry paths (seeding, candidates) skip cilium/ebpf's
// reflection on every call. The generated types match their maps' layout
// byte for byte (TestRawLayouts).
func raw[T tracerNkey | tracerNval | tracerMkey | tracerVia | tracerScand](v *T) unsafe.Pointer {
	return unsafe.Pointer(v)
}
