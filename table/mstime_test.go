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
	if m := st.ms(0); m != msNone || st.ns(m) != 0 {
		t.Fatalf("zero time: ms %d, back %d", m, st.ns(m))
	}
	base := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC).UnixNano()
	if m := st.ms(base); m != 0 {
		t.Fatalf("the first time stored is the epoch: ms %d", m)
	}
	roundTrip := func(ns int64) int64 {
		t.Helper()
		back := st.ns(st.ms(ns))
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
	oldest := st.ns(msNone + 1)
	if got := st.ns(st.ms(base - int64(40*24*time.Hour))); got != oldest {
		t.Fatalf("a time 40 days before the epoch reads %d, want the oldest held, %d", got, oldest)
	}

	// Records holding times before a rebase.
	k := func(i byte) Key { return Key{Ifindex: 1, Addr: netip.AddrFrom4([4]byte{10, 0, 0, i})} }
	_, a := st.insert(k(1))
	_, b := st.insert(k(2))
	_, c := st.insert(k(3))
	a.llSince, a.confirm = st.ms(base+int64(time.Hour)), st.ms(base-int64(time.Hour))
	b.llSince = st.ms(base - int64(40*24*time.Hour)) // clamped
	wantA, wantAC := st.ns(a.llSince), st.ns(a.confirm)
	epoch := st.epoch
	now := base + int64(13*24*time.Hour) // past msRebaseAfter
	if back := roundTrip(now); back < now {
		t.Fatalf("now reads %d before it", back)
	}
	if st.epoch == epoch {
		t.Fatalf("no rebase at 13 days past the epoch")
	}
	if st.ns(a.llSince) != wantA || st.ns(a.confirm) != wantAC {
		t.Errorf("after the rebase: llSince %d confirm %d, want %d %d", st.ns(a.llSince), st.ns(a.confirm), wantA, wantAC)
	}
	if b.llSince != msNone+1 {
		t.Errorf("a clamped time is %d after the rebase, want the oldest held", b.llSince)
	}
	if c.used != msNone || st.ns(c.used) != 0 {
		t.Errorf("an unset time is %d after the rebase, want unset", c.used)
	}
	if now-st.epoch > int64(msRebaseAfter) || now-st.epoch < int64(msRebaseTo) {
		t.Errorf("epoch %v before now after the rebase", time.Duration(now-st.epoch))
	}
}

// TestRecordSize: the record is the store's bytes per entry; a field
// added in the wrong place pads it. 72 bytes: 1,000,000 entries hold
// 69 MiB of records.
func TestRecordSize(t *testing.T) {
	if n := unsafe.Sizeof(rec{}); n != 72 {
		t.Errorf("rec is %d bytes, want 72", n)
	}
}
