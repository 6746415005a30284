package table

import (
	"net/netip"
	"testing"
	"time"
	"unsafe"
)

// TestMSTime: a record's millisecond times read back at most a
// millisecond later than they were, never earlier; keep their order; a
// zero time stays zero; a time older than the range reads as the oldest
// the range holds; and a rebase, when now runs past the range, moves
// the epoch without changing any time it can hold.
func TestMSTime(t *testing.T) {
	st := newStore()
	defer st.release()
	if m := st.clk.ms(0); m != msNone || st.clk.ns(m) != 0 {
		t.Fatalf("zero time: ms %d, back %d", m, st.clk.ns(m))
	}
	base := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC).UnixNano()
	if m := st.clk.ms(base); m != 0 {
		t.Fatalf("the first time stored is the epoch: ms %d", m)
	}
	roundTrip := func(ns int64) int64 {
		t.Helper()
		back := st.clk.ns(st.clk.ms(ns))
		if d := back - ns; d < 0 || d >= int64(time.Millisecond) {
			t.Fatalf("%d reads back as %d (%+d ns): want within a millisecond after", ns, back, d)
		}
		return back
	}
	last := int64(0)
	for _, d := range []time.Duration{-23 * 24 * time.Hour, -time.Hour, -1500 * time.Microsecond, -time.Millisecond,
		-1, 0, 1, time.Millisecond, time.Millisecond + 1, time.Hour, 11 * 24 * time.Hour} {
		back := roundTrip(base + int64(d))
		if back < last {
			t.Fatalf("order lost at %v: %d after %d", d, back, last)
		}
		last = back
	}
	oldest := st.clk.ns(msNone + 1)
	if got := st.clk.ns(st.clk.ms(base - int64(40*24*time.Hour))); got != oldest {
		t.Fatalf("a time 40 days before the epoch reads %d, want the oldest held, %d", got, oldest)
	}

	// Records holding times before a rebase.
	k := func(i byte) Key { return Key{Ifindex: 1, Addr: netip.AddrFrom4([4]byte{10, 0, 0, i})} }
	_, a := st.insert(k(1))
	_, b := st.insert(k(2))
	_, c := st.insert(k(3))
	a.llSince, a.confirm = st.clk.ms(base+int64(time.Hour)), st.clk.ms(base-int64(time.Hour))
	b.llSince = st.clk.ms(base - int64(40*24*time.Hour)) // clamped
	wantA, wantAC := st.clk.ns(a.llSince), st.clk.ns(a.confirm)
	epoch := st.clk.epoch
	now := base + int64(13*24*time.Hour) // past msRebaseAfter
	if back := roundTrip(now); back < now {
		t.Fatalf("now reads %d before it", back)
	}
	if st.clk.epoch == epoch {
		t.Fatalf("no rebase at 13 days past the epoch")
	}
	if st.clk.ns(a.llSince) != wantA || st.clk.ns(a.confirm) != wantAC {
		t.Errorf("after the rebase: llSince %d confirm %d, want %d %d", st.clk.ns(a.llSince), st.clk.ns(a.confirm), wantA, wantAC)
	}
	if b.llSince != msNone+1 {
		t.Errorf("a clamped time is %d after the rebase, want the oldest held", b.llSince)
	}
	if c.used != msNone || st.clk.ns(c.used) != 0 {
		t.Errorf("an unset time is %d after the rebase, want unset", c.used)
	}
	if now-st.clk.epoch > int64(msRebaseAfter) || now-st.clk.epoch < int64(msRebaseTo) {
		t.Errorf("epoch %v before now after the rebase", time.Duration(now-st.clk.epoch))
	}
}

// TestRecordSize: the record is the store's bytes per entry; a field
// added in the wrong place pads it. 60 bytes: 1,000,000 entries hold
// 57 MiB of records.
func TestRecordSize(t *testing.T) {
	if n := unsafe.Sizeof(rec{}); n != 60 {
		t.Errorf("rec is %d bytes, want 60", n)
	}
}

// TestCSTime: the state's start, kept in hundredths of a second, reads
// back at most 10 ms earlier, never later; holds states 200 days old
// (where milliseconds would clamp at 24.8 days); shifts exactly with
// its record's millisecond times in a rebase.
func TestCSTime(t *testing.T) {
	st := newStore()
	defer st.release()
	base := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC).UnixNano()
	st.clk.ms(base)
	for _, d := range []time.Duration{-200 * 24 * time.Hour, -30 * 24 * time.Hour, -time.Hour, -15 * time.Millisecond,
		-time.Millisecond, 0, 1, 10 * time.Millisecond, 11 * time.Millisecond, 11 * 24 * time.Hour} {
		ns := base + int64(d)
		if back := st.clk.csNS(st.clk.cs(ns)); ns-back < 0 || ns-back >= int64(10*time.Millisecond) {
			t.Errorf("%v from the epoch reads back %+d ns off: want within 10 ms before", d, back-ns)
		}
	}
	_, r := st.insert(Key{Ifindex: 1, Addr: netip.AddrFrom4([4]byte{10, 0, 0, 1})})
	r.since = st.clk.cs(base - int64(100*24*time.Hour))
	r.llSince = st.clk.ms(base - int64(time.Hour) + 3*int64(time.Millisecond))
	since, ll := st.clk.csNS(r.since), st.clk.ns(r.llSince)
	epoch := st.clk.epoch
	st.clk.ms(base + int64(13*24*time.Hour)) // rebases
	if st.clk.epoch == epoch {
		t.Fatal("no rebase at 13 days past the epoch")
	}
	if got := st.clk.csNS(r.since); got != since {
		t.Errorf("a state 100 days old began at %d before the rebase, %d after", since, got)
	}
	if got := st.clk.ns(r.llSince); got != ll {
		t.Errorf("the lladdr's time %d before the rebase, %d after", ll, got)
	}
}

// TestRecordBits: the bits packed in a record's last byte do not disturb
// each other: every class reads back as set, with the flags kept.
func TestRecordBits(t *testing.T) {
	var r rec
	for _, flags := range []uint8{0, recLive | recLong | recMulti | recV4 | recObs} {
		r.bits = flags
		for c := ClassOK; c <= ClassStuck; c++ {
			r.setClass(c)
			if r.class() != c || r.bits&^recClass != flags {
				t.Fatalf("flags %08b, class %v: reads class %v, bits %08b", flags, c, r.class(), r.bits)
			}
		}
	}
}
