package evidence

import (
	"net/netip"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/neighwatch/neighwatch/table"
)

func hostKey(i int) table.Key {
	return table.Key{Ifindex: int32(1 + i%2), Addr: netip.AddrFrom4([4]byte{10, 0, byte(i >> 8), byte(i)})}
}

// order lists the LRU's keys from newest to oldest.
func order(l *hostLRU) []table.Key {
	k := l.lru.Keys() // oldest first
	slices.Reverse(k)
	return k
}

// TestHostLRU: get makes a host the newest; past max the least recent is
// forgotten; expire forgets from the oldest end up to a time;
// forgetLink forgets one interface's hosts.
func TestHostLRU(t *testing.T) {
	l := newHostLRU(3)
	for i := range 3 {
		h, evicted := l.get(hostKey(i))
		h.at = int64(10 * (i + 1))
		if evicted {
			t.Fatalf("evicted below max at %d", i)
		}
	}
	h0, _ := l.get(hostKey(0)) // seen again: the newest now, 1 the oldest
	h0.at = 35
	if got := order(l); got[0] != hostKey(0) || got[2] != hostKey(1) {
		t.Fatalf("order after touching 0: %v", got)
	}
	h, evicted := l.get(hostKey(3))
	h.at = 40
	if !evicted || l.lookup(hostKey(1)) != nil || l.len() != 3 {
		t.Fatalf("past max: evicted=%v, host 1 kept=%v, len %d; want the oldest (1) forgotten", evicted, l.lookup(hostKey(1)) != nil, l.len())
	}
	// Oldest first: 2 (at 30), 0 (at 35), 3 (at 40).
	if n := l.expire(30); n != 1 || l.lookup(hostKey(2)) != nil {
		t.Fatalf("expire(30) forgot %d, host 2 kept=%v; want host 2 only", n, l.lookup(hostKey(2)) != nil)
	}
	l.forgetLink(hostKey(3).Ifindex) // 3 is on ifindex 2, 0 on 1
	if got := order(l); len(got) != 1 || got[0] != hostKey(0) {
		t.Fatalf("after forgetting ifindex %d: %v", hostKey(3).Ifindex, got)
	}
}

// TestHostObserve: one change of MAC is a move, a return to the MAC it
// left within the window a conflict, after the window a move again.
func TestHostObserve(t *testing.T) {
	var h host
	for i, tc := range []struct {
		mac  string
		at   int64
		want Verdict
	}{
		{"a", 0, Same}, {"a", 1, Same}, {"b", 2, Move}, {"a", 3, Conflict}, {"a", 4, Same}, {"b", 100, Move},
	} {
		if got := h.observe(tc.mac, tc.at, 10); got != tc.want {
			t.Fatalf("step %d (%s at %d): %v, want %v", i, tc.mac, tc.at, got, tc.want)
		}
	}
}

// TestREADMENamesMaxHosts: the bound of the evidence map is where users
// read about it.
func TestREADMENamesMaxHosts(t *testing.T) {
	b, err := os.ReadFile("../../docs/detection.md")
	if err != nil {
		t.Fatal(err)
	}
	n := strconv.Itoa(DefaultMaxHosts)
	want := n[:len(n)-3] + "," + n[len(n)-3:] + " hosts" // 65,536
	if !strings.Contains(string(b), want) {
		t.Errorf("docs/detection.md does not say the evidence map keeps at most %q", want)
	}
}

// BenchmarkHostLRUFull: the live heap the evidence map holds when full
// (DefaultMaxHosts), per host, and the cost of a sighting of a new host
// that evicts the oldest.
func BenchmarkHostLRUFull(b *testing.B) {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	l := newHostLRU(DefaultMaxHosts)
	for i := range DefaultMaxHosts {
		h, _ := l.get(hostKey(i))
		h.observe("\x02\x00\x00\x00\x00\x01", int64(i), 1)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		// Never seen before: each sighting evicts the oldest.
		k := table.Key{Ifindex: 1, Addr: netip.AddrFrom4([4]byte{11, byte(i >> 16), byte(i >> 8), byte(i)})}
		h, _ := l.get(k)
		h.observe("\x02\x00\x00\x00\x00\x01", int64(i), 1)
	}
	b.StopTimer()
	b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/DefaultMaxHosts, "heap-B/host")
	runtime.KeepAlive(l)
}
