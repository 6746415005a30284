package table

import (
	"hash/maphash"
	"net/netip"
	"unsafe"
)

// rec is one entry as the store keeps it: values only, no pointers, so
// the slabs that hold a million of them give the garbage collector
// nothing to scan and live outside the Go heap (store_unix.go). What
// was observed of the entry's host lives apart, on the Go heap, for the
// few entries that have some (store.obs, by slot; recObs says whether).
type rec struct {
	addr    [16]byte // As16 of the IP
	ifindex int32
	// since is when the current state began, in hundredths of a second
	// from the store's epoch, rounded down (store.cs).
	since int32

	// Milliseconds from the store's epoch (store.ms): the last
	// confirmation and use (NDA_CACHEINFO confirmed and used), and when
	// the entry got its current lladdr.
	confirm, used, llSince int32

	transitions uint32
	heapIdx     int32           // position in its interface's stale heap, -1 if none
	llChanges   uint16          // saturates at 65,535
	gen         uint16          // resync generation that last confirmed the entry
	mac         [inlineMAC]byte // the lladdr, when it fits

	macLen   uint8 // the lladdr's length; longMAC: in store.longMACs
	state    State
	flags    uint8
	flagsExt uint8 // NTF_EXT_* (the kernel defines bits 0 to 2)
	protocol uint8
	bits     uint8 // recLive, recLong, recMulti, recV4, the class (recClass), recObs
}

// inlineMAC is the longest lladdr kept in the record (Ethernet's 6
// bytes fit; InfiniBand's 20 go to store.longMACs).
const inlineMAC = 6

const longMAC = 0xff

// rec.bits.
const (
	recLive  = 1 << iota // the slot holds an entry
	recLong              // in the stale-long heap rather than the pending one
	recMulti             // counted in the multi-MAC aggregate
	recV4                // an IPv4 entry (addr holds its v4-mapped form)

	recClassShift      = 4
	recClass      byte = 7 << recClassShift // the class: five fit in three bits
	recObs        byte = 1 << 7             // store.obs holds evidence for the slot
)

func (r *rec) live() bool  { return r.bits&recLive != 0 }
func (r *rec) long() bool  { return r.bits&recLong != 0 }
func (r *rec) multi() bool { return r.bits&recMulti != 0 }
func (r *rec) is4() bool   { return r.bits&recV4 != 0 }

// observed reports whether something was observed of the entry's host.
func (r *rec) observed() bool { return r.bits&recObs != 0 }

func (r *rec) class() Class { return Class(r.bits&recClass) >> recClassShift }
func (r *rec) setClass(c Class) {
	r.bits = r.bits&^recClass | uint8(c)<<recClassShift&recClass
}

func (r *rec) setBit(b uint8, on bool) {
	if on {
		r.bits |= b
	} else {
		r.bits &^= b
	}
}

func (r *rec) ip() netip.Addr {
	if r.is4() {
		return netip.AddrFrom4([4]byte(r.addr[12:]))
	}
	return netip.AddrFrom16(r.addr)
}

func (r *rec) key() Key { return Key{Ifindex: r.ifindex, Addr: r.ip()} }

// is reports whether the record holds the key whose address is addr
// (As16) of the family is4 on ifindex: an IPv4 address and its
// v4-mapped IPv6 form share addr, and are two keys.
func (r *rec) is(addr [16]byte, ifindex int32, is4 bool) bool {
	return r.addr == addr && r.ifindex == ifindex && r.is4() == is4
}

func (r *rec) family() Family {
	if r.is4() {
		return FamilyInet
	}
	return FamilyInet6
}

// slotsPerSlab records make a slab: 64 Ki records, 3.75 MiB.
const slotsPerSlab = 1 << 16

// store holds the entries: records in slabs that never move (a *rec
// stays valid while its slot lives, under the table's lock), a free
// list, and an open-addressing index from key to slot. Its bytes grow
// with the entries and are given back when the table shrinks below a
// slab's worth.
type store struct {
	slabs [][]rec
	frees []func() // each slab's release
	free  []uint32 // free slots below top, most recently freed last
	top   uint32   // slots ever used: slabs hold [0, top)
	n     int      // live entries
	index index
	// obs holds what was observed of an entry's host, by slot, for the
	// records with recObs.
	obs map[uint32]*Observed
	// longMACs are the lladdrs longer than inlineMAC, by slot.
	longMACs map[uint32]string
	// next is the slot after the one getInOrder last found or made.
	next uint32
	// clk converts the records' times (mstime.go).
	clk timebase
}

func newStore() *store {
	s := &store{longMACs: map[uint32]string{}, obs: map[uint32]*Observed{}}
	s.index.init(64)
	s.clk.shift = s.shiftTimes
	return s
}

// release gives back the slabs and the index: when the table that owns
// the store is collected.
func (s *store) release() {
	for _, f := range s.frees {
		f()
	}
	s.slabs, s.frees = nil, nil
	s.index.release()
}

// at returns the record of a slot.
func (s *store) at(slot uint32) *rec {
	return &s.slabs[slot/slotsPerSlab][slot%slotsPerSlab]
}

// get returns the slot and record of k.
func (s *store) get(k Key) (uint32, *rec, bool) {
	slot, ok := s.index.find(s, k)
	if !ok {
		return 0, nil, false
	}
	return slot, s.at(slot), true
}

// getInOrder is get for a caller that walks the entries in the order
// they were inserted: a dump lists them in the kernel's hash order, the
// order the first dump inserted them in, so during a resync the entry
// asked for is most often in the slot after the last one. That slot is
// tried first, a sequential read instead of the index's two random ones
// (at a million entries, most of a resync's time in user space). On a
// miss it costs one compare more than get.
func (s *store) getInOrder(k Key) (uint32, *rec, bool) {
	if slot := s.next; slot < s.top {
		if r := s.at(slot); r.live() && r.is(k.Addr.As16(), k.Ifindex, k.Addr.Is4()) {
			s.next = slot + 1
			return slot, r, true
		}
	}
	slot, r, ok := s.get(k)
	if ok {
		s.next = slot + 1
	}
	return slot, r, ok
}

// insert makes a live record for k, which must not be in the store.
func (s *store) insert(k Key) (uint32, *rec) {
	slot, ok := s.popFree()
	if !ok {
		if int(s.top) == len(s.slabs)*slotsPerSlab {
			slab, release := allocRecs(slotsPerSlab)
			s.slabs = append(s.slabs, slab)
			s.frees = append(s.frees, release)
		}
		slot = s.top
		s.top++
	}
	r := s.at(slot)
	*r = rec{addr: k.Addr.As16(), ifindex: k.Ifindex, heapIdx: -1, bits: recLive,
		confirm: msNone, used: msNone, llSince: msNone}
	r.setBit(recV4, k.Addr.Is4())
	s.index.add(s, slot)
	s.n++
	s.next = slot + 1
	return slot, r
}

// popFree takes a free slot below the top. The free list may name slots
// that are past the top since they were freed, or were taken again by
// the top's growth since: those are dropped here.
func (s *store) popFree() (uint32, bool) {
	for n := len(s.free); n > 0; n-- {
		slot := s.free[n-1]
		s.free = s.free[:n-1]
		if slot < s.top && !s.at(slot).live() {
			return slot, true
		}
	}
	return 0, false
}

// remove frees a live slot and what hangs off it.
func (s *store) remove(slot uint32) {
	r := s.at(slot)
	s.index.del(s, slot)
	if r.observed() {
		delete(s.obs, slot)
	}
	if r.macLen == longMAC {
		delete(s.longMACs, slot)
	}
	*r = rec{}
	s.n--
	if slot != s.top-1 {
		s.free = append(s.free, slot)
		return
	}
	for s.top > 0 && !s.at(s.top-1).live() {
		s.top--
	}
	s.shrink()
}

// shrink gives back the slabs above the top, once the top is half a
// slab below the last one (so a table that breathes across a slab's
// edge does not map and unmap it each time), and drops the free slots
// above the top once they are most of the free list.
func (s *store) shrink() {
	if n := len(s.slabs); n > 1 && int(s.top)+slotsPerSlab/2 <= (n-1)*slotsPerSlab {
		keep := max(1, (int(s.top)+slotsPerSlab-1)/slotsPerSlab)
		for i := keep; i < n; i++ {
			s.frees[i]()
			s.slabs[i], s.frees[i] = nil, nil
		}
		s.slabs, s.frees = s.slabs[:keep], s.frees[:keep]
	}
	if dead := int(s.top) - s.n; len(s.free) > 2*dead+1024 {
		free := make([]uint32, 0, dead)
		for _, f := range s.free {
			if f < s.top && !s.at(f).live() {
				free = append(free, f)
			}
		}
		s.free = free
	}
}

// each calls fn for every live slot, in slot order, until fn returns
// false. fn may remove the slot it is given, no other.
func (s *store) each(fn func(slot uint32, r *rec) bool) { s.walk(0, fn) }

// walk calls fn for every live slot from from on, in slot order, until
// fn returns false, and returns the slot fn stopped at (0 when it walked
// to the end). Every scan of the slabs goes through it, so their bound,
// the top, is kept in one place: past it there may be no slab at all
// (a table that never held an entry, or a full one at a slab's edge).
// fn may remove the slot it is given, no other.
func (s *store) walk(from uint32, fn func(slot uint32, r *rec) bool) uint32 {
	for slot := from; slot < s.top; slot++ {
		if r := s.at(slot); r.live() && !fn(slot, r) {
			return slot
		}
	}
	return 0
}

// lladdr returns a record's lladdr as raw bytes in a string.
func (s *store) lladdr(slot uint32, r *rec) string {
	if r.macLen == longMAC {
		return s.longMACs[slot]
	}
	return string(r.mac[:r.macLen])
}

// macIs reports whether an entry's lladdr is mac (raw bytes), without
// allocating.
func (s *store) macIs(le ent, mac string) bool {
	if le.macLen == longMAC {
		return s.longMACs[le.slot] == mac
	}
	return len(mac) == int(le.macLen) && string(le.mac[:le.macLen]) == mac
}

// setLLAddr sets a record's lladdr.
func (s *store) setLLAddr(slot uint32, r *rec, mac []byte) {
	if r.macLen == longMAC {
		delete(s.longMACs, slot)
	}
	if len(mac) > inlineMAC {
		r.macLen, r.mac = longMAC, [inlineMAC]byte{}
		s.longMACs[slot] = string(mac)
		return
	}
	r.macLen = uint8(len(mac))
	r.mac = [inlineMAC]byte{}
	copy(r.mac[:], mac)
}

// observed returns what was observed of an entry's host, for reading: never
// nil, never to be written through.
func (s *store) observed(le ent) *Observed {
	if !le.observed() {
		return &noObserved
	}
	return s.obs[le.slot]
}

// observe returns what was observed of an entry's host, for writing, making it
// on first use.
func (s *store) observe(le ent) *Observed {
	if le.observed() {
		return s.obs[le.slot]
	}
	o := &Observed{}
	s.obs[le.slot] = o
	le.bits |= recObs
	return o
}

// bytes is the memory the store holds: the slabs' slots up to the top
// (the pages above it are mapped but never touched, so they cost no
// memory), the index, the free list and the evidence of the entries that
// have some.
func (s *store) bytes() int {
	b := int(s.top)*int(unsafe.Sizeof(rec{})) + s.index.bytes()
	// A map entry of obs: its key, its pointer and a control byte.
	b += cap(s.free)*4 + len(s.obs)*(4+8+1+int(unsafe.Sizeof(Observed{})))
	return b
}

// index maps keys to slots: open addressing with linear probing over a
// power-of-two array of slot+1 (0: empty), at most 3/4 full, deletion by
// backward shift (no tombstones). The array lives outside the Go heap
// with the slabs. Keys hash with a seed of the table's own, so no one can
// choose addresses that collide.
type index struct {
	seed    maphash.Seed
	slots   []uint32
	release func()
	n       int
}

// hkey is what the index hashes of a key.
type hkey struct {
	addr    [16]byte
	ifindex int32
	is4     bool
}

func (x *index) init(size int) {
	x.seed = maphash.MakeSeed()
	x.slots, x.release = allocSlots(size)
}

func (x *index) home(addr [16]byte, ifindex int32, is4 bool) uint32 {
	return uint32(maphash.Comparable(x.seed, hkey{addr, ifindex, is4})) & uint32(len(x.slots)-1)
}

func (x *index) find(s *store, k Key) (uint32, bool) {
	addr, is4 := k.Addr.As16(), k.Addr.Is4()
	mask := uint32(len(x.slots) - 1)
	for i := x.home(addr, k.Ifindex, is4); ; i = (i + 1) & mask {
		v := x.slots[i]
		if v == 0 {
			return 0, false
		}
		if r := s.at(v - 1); r.is(addr, k.Ifindex, is4) {
			return v - 1, true
		}
	}
}

func (x *index) add(s *store, slot uint32) {
	if (x.n+1)*4 > len(x.slots)*3 {
		x.grow(s)
	}
	x.place(s.at(slot), slot)
	x.n++
}

func (x *index) place(r *rec, slot uint32) {
	mask := uint32(len(x.slots) - 1)
	i := x.home(r.addr, r.ifindex, r.is4())
	for x.slots[i] != 0 {
		i = (i + 1) & mask
	}
	x.slots[i] = slot + 1
}

func (x *index) grow(s *store) {
	old, release := x.slots, x.release
	x.slots, x.release = allocSlots(2 * len(old))
	for _, v := range old {
		if v != 0 {
			x.place(s.at(v-1), v-1)
		}
	}
	release()
}

// del removes slot, which the index holds, and shifts back the entries
// after it that probed past it.
func (x *index) del(s *store, slot uint32) {
	mask := uint32(len(x.slots) - 1)
	r := s.at(slot)
	i := x.home(r.addr, r.ifindex, r.is4())
	for x.slots[i] != slot+1 {
		i = (i + 1) & mask
	}
	x.n--
	for j := (i + 1) & mask; ; j = (j + 1) & mask {
		v := x.slots[j]
		if v == 0 {
			break
		}
		o := s.at(v - 1)
		h := x.home(o.addr, o.ifindex, o.is4())
		// v may move to i if its home is not in (i, j] cyclically.
		if (j > i && (h <= i || h > j)) || (j < i && h <= i && h > j) {
			x.slots[i] = v
			i = j
		}
	}
	x.slots[i] = 0
}

func (x *index) bytes() int { return len(x.slots) * 4 }
