package bpf

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
	"github.com/cilium/ebpf/features"
	"golang.org/x/sys/unix"
)

// Candidate is an entry whose own packets the tracer watches for: packets
// from Addr on Ifindex whose Ethernet source is not MAC.
type Candidate struct {
	Ifindex int
	Addr    netip.Addr
	MAC     net.HardwareAddr
}

// candidatesInMirror reports whether the kernel takes tr_candidates, so
// that the candidates can live in the mirror's values: it loads the
// program alone, against maps of one slot, and drops it. Where it does
// not (before 6.0, or refused on purpose), user space writes them entry
// by entry into source_candidates, as it may not rewrite the values the
// neighbour hooks write.
func candidatesInMirror(spec *ebpf.CollectionSpec, refuse []string, kernelBTF *btf.Cache) bool {
	if slices.Contains(refuse, "tr_candidates") || features.HaveProgramType(ebpf.Syscall) != nil {
		return false
	}
	probe := spec.Copy()
	for _, m := range probe.Maps {
		if m.Type == ebpf.Hash || m.Type == ebpf.PerCPUHash {
			m.MaxEntries = 1
		}
	}
	var o struct {
		P *ebpf.Program `ebpf:"tr_candidates"`
	}
	if err := probe.LoadAndAssign(&o, &ebpf.CollectionOptions{Cache: kernelBTF}); err != nil {
		return false
	}
	o.P.Close()
	return true
}

// eachCandidate calls fn for every candidate the maps hold: those in the
// mirror's values, and those in source_candidates. The caller holds t.mu.
func (t CandidateFilter) eachCandidate(fn func(k tracerNkey, c *tracerCand)) error {
	var k tracerNkey
	if t.candInMirror {
		var v tracerNval
		it := t.objs.NeighMirror.Iterate()
		for it.Next(&k, &v) {
			if v.C.On != 0 {
				fn(k, &v.C)
			}
		}
		if err := it.Err(); err != nil {
			return err
		}
	}
	var v tracerScand
	it := t.objs.SourceCandidates.Iterate()
	for it.Next(&k, &v) {
		fn(k, &v.C)
	}
	return it.Err()
}

// lookupCandidate reads candidate k: from the mirror's value, else from
// source_candidates. ok is false if neither holds it.
func (t CandidateFilter) lookupCandidate(k tracerNkey, c *tracerCand) (ok bool, err error) {
	if t.candInMirror {
		var v tracerNval
		switch err := t.objs.NeighMirror.Lookup(raw(&k), raw(&v)); {
		case err == nil && v.C.On != 0:
			*c = v.C
			return true, nil
		case err != nil && !errors.Is(err, ebpf.ErrKeyNotExist):
			return false, err
		}
	}
	var v tracerScand
	switch err := t.objs.SourceCandidates.Lookup(raw(&k), raw(&v)); {
	case err == nil:
		*c = v.C
		return true, nil
	case errors.Is(err, ebpf.ErrKeyNotExist):
		return false, nil
	default:
		return false, err
	}
}

// PruneCandidates removes the source-MAC candidates keep no longer
// wants. It walks the maps; the feed calls it after walking the table's
// candidates again (when the table lost track of its changes), and
// UpdateCandidates otherwise.
func (t CandidateFilter) PruneCandidates(keep func(ifindex int, addr netip.Addr) bool) error {
	var gone []Candidate
	t.mu.Lock()
	err := t.eachCandidate(func(k tracerNkey, _ *tracerCand) {
		if hk := k.hitKey(); !keep(hk.Ifindex, hk.Addr) {
			gone = append(gone, Candidate{Ifindex: hk.Ifindex, Addr: hk.Addr})
		}
	})
	t.mu.Unlock()
	if err != nil {
		return fmt.Errorf("walk source-MAC candidates: %w", err)
	}
	_, err = t.UpdateCandidates(gone)
	return err
}

// UpdateCandidates adds, changes or removes source-MAC candidates: one
// with a MAC is watched for packets from its address at another MAC, one
// without is no longer watched. A candidate already watched keeps what
// was seen of it; its MAC is its entry's (in the mirror), or the one
// given (one by one). Where the kernel took tr_candidates, a batch
// of 1,024 costs one syscall; else a new or removed candidate costs one
// map syscall, one already watched two or three. It reports how many
// candidates did not fit in the map.
func (t CandidateFilter) UpdateCandidates(cs []Candidate) (notWatched int, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	var errs []error
	slots, ifaces := false, false
	note := func(k tracerNkey, r tracerCandResult, err error) {
		switch r {
		case tracerCandResultCAND_ADDED, tracerCandResultCAND_REMOVED:
			d := int32(1)
			if r == tracerCandResultCAND_REMOVED {
				d = -1
			}
			delete(t.sightings, k) // counts from zero again
			slots = t.cands.slot(k, d) || slots
			idx := int(k.Ifindex)
			ifaces = t.cands.iface(idx, int(d)) || ifaces
			// tr_source runs where candidates are (an interface that
			// vanished under it is dropped there, and comes back here).
			if t.cands.ifaces[idx] > 0 {
				t.sourceIfaces[idx] = true
			} else {
				delete(t.sourceIfaces, idx)
			}
		case tracerCandResultCAND_FULL:
			notWatched++
		case tracerCandResultCAND_FAILED:
			if err == nil {
				err = errors.New("the kernel refused")
			}
			errs = append(errs, fmt.Errorf("remove source-MAC candidate %v: %w", k.hitKey(), err))
		}
	}
	if ok, err := t.candidatesInKernel(cs, note); !ok {
		t.candidatesEach(cs, note)
	} else if err != nil {
		errs = append(errs, err)
	}
	if notWatched > 0 {
		if t.candInMirror && t.seed.cand != nil {
			errs = append(errs, fmt.Errorf("%d source-MAC candidates not watched: not in the neighbour mirror (%d entries; full, or the entry not yet mirrored)", notWatched, t.objs.NeighMirror.MaxEntries()))
		} else {
			errs = append(errs, fmt.Errorf("source-MAC candidates map full (%d entries): %d candidates not watched", t.objs.SourceCandidates.MaxEntries(), notWatched))
		}
	}
	if slots {
		bloom := t.cands.sourceBloom()
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
		errs = append(errs, Hooks(t).syncSourceLinksLocked())
	}
	return notWatched, errors.Join(errs...)
}

// candidatesInKernel hands the candidates to tr_candidates a batch at a
// time and notes what became of each. ok is false, and nothing done,
// without tr_candidates.
func (t CandidateFilter) candidatesInKernel(cs []Candidate, note func(tracerNkey, tracerCandResult, error)) (ok bool, err error) {
	fill := func(off int, b []tracerSeedEntry) {
		for i := range b {
			c := &cs[off+i]
			b[i] = tracerSeedEntry{Key: nkeyOf(c.Ifindex, c.Addr)}
			if len(c.MAC) == 6 {
				b[i].Mac, b[i].HasMac = [6]byte(c.MAC), 1
			}
		}
	}
	read := func(b []tracerSeedEntry) error {
		for i := range b {
			r := tracerCandResult(b[i].Result)
			if r < tracerCandResultCAND_ADDED || r > tracerCandResultCAND_FAILED {
				return fmt.Errorf("entry %d of %d has no result (%d)", i, len(b), r)
			}
			note(b[i].Key, r, nil)
		}
		return nil
	}
	ok, err = Seeder(t).inBatches(func() *ebpf.Program { return t.seed.cand }, len(cs), fill, read)
	if err != nil {
		err = fmt.Errorf("update source-MAC candidates in the kernel: %w", err)
	}
	return ok, err
}

// candidatesEach updates the candidates one by one with map syscalls.
func (t CandidateFilter) candidatesEach(cs []Candidate, note func(tracerNkey, tracerCandResult, error)) {
	var k tracerNkey // declared once: handed over as a pointer, it lives on the heap
	var v, old tracerScand
	for _, c := range cs {
		k = nkeyOf(c.Ifindex, c.Addr)
		if len(c.MAC) != 6 {
			switch err := t.objs.SourceCandidates.Delete(raw(&k)); {
			case err == nil:
				note(k, tracerCandResultCAND_REMOVED, nil)
			case errors.Is(err, ebpf.ErrKeyNotExist):
				note(k, tracerCandResultCAND_ABSENT, nil)
			default:
				note(k, tracerCandResultCAND_FAILED, err)
			}
			continue
		}
		v = tracerScand{Mac: [6]byte(c.MAC)}
		err := t.objs.SourceCandidates.Update(raw(&k), raw(&v), ebpf.UpdateNoExist)
		if err == nil {
			note(k, tracerCandResultCAND_ADDED, nil)
			continue
		}
		if !errors.Is(err, ebpf.ErrKeyExist) {
			note(k, tracerCandResultCAND_FULL, nil)
			continue
		}
		if t.objs.SourceCandidates.Lookup(raw(&k), raw(&old)) == nil {
			if old.Mac == v.Mac {
				note(k, tracerCandResultCAND_KEPT, nil)
				continue
			}
			// A new MAC, and what was seen stays, as in the mirror,
			// whose candidates follow their entry's MAC. The hooks'
			// increments between the read and the write are lost.
			old.Mac = v.Mac
			v = old
		}
		if t.objs.SourceCandidates.Put(raw(&k), raw(&v)) != nil {
			note(k, tracerCandResultCAND_FULL, nil)
			continue
		}
		note(k, tracerCandResultCAND_CHANGED, nil)
	}
}

// candidateCounts is the candidate filter's own state: the source-MAC
// candidates are the map's, and these count them per filter slot and per
// interface, so a change costs O(1). Only this file uses it.
type candidateCounts struct {
	slots  [16384]int32
	bloom  []uint8     // the source filter as last written (sourceBloom)
	ifaces map[int]int // candidates per interface
}

// sourceBloom is the source filter the candidates make: a slot is set
// while some candidate hashes to it. It is one buffer, rewritten each
// time: a 16 KiB array returned by value grew the stack of every caller
// to 128 KiB (the copies through the embedding wrappers), and the
// goroutine that updates candidates kept it.
func (c *candidateCounts) sourceBloom() []uint8 {
	if c.bloom == nil {
		c.bloom = make([]uint8, len(c.slots))
	}
	for i, n := range c.slots {
		c.bloom[i] = 0
		if n > 0 {
			c.bloom[i] = 1
		}
	}
	return c.bloom
}

// slot counts a candidate in or out of its filter slot and reports
// whether the slot turned on or off.
func (c *candidateCounts) slot(k tracerNkey, d int32) bool {
	i := sourceSlot(k)
	was := c.slots[i] > 0
	c.slots[i] += d
	return was != (c.slots[i] > 0)
}

// iface counts a candidate in or out of its interface and reports
// whether the interface gained its first or lost its last.
func (c *candidateCounts) iface(ifindex int, d int) bool {
	n := c.ifaces[ifindex] + d
	if n > 0 {
		c.ifaces[ifindex] = n
		return n == d
	}
	delete(c.ifaces, ifindex)
	return true
}

// Candidates returns how many source-MAC candidates the map holds.
func (t CandidateFilter) Candidates() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, c := range t.cands.ifaces {
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

// BumpEpoch starts a new epoch: the programs announce each entry's hits
// and each candidate's sightings again, once, from now on. A candidate
// keeps the epoch's low byte, which a new one starts at 0: epochs whose
// low byte is 0 are skipped.
func (t CandidateFilter) BumpEpoch() error {
	var e uint32
	if err := t.objs.Epoch.Get(&e); err != nil {
		return err
	}
	e = nextEpoch(e)
	if t.feEpoch != nil {
		if err := t.feEpoch.Set(e); err != nil {
			return err
		}
	}
	return t.objs.Epoch.Set(e)
}

// nextEpoch is the epoch after e whose low byte is not 0.
func nextEpoch(e uint32) uint32 {
	e++
	if uint8(e) == 0 {
		e++
	}
	return e
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

// CandidatesInMirrorFrom is the first release whose kernel takes
// tr_candidates (a syscall program that loops over maps allocated on
// demand, which sleepable programs may use from 6.0), so that the
// source-MAC candidates live in the mirror's values rather than in a map
// of their own: what the tracer's maps cost per entry depends on it. The
// loader tries the program itself; this is for planning before it loads.
var CandidatesInMirrorFrom = [2]int{6, 0}
