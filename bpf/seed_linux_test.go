package bpf

import (
	"errors"
	"maps"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/neighwatch/neighwatch/internal/dev/lab"
	"golang.org/x/sys/unix"
)

// TestSeedInKernelAsEntryByEntry seeds one batch twice, by tr_seed in the
// kernel and entry by entry from user space (tr_seed refused), into maps
// small enough to fill, and wants the same maps, counts and leftovers
// from both, and the figures the batch implies:
//   - an entry a tracepoint mirrored first (here written before the seed)
//     stays as it was and is neither counted nor returned;
//   - STALE entries sharing a MAC count it once per entry in the MAC
//     filter;
//   - a STALE entry without a MAC is mirrored and returned uncounted;
//   - once the mirror (48 entries) is full, what is left is returned, and
//     a STALE entry counted before its insert failed is uncounted.
//
// From 6.1 the kernel must take tr_seed; before 6.0 it refuses it.
func TestSeedInKernelAsEntryByEntry(t *testing.T) {
	lab.Require(t)
	const mirrorSize = 48
	mac := func(a, b byte) net.HardwareAddr { return net.HardwareAddr{2, 0, 0, 0, a, b} }
	ip := func(a, b byte) netip.Addr { return netip.AddrFrom4([4]byte{10, a, 0, b}) }
	first := SeedEntry{Ifindex: 1, Addr: ip(1, 1), State: unix.NUD_STALE, MAC: mac(1, 1)}
	batch := []SeedEntry{first}
	for i := range 20 {
		batch = append(batch, SeedEntry{Ifindex: 2, Addr: ip(2, byte(i)), State: unix.NUD_REACHABLE, MAC: mac(2, byte(i))})
	}
	for i := range 10 { // two MACs, five entries each
		batch = append(batch, SeedEntry{Ifindex: 3, Addr: ip(3, byte(i)), State: unix.NUD_STALE, MAC: mac(3, byte(i%2))})
	}
	batch = append(batch, SeedEntry{Ifindex: 3, Addr: ip(4, 1), State: unix.NUD_STALE})
	for i := range 12 {
		batch = append(batch, SeedEntry{Ifindex: 4, Addr: ip(5, byte(i)), State: unix.NUD_STALE, MAC: mac(5, byte(i))})
	}
	for i := range 8 { // four fit the mirror
		batch = append(batch, SeedEntry{Ifindex: 2, Addr: ip(6, byte(i)), State: unix.NUD_REACHABLE, MAC: mac(6, byte(i))})
	}
	batch = append(batch, SeedEntry{Ifindex: 3, Addr: ip(7, 1), State: unix.NUD_STALE, MAC: mac(3, 0)})

	type result struct {
		n          int
		unmirrored []HitKey
		counted    uint64
		mirror     map[tracerNkey]tracerNval
		bloom      [16384]uint32
	}
	seed := func(refuse []string) (*Tracer, result) {
		tr, err := LoadTracer(TracerOptions{Mode: TracerXmit, MirrorSize: mirrorSize, Refuse: refuse})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { tr.Close() })
		k := nkeyOf(first.Ifindex, first.Addr)
		v := tracerNval{State: unix.NUD_REACHABLE, Mac: [6]byte(mac(9, 9))}
		if err := tr.core.objs.NeighMirror.Update(raw(&k), raw(&v), ebpf.UpdateNoExist); err != nil {
			t.Fatal(err)
		}
		var r result
		if r.n, r.unmirrored, err = tr.Seed(batch); err != nil {
			t.Fatalf("seed (refused %v): %v", refuse, err)
		}
		if r.counted, err = tr.StaleCounted(); err != nil {
			t.Fatal(err)
		}
		if err := tr.core.objs.MacBloom.Get(&r.bloom); err != nil {
			t.Fatal(err)
		}
		r.mirror = dumpMap[tracerNkey, tracerNval](t, tr.core.objs.NeighMirror)
		if got := r.mirror[k]; got != v {
			t.Errorf("refused %v: the entry mirrored first is now %+v, was %+v", refuse, got, v)
		}
		return tr, r
	}
	kernel, inKernel := seed(nil)
	user, byEntry := seed([]string{"tr_seed"})

	if user.SeedsInKernel() {
		t.Error("tr_seed refused, yet Seed runs in the kernel")
	}
	if ok, rel := lab.KernelAtLeast(6, 1); ok && !kernel.SeedsInKernel() {
		t.Fatalf("kernel %s refused tr_seed: %+v", rel, kernel.Programs())
	} else if ok, _ := lab.KernelAtLeast(6, 0); !ok && kernel.SeedsInKernel() {
		t.Fatalf("kernel %s took tr_seed, which needs 6.0", rel)
	} else {
		t.Logf("kernel %s: tr_seed taken: %v", rel, kernel.SeedsInKernel())
	}

	// 20 + 10 + 1 + 12 + 4 mirrored; 1 uncounted and 4 + 1 left out. The
	// MAC filter counts each STALE entry mirrored with a MAC once.
	var bloom [16384]uint32
	for _, e := range batch[1:] {
		if e.State == unix.NUD_STALE && e.MAC != nil && e.Addr != ip(7, 1) {
			bloom[bloomSlot(uint32(e.Ifindex), e.MAC, unix.AF_INET)]++
		}
	}
	for name, r := range map[string]result{"in the kernel": inKernel, "entry by entry": byEntry} {
		if r.n != 47 || len(r.unmirrored) != 6 || r.counted != 22 || len(r.mirror) != mirrorSize {
			t.Errorf("%s: %d mirrored, %d returned, %d STALE counted, mirror %d; want 47, 6, 22, %d",
				name, r.n, len(r.unmirrored), r.counted, len(r.mirror), mirrorSize)
		}
		if r.bloom != bloom {
			t.Errorf("%s: the MAC filter is not the one the STALE entries mirrored make", name)
		}
	}
	if inKernel.n != byEntry.n || !slices.Equal(inKernel.unmirrored, byEntry.unmirrored) || inKernel.counted != byEntry.counted {
		t.Errorf("in the kernel %d mirrored, %d STALE counted, returned %v; entry by entry %d, %d, %v",
			inKernel.n, inKernel.counted, inKernel.unmirrored, byEntry.n, byEntry.counted, byEntry.unmirrored)
	}
	if d := differ(inKernel.mirror, byEntry.mirror); len(d) > 0 {
		t.Errorf("the mirrors differ at %d keys, the first %+v", len(d), d[0])
	}
	if inKernel.bloom != byEntry.bloom {
		t.Error("the MAC filters differ")
	}
}

// differ returns the keys whose values a and b do not share.
func differ[K, V comparable](a, b map[K]V) []K {
	var out []K
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			out = append(out, k)
		}
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			out = append(out, k)
		}
	}
	return out
}

// dumpMap reads a whole map.
func dumpMap[K comparable, V any](t *testing.T, m *ebpf.Map) map[K]V {
	t.Helper()
	out := map[K]V{}
	var k K
	var v V
	it := m.Iterate()
	for it.Next(&k, &v) {
		out[k] = v
	}
	if err := it.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestCandidatesInKernelAsOneByOne updates the source-MAC candidates
// twice, by tr_candidates in the kernel and one by one from user space
// (tr_candidates refused), in a map of 8, and wants the same map, filter,
// per-interface counts and leftovers from both, and what the batch
// implies: a candidate already watched keeps what was seen of it, with
// its MAC or another (which one by one the map takes; in the mirror the
// MAC is the entry's), a removed one leaves, removing one that is none is
// no error, and past 8 a candidate is not watched.
func TestCandidatesInKernelAsOneByOne(t *testing.T) {
	lab.Require(t)
	const size = 8
	c := func(i byte, mac byte) Candidate {
		return Candidate{Ifindex: 2 + int(i%2), Addr: netip.AddrFrom4([4]byte{10, 9, 0, i}), MAC: net.HardwareAddr{2, 0, 0, 0, 9, mac}}
	}
	var first []Candidate
	for i := range byte(6) {
		first = append(first, c(i, i))
	}
	gone := c(2, 0)
	gone.MAC = nil
	never := c(40, 0)
	never.MAC = nil
	second := []Candidate{c(0, 0), c(1, 99), gone, never, c(10, 10), c(11, 11), c(12, 12), c(13, 13)}

	type result struct {
		notWatched int
		cands      map[tracerNkey]tracerCand
		bloom      [16384]uint8
		ifaces     map[int]int
	}
	update := func(refuse []string) (*Tracer, result) {
		// In the kernel, a candidate is one of the mirror's entries: the
		// mirror holds all but 13, which is not watched. One by one, the
		// candidates' own map holds 8, and 13 does not fit.
		tr, err := LoadTracer(TracerOptions{Mode: TracerXmit, MirrorSize: 2 * size, CandidatesSize: size, Refuse: refuse})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { tr.Close() })
		var mirrored []SeedEntry
		for _, i := range []byte{0, 1, 2, 3, 4, 5, 10, 11, 12} {
			mirrored = append(mirrored, SeedEntry{Ifindex: c(i, i).Ifindex, Addr: c(i, i).Addr, State: unix.NUD_REACHABLE, MAC: c(i, i).MAC})
		}
		if n, _, err := tr.Seed(mirrored); n != len(mirrored) || err != nil {
			t.Fatalf("refused %v: seeded %d of %d: %v", refuse, n, len(mirrored), err)
		}
		if n, err := tr.UpdateCandidates(first); n != 0 || err != nil {
			t.Fatalf("refused %v: first six: %d not watched, %v", refuse, n, err)
		}
		// What the source-MAC program would have seen of the first two.
		for _, i := range []byte{0, 1} {
			k := nkeyOf(c(i, i).Ifindex, c(i, i).Addr)
			v := tracerCand{Packets: 7}
			if tr.core.candInMirror {
				var nv tracerNval
				if err := tr.core.objs.NeighMirror.Lookup(raw(&k), raw(&nv)); err != nil {
					t.Fatal(err)
				}
				v.On = 1
				nv.C = v
				if err := tr.core.objs.NeighMirror.Update(raw(&k), raw(&nv), ebpf.UpdateExist); err != nil {
					t.Fatal(err)
				}
				continue
			}
			sv := tracerScand{Mac: [6]byte(c(i, i).MAC), C: v}
			if err := tr.core.objs.SourceCandidates.Update(raw(&k), raw(&sv), ebpf.UpdateExist); err != nil {
				t.Fatal(err)
			}
		}
		var r result
		r.notWatched, err = tr.UpdateCandidates(second)
		if r.notWatched != 1 || err == nil || !strings.Contains(err.Error(), "full") {
			t.Errorf("refused %v: %d not watched (%v); want 1, and the map named full", refuse, r.notWatched, err)
		}
		r.cands = map[tracerNkey]tracerCand{}
		if err := tr.eachCandidate(func(k tracerNkey, v *tracerCand) {
			v.On = 0 // the mirror's mark; the map's have none
			r.cands[k] = *v
		}); err != nil {
			t.Fatal(err)
		}
		if !tr.core.candInMirror {
			k := nkeyOf(c(1, 1).Ifindex, c(1, 1).Addr)
			var sv tracerScand
			if err := tr.core.objs.SourceCandidates.Lookup(raw(&k), raw(&sv)); err != nil || sv.Mac != [6]byte(c(1, 99).MAC) {
				t.Errorf("refused %v: the changed candidate's MAC %v (%v), want %v", refuse, net.HardwareAddr(sv.Mac[:]), err, c(1, 99).MAC)
			}
		}
		r.bloom = [16384]uint8(tr.core.cands.sourceBloom())
		r.ifaces = maps.Clone(tr.core.cands.ifaces)
		return tr, r
	}
	kernel, inKernel := update(nil)
	_, oneByOne := update([]string{"tr_candidates"})
	if ok, rel := lab.KernelAtLeast(6, 1); ok && (kernel.core.seed.cand == nil || !kernel.core.candInMirror) {
		t.Fatalf("kernel %s refused tr_candidates (in the mirror: %v): %+v", rel, kernel.core.candInMirror, kernel.Programs())
	}

	for name, r := range map[string]result{"in the kernel": inKernel, "one by one": oneByOne} {
		if len(r.cands) != size {
			t.Errorf("%s: %d candidates, want %d", name, len(r.cands), size)
		}
		kept, changed := r.cands[nkeyOf(c(0, 0).Ifindex, c(0, 0).Addr)], r.cands[nkeyOf(c(1, 1).Ifindex, c(1, 1).Addr)]
		if kept.Packets != 7 || changed.Packets != 7 {
			t.Errorf("%s: kept %+v, changed %+v; want what was seen of both kept, 7 packets", name, kept, changed)
		}
		if _, ok := r.cands[nkeyOf(gone.Ifindex, gone.Addr)]; ok {
			t.Errorf("%s: the removed candidate is still watched", name)
		}
		if n := r.ifaces[2] + r.ifaces[3]; n != size {
			t.Errorf("%s: interfaces count %d candidates (%v), want %d", name, n, r.ifaces, size)
		}
	}
	if d := differ(inKernel.cands, oneByOne.cands); len(d) > 0 {
		t.Errorf("the candidate maps differ at %d keys, the first %+v", len(d), d[0])
	}
	if inKernel.bloom != oneByOne.bloom || !maps.Equal(inKernel.ifaces, oneByOne.ifaces) {
		t.Errorf("filters equal %v, interfaces %v / %v", inKernel.bloom == oneByOne.bloom, inKernel.ifaces, oneByOne.ifaces)
	}
}

// TestSeedAfterClose: seeding into a closed tracer mirrors nothing and
// returns at once, in either path (an error, or every entry returned as
// unmirrored), rather than writing into a batch that is no longer mapped
// or looping on an empty one.
func TestSeedAfterClose(t *testing.T) {
	lab.Require(t)
	for _, refuse := range [][]string{nil, {"tr_seed", "tr_candidates"}} {
		tr, err := LoadTracer(TracerOptions{Mode: TracerXmit, MirrorSize: 64, Refuse: refuse})
		if err != nil {
			t.Fatal(err)
		}
		if err := tr.Close(); err != nil {
			t.Fatal(err)
		}
		e := SeedEntry{Ifindex: 1, Addr: netip.MustParseAddr("10.8.0.1"), State: unix.NUD_STALE, MAC: net.HardwareAddr{2, 0, 0, 0, 8, 1}}
		if n, missed, err := tr.Seed([]SeedEntry{e, e}); n != 0 || (err == nil && len(missed) != 2) {
			t.Errorf("refused %v: seeding a closed tracer: %d mirrored, %d returned, err %v", refuse, n, len(missed), err)
		}
		if n, err := tr.UpdateCandidates([]Candidate{{Ifindex: 1, Addr: e.Addr, MAC: e.MAC}}); err == nil && n != 1 {
			t.Errorf("refused %v: candidates into a closed tracer: %d not watched, no error", refuse, n)
		}
	}
}

// TestSeedDropsUnansweredVias: an answer that no STALE entry had a MAC
// (via_macs, "none", or a question not yet answered) is dropped when an
// entry with that MAC is seeded STALE on that interface and family, in
// the kernel (count_stale) and entry by entry alike, so the next routed
// packet to it asks again at once; answers for other MACs or the other
// family stay.
func TestSeedDropsUnansweredVias(t *testing.T) {
	lab.Require(t)
	for _, refuse := range [][]string{nil, {"tr_seed", "tr_candidates"}} {
		tr, err := LoadTracer(TracerOptions{Mode: TracerXmit, MirrorSize: 64, Refuse: refuse})
		if err != nil {
			t.Fatal(err)
		}
		defer tr.Close()
		if refuse != nil && tr.SeedsInKernel() {
			t.Fatalf("tr_seed refused, and seeding in the kernel")
		}
		mac, other := [6]byte{2, 0, 0, 0, 8, 0x31}, [6]byte{2, 0, 0, 0, 8, 0x32}
		keys := map[string]tracerMkey{
			"seeded":       {Ifindex: 5, Mac: mac, Family: unix.AF_INET},
			"another MAC":  {Ifindex: 5, Mac: other, Family: unix.AF_INET},
			"other family": {Ifindex: 5, Mac: mac, Family: unix.AF_INET6},
		}
		for _, k := range keys {
			v := tracerVia{State: uint8(tracerViaStateVIA_NONE), Epoch: 1}
			if err := tr.core.objs.ViaMacs.Update(raw(&k), raw(&v), ebpf.UpdateAny); err != nil {
				t.Fatal(err)
			}
		}
		e := SeedEntry{Ifindex: 5, Addr: netip.MustParseAddr("10.8.1.1"), State: unix.NUD_STALE, MAC: mac[:]}
		if n, missed, err := tr.Seed([]SeedEntry{e}); n != 1 || len(missed) != 0 || err != nil {
			t.Fatalf("refused %v: seeded %d, %d unmirrored: %v", refuse, n, len(missed), err)
		}
		for name, k := range keys {
			var v tracerVia
			err := tr.core.objs.ViaMacs.Lookup(raw(&k), raw(&v))
			if gone := errors.Is(err, ebpf.ErrKeyNotExist); gone != (name == "seeded") {
				t.Errorf("refused %v: the answer for the %s: dropped %v (%v), want %v", refuse, name, gone, err, name == "seeded")
			}
		}
	}
}
