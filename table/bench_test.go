package table

import (
	"fmt"
	"net"
	"net/netip"
	"runtime"
	"testing"
	"time"
	"unsafe"
)

func benchUpdates(n int, state State) []Update {
	us := make([]Update, n)
	for i := range us {
		us[i] = Update{
			Family: FamilyInet, Ifindex: int32(1 + i%4), State: state,
			Addr:   netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}),
			LLAddr: net.HardwareAddr{2, 0, byte(i >> 16), byte(i >> 8), byte(i), 1}, HasCacheInfo: true,
		}
	}
	return us
}

// BenchmarkApply measures applying state changes to a table of 100k
// entries: each op flips one entry between STALE and REACHABLE, the worst
// case (heap insert and removal every time).
func BenchmarkApply(b *testing.B) {
	tb := New(time.Minute, nil)
	us := benchUpdates(100_000, StateStale)
	tb.Apply(CauseNetlink, us...)
	flip := [2]State{StateReachable, StateStale}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		u := us[i%len(us)]
		u.State = flip[(i/len(us))%2]
		tb.Apply(CauseNetlink, u)
	}
}

// BenchmarkStats measures what a scrape costs the table, with 1k and 100k
// entries: it must not grow with the number of entries.
func BenchmarkStats(b *testing.B) {
	for _, n := range []int{1_000, 100_000} {
		b.Run(fmt.Sprintf("entries=%d", n), func(b *testing.B) {
			tb := New(time.Minute, nil)
			tb.Apply(CauseNetlink, benchUpdates(n, StateStale)...)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				_ = tb.Stats(100)
			}
		})
	}
}

// BenchmarkLiveHeapPerEntry reports what a STALE entry costs (bytes/entry):
// the Go heap it adds after a forced collection, plus the table's own
// memory outside the heap (Bytes: the record slabs and the index), the
// measure behind the agent's RSS on a large L2 domain. heap-bytes/entry
// is the Go heap's part alone: what the collector has to mind.
//
//	go test ./table -run '^$' -bench LiveHeapPerEntry -benchtime 3x
func BenchmarkLiveHeapPerEntry(b *testing.B) {
	const n = 100_000
	us := benchUpdates(n, StateStale)
	var perEntry, heapPerEntry float64
	for range b.N {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		tb := New(time.Minute, nil)
		tb.Apply(CauseNetlink, us...)
		runtime.GC()
		runtime.ReadMemStats(&after)
		heap := float64(after.HeapAlloc) - float64(before.HeapAlloc)
		heapPerEntry = heap / n
		perEntry = (heap + float64(tb.Bytes())) / n
		runtime.KeepAlive(tb)
	}
	b.ReportMetric(perEntry, "bytes/entry")
	b.ReportMetric(heapPerEntry, "heap-bytes/entry")
	b.ReportMetric(float64(unsafe.Sizeof(rec{})), "bytes/record")
}

// BenchmarkResync measures a periodic resync of an unchanged table: a
// dump's worth of updates, in the order the first dump inserted them,
// between BeginSync and EndSync. ns/entry is per dumped entry.
//
//	go test ./table -run '^$' -bench Resync -benchtime 5x
func BenchmarkResync(b *testing.B) {
	for _, n := range []int{100_000, 1_000_000} {
		b.Run(fmt.Sprintf("entries=%d", n), func(b *testing.B) {
			tb := New(time.Minute, nil)
			us := benchUpdates(n, StateStale)
			tb.BeginSync(true)
			tb.Apply(CauseNetlink, us...)
			tb.EndSync()
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				tb.BeginSync(false)
				for i := 0; i < len(us); i += 256 {
					tb.Apply(CauseNetlink, us[i:min(i+256, len(us))]...)
				}
				if d := tb.EndSync(); d != 0 {
					b.Fatalf("resync deleted %d entries", d)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/entry")
		})
	}
}

// BenchmarkPromotionStorm measures the advance in which a table filled
// at once crosses the stale threshold together: n STALE entries whose
// states began over the same 30 s (as a table the kernel filled in a
// burst, reported with its ages), all promoted in one advance.
func BenchmarkPromotionStorm(b *testing.B) {
	for _, n := range []int{100_000, 1_000_000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			us := benchUpdates(n, StateStale)
			for i := range us {
				us[i].UpdatedAge = time.Duration(i*7919%30_000) * time.Millisecond // in no order, as a dump gives them
			}
			b.ReportAllocs()
			for b.Loop() {
				b.StopTimer()
				tb, c := newTestTable(time.Minute)
				tb.Apply(CauseNetlink, us...)
				c.advance(2 * time.Minute)
				b.StartTimer()
				if got := tb.Advance(); got != n {
					b.Fatalf("%d promoted, want %d", got, n)
				}
			}
		})
	}
}

// BenchmarkGradualCrossing measures a table crossing the threshold as
// the agent saw it at 1,000,000 entries: on one interface, states that
// began over 5 s (a table seeded as the kernel filled it), advanced every
// 100 ms, so that each advance promotes a fiftieth of the table. A pass
// over the whole young heap for each of those (as e00f5ff took) is a
// storm's cost paid 50 times.
func BenchmarkGradualCrossing(b *testing.B) {
	const spread, step = 5 * time.Second, 100 * time.Millisecond
	for _, n := range []int{100_000, 1_000_000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			us := benchUpdates(n, StateStale)
			for i := range us {
				us[i].UpdatedAge = time.Duration(i*7919) % spread // in no order, as a dump gives them
				us[i].Ifindex = 1
			}
			b.ReportAllocs()
			for b.Loop() {
				b.StopTimer()
				tb, c := newTestTable(time.Minute)
				tb.Apply(CauseNetlink, us...)
				c.advance(time.Minute - spread)
				b.StartTimer()
				got := 0
				for range spread / step {
					c.advance(step)
					got += tb.Advance()
				}
				if got != n {
					b.Fatalf("%d promoted, want %d", got, n)
				}
			}
		})
	}
}

// BenchmarkWalk measures the table's walks of a million entries, in the
// batches their callers take: Range (4,096 at a time, as the seeding
// does), Candidates (the same) and the store's each (a resync's sweep,
// which deletes nothing here).
func BenchmarkWalk(b *testing.B) {
	tb := New(time.Minute, nil)
	us := benchUpdates(1_000_000, StateStale)
	tb.Apply(CauseNetlink, us...)
	for _, w := range []struct {
		name string
		walk func(from uint32, fn func()) uint32
	}{
		{"range", func(from uint32, fn func()) uint32 { return tb.Range(from, 4096, func(*Entry) { fn() }) }},
		{"candidates", func(from uint32, fn func()) uint32 {
			return tb.Candidates(from, 4096, func(Key, string) { fn() })
		}},
		{"each", func(_ uint32, fn func()) uint32 {
			coreOf(tb).st.each(func(uint32, *rec) bool { fn(); return true })
			return 0
		}},
	} {
		b.Run(w.name, func(b *testing.B) {
			b.ReportAllocs()
			for range b.N {
				n := 0
				for from := uint32(0); ; {
					if from = w.walk(from, func() { n++ }); from == 0 {
						break
					}
				}
				if n != len(us) {
					b.Fatalf("walked %d of %d", n, len(us))
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(us)), "ns/entry")
		})
	}
}
