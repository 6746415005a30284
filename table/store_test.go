package table

import (
	"math/rand/v2"
	"net/netip"
	"testing"
)

// TestStoreAgainstAMap: a random run of inserts, removals and lookups
// finds in the store exactly what a Go map of the same keys holds, the
// index's backward-shift deletion included, across growth, shrinking
// and slot reuse.
func TestStoreAgainstAMap(t *testing.T) {
	st := newStore()
	defer st.release()
	model := map[Key]uint32{} // key -> the ifindex-independent tag kept in rec.transitions
	rng := rand.New(rand.NewPCG(1, 2))
	key := func() Key {
		i := rng.IntN(3 * slotsPerSlab)
		if i%3 == 0 {
			return Key{Ifindex: int32(i % 7), Addr: netip.AddrFrom16([16]byte{0xfe, 0x80, 15: byte(i), 14: byte(i >> 8), 13: byte(i >> 16)})}
		}
		return Key{Ifindex: int32(i % 7), Addr: netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)})}
	}
	check := func(k Key) {
		want, in := model[k]
		_, r, ok := st.get(k)
		if ok != in || (ok && (r.transitions != want || r.key() != k)) {
			t.Fatalf("get(%v) = %v (%+v), model says %v %d", k, ok, r, in, want)
		}
	}
	for i := range 400_000 {
		k := key()
		switch _, in := model[k]; {
		case !in && (i < 250_000 || rng.IntN(4) == 0):
			_, r := st.insert(k)
			r.transitions = uint32(i)
			model[k] = uint32(i)
		case in && (i >= 250_000 || rng.IntN(3) == 0):
			slot, _, _ := st.get(k)
			st.remove(slot)
			delete(model, k)
		}
		check(k)
		check(key())
	}
	if st.n != len(model) || st.index.n != len(model) {
		t.Fatalf("store holds %d (index %d), model %d", st.n, st.index.n, len(model))
	}
	seen := 0
	st.each(func(slot uint32, r *rec) bool {
		if model[r.key()] != r.transitions {
			t.Fatalf("slot %d holds %v, not in the model", slot, r.key())
		}
		seen++
		return true
	})
	if seen != len(model) {
		t.Fatalf("each saw %d entries, model holds %d", seen, len(model))
	}
}

// TestStoreShrinks: a table that grew to several slabs and lost its
// entries gives the slabs back.
func TestStoreShrinks(t *testing.T) {
	st := newStore()
	defer st.release()
	var slots []uint32
	for i := range 3 * slotsPerSlab {
		slot, _ := st.insert(Key{Ifindex: 1, Addr: netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)})})
		slots = append(slots, slot)
	}
	grown := st.bytes()
	if len(st.slabs) != 3 {
		t.Fatalf("%d slabs for %d entries", len(st.slabs), 3*slotsPerSlab)
	}
	for _, slot := range slots[10:] {
		st.remove(slot)
	}
	if len(st.slabs) != 1 || st.bytes() >= grown/2 {
		t.Fatalf("after removing all but 10 entries: %d slabs, %d bytes (grown: %d)", len(st.slabs), st.bytes(), grown)
	}
	for i, slot := range slots[:10] {
		if r := st.at(slot); !r.live() || r.key().Addr != netip.AddrFrom4([4]byte{10, 0, 0, byte(i)}) {
			t.Fatalf("entry %d lost in the shrink", i)
		}
	}
	// Growing again past the old top reuses no slot twice, though the
	// free list named slots that the top's shrink left behind.
	owner := map[uint32]Key{}
	st.each(func(slot uint32, r *rec) bool { owner[slot] = r.key(); return true })
	for i := range 2 * slotsPerSlab {
		k := Key{Ifindex: 2, Addr: netip.AddrFrom4([4]byte{11, byte(i >> 16), byte(i >> 8), byte(i)})}
		slot, _ := st.insert(k)
		if o, taken := owner[slot]; taken {
			t.Fatalf("slot %d given to %v while %v holds it", slot, k, o)
		}
		owner[slot] = k
	}
	for slot, k := range owner {
		if got, _, ok := st.get(k); !ok || got != slot {
			t.Fatalf("%v: slot %d, %v; want %d", k, got, ok, slot)
		}
	}
}

// TestLongLLAddr: an lladdr longer than the record holds (InfiniBand's
// 20 bytes) is kept whole, compared, replaced and forgotten with its
// entry.
func TestLongLLAddr(t *testing.T) {
	tb, _ := newTestTable(0)
	ib := make([]byte, 20)
	for i := range ib {
		ib[i] = byte(i + 1)
	}
	ip := netip.MustParseAddr("10.9.0.1")
	k := Key{Ifindex: 4, Addr: ip}
	tb.Apply(CauseNetlink, Update{Ifindex: 4, Family: FamilyInet, Addr: ip, State: StateReachable, LLAddr: ib})
	if e, ok := tb.Lookup(k); !ok || e.LLAddr != string(ib) {
		t.Fatalf("lookup = %q, %v; want the 20-byte lladdr", e.LLAddr, ok)
	}
	if !tb.Heard(k, ib, coreOf(tb).now()) {
		t.Error("the entry's own 20-byte MAC was not recognised")
	}
	tb.Apply(CauseNetlink, Update{Ifindex: 4, Family: FamilyInet, Addr: ip, State: StateReachable, LLAddr: []byte{2, 0, 0, 0, 0, 1}})
	if e, _ := tb.Lookup(k); e.LLAddr != string([]byte{2, 0, 0, 0, 0, 1}) || e.LLAddrChanges != 1 {
		t.Fatalf("after a change to a 6-byte lladdr: %x, %d changes", e.LLAddr, e.LLAddrChanges)
	}
	if len(coreOf(tb).st.longMACs) != 0 {
		t.Errorf("the long lladdr is still kept: %v", coreOf(tb).st.longMACs)
	}
}

// TestRangeWalksEveryEntryOnce: a walk in batches sees each entry once,
// and one that deletes between batches never sees a deleted one.
func TestRangeWalksEveryEntryOnce(t *testing.T) {
	tb, _ := newTestTable(0)
	const n = 1000
	var us []Update
	for i := range n {
		us = append(us, Update{Ifindex: 2, Family: FamilyInet, Addr: netip.AddrFrom4([4]byte{10, 0, byte(i >> 8), byte(i)}), State: StateStale, LLAddr: []byte{2, 0, 0, 0, byte(i >> 8), byte(i)}})
	}
	tb.Apply(CauseNetlink, us...)
	seen := map[Key]int{}
	batches := 0
	for from := uint32(0); ; batches++ {
		from = tb.Range(from, 64, func(e *Entry) {
			seen[e.Key]++
			if e.LLAddr[5] != e.Addr.As4()[3] {
				t.Fatalf("%v has lladdr %x", e.Addr, e.LLAddr)
			}
		})
		if batches == 3 { // delete the third quarter meanwhile, below the top slot
			tb.Apply(CauseNetlink, deletes(us[n/2:3*n/4])...)
		}
		if from == 0 {
			break
		}
	}
	if batches < n/2/64 {
		t.Errorf("%d batches of at most 64", batches)
	}
	for k, c := range seen {
		if c != 1 {
			t.Errorf("%v seen %d times", k, c)
		}
	}
	// The first four batches (256 entries, in slot order) lie in the
	// first half, so the third quarter was deleted before the walk
	// reached any of it: none of it may be seen, and every other entry
	// once. (Deleted from the middle, its slots stay below the store's
	// top, so the walk passes them.)
	for i, u := range us {
		k := Key{Ifindex: 2, Addr: u.Addr}
		deleted := i >= n/2 && i < 3*n/4
		if !deleted && seen[k] != 1 {
			t.Errorf("%v, never deleted, seen %d times", u.Addr, seen[k])
		}
		if deleted && seen[k] != 0 {
			t.Errorf("%v, deleted before the walk reached it, was seen", u.Addr)
		}
	}
}

func deletes(us []Update) []Update {
	out := make([]Update, len(us))
	for i, u := range us {
		out[i] = Update{Delete: true, Ifindex: u.Ifindex, Family: u.Family, Addr: u.Addr}
	}
	return out
}

// TestGetInOrder: the in-order lookup finds what get finds, whether the
// slot after the last one holds the key asked for, another key that
// differs only in its interface or family, a freed record, or nothing;
// and a walk in insertion order is answered from the next slot.
func TestGetInOrder(t *testing.T) {
	st := newStore()
	defer st.release()
	v4 := func(i int) netip.Addr { return netip.AddrFrom4([4]byte{10, 1, byte(i >> 8), byte(i)}) }
	var keys []Key
	for i := range 1000 {
		k := Key{Ifindex: 2, Addr: v4(i)}
		switch i % 10 {
		case 3: // same address on another interface
			k.Ifindex = 3
		case 7: // the v4-mapped IPv6 address of an IPv4 one: As16 alike
			k.Addr = netip.AddrFrom16(v4(i - 1).As16())
		}
		keys = append(keys, k)
		st.insert(k)
	}
	for i := 0; i < len(keys); i += 50 {
		slot, _, _ := st.get(keys[i])
		st.remove(slot)
	}
	// The keys that may sit in the next slot without being asked for.
	probes := func(k Key) []Key {
		other := k
		other.Ifindex++
		mapped := Key{Ifindex: k.Ifindex, Addr: netip.AddrFrom16(k.Addr.As16())}
		if k.Addr.Is4In6() {
			mapped.Addr = k.Addr.Unmap()
		}
		return []Key{k, other, mapped}
	}
	check := func(k Key) {
		ws, wr, wok := st.get(k)
		gs, gr, gok := st.getInOrder(k)
		if gok != wok || gs != ws || gr != wr {
			t.Fatalf("getInOrder(%v) = %d %v, get = %d %v", k, gs, gok, ws, wok)
		}
		if gok && gr.key() != k {
			t.Fatalf("getInOrder(%v) returned the record of %v", k, gr.key())
		}
	}
	// Each key in the next slot, asked for itself and for its near
	// misses; then the freed slots and the past-the-top one next.
	for _, k := range keys {
		if slot, _, ok := st.get(k); ok {
			for _, p := range probes(k) {
				st.next = slot
				check(p)
			}
		}
	}
	for _, k := range keys {
		for _, next := range []uint32{0, 50, st.top} {
			for _, p := range probes(k) {
				st.next = next
				check(p)
			}
		}
	}
	// A walk in insertion order: every live key is in the next slot but
	// those right after a freed one (slots 1, 51, 101, ...).
	st.next = 0
	hits := 0
	for _, k := range keys {
		want := st.next
		slot, _, ok := st.getInOrder(k)
		if ok && slot == want {
			hits++
		}
	}
	if want := st.n - len(keys)/50; hits != want {
		t.Fatalf("a walk in order found %d of %d live entries in the next slot, want %d", hits, st.n, want)
	}
}

// TestEvidenceLeavesWithItsSlot: what was observed of a host is kept by
// its entry's slot, copied out with the entry, and gone with it: the
// next entry in the same slot starts with nothing observed.
func TestEvidenceLeavesWithItsSlot(t *testing.T) {
	st := newStore()
	defer st.release()
	a := Key{Ifindex: 2, Addr: netip.MustParseAddr("10.0.0.1")}
	b := Key{Ifindex: 2, Addr: netip.MustParseAddr("10.0.0.2")}
	slot, _ := st.insert(a)
	// An entry above a's slot, so that a's removal puts the slot on the
	// free list instead of lowering the top.
	st.insert(Key{Ifindex: 2, Addr: netip.MustParseAddr("10.0.0.10")})
	st.observe(st.ent(slot)).SourcePackets = 5
	if e := st.entry(slot, st.at(slot)); e.Observed().SourcePackets != 5 {
		t.Fatalf("the entry's copy has %d source packets, want 5", e.Observed().SourcePackets)
	}
	st.remove(slot)
	if len(st.obs) != 0 {
		t.Fatalf("%d hosts' evidence kept after their entry left", len(st.obs))
	}
	again, _ := st.insert(b)
	if again != slot {
		t.Fatalf("b took slot %d, not the freed %d", again, slot)
	}
	if le := st.ent(again); le.observed() || st.observed(le).SourcePackets != 0 {
		t.Errorf("a new entry in a freed slot inherited evidence: %+v", *st.observed(le))
	}
}

// TestWalksDoNotAllocate: Range and Candidates hand out views of the
// table's own records; walking 1,000 STALE entries (a 20-byte lladdr
// among them) allocates nothing per entry, where a string per entry made
// 1.5 MB of garbage at a start with 100,000.
func TestWalksDoNotAllocate(t *testing.T) {
	tb, _ := newTestTable(0)
	for i := range 1000 {
		mac := []byte{2, 0, 0, 0, byte(i >> 8), byte(i)}
		if i == 500 {
			mac = make([]byte, 20)
			mac[0] = 1
		}
		ip := netip.AddrFrom4([4]byte{10, 1, byte(i >> 8), byte(i)})
		tb.Apply(CauseNetlink, upd(3, ip, StateStale, mac))
	}
	n, macs, batches := 0, 0, 0
	allocs := testing.AllocsPerRun(5, func() {
		n, macs, batches = 0, 0, 0
		for from := uint32(0); ; {
			batches++
			from = tb.Range(from, 128, func(e *Entry) {
				n++
				if len(e.LLAddr) > 0 {
					macs++
				}
			})
			if from == 0 {
				break
			}
		}
	})
	if n != 1000 || macs != 1000 {
		t.Fatalf("Range saw %d entries, %d with an lladdr; want 1,000 of each", n, macs)
	}
	// Each call's Entry, which fn may not keep, escapes to the heap: one
	// allocation a batch, none an entry.
	if allocs > float64(batches) {
		t.Errorf("Range over 1,000 entries in %d batches: %.0f allocations, want at most %d", batches, allocs, batches)
	}
	allocs = testing.AllocsPerRun(5, func() {
		n = 0
		for from := uint32(0); ; {
			from = tb.Candidates(from, 128, func(k Key, lladdr string) {
				if lladdr != "" {
					n++
				}
			})
			if from == 0 {
				break
			}
		}
	})
	if n != 1000 {
		t.Fatalf("Candidates gave %d lladdrs, want 1,000", n)
	}
	// A walk from 0 makes the map that keeps the changes after it: one
	// allocation a walk, none an entry.
	if allocs > 1 {
		t.Errorf("Candidates over 1,000 entries: %.0f allocations, want at most 1", allocs)
	}
}
