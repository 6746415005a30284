package bpf

import (
	"net"
	"net/netip"
	"testing"
	"unsafe"

	"github.com/neighwatch/neighwatch/internal/dev/lab"
	"golang.org/x/sys/unix"
)

// TestRawLayouts holds raw to its promise: each generated type it hands
// to the kernel has the size of the map key or value it stands for, so
// the kernel reads no byte past it and none of it is left out.
func TestRawLayouts(t *testing.T) {
	spec, err := loadTracer()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		m          string
		key, value uintptr
	}{
		{tracerMapNeighMirror, unsafe.Sizeof(tracerNkey{}), unsafe.Sizeof(tracerNval{})},
		{tracerMapViaMacs, unsafe.Sizeof(tracerMkey{}), unsafe.Sizeof(tracerVia{})},
		{tracerMapSourceCandidates, unsafe.Sizeof(tracerNkey{}), unsafe.Sizeof(tracerScand{})},
		// Mapped into memory as an array of Go values: the stride must match.
		{tracerMapSeedBatch, 4, unsafe.Sizeof(tracerSeedEntry{})},
	} {
		ms := spec.Maps[c.m]
		if ms == nil {
			t.Fatalf("map %s not in the tracer object", c.m)
		}
		if uintptr(ms.KeySize) != c.key || uintptr(ms.ValueSize) != c.value {
			t.Errorf("%s: key %d value %d bytes in the object, Go types %d and %d", c.m, ms.KeySize, ms.ValueSize, c.key, c.value)
		}
	}
}

// TestCountKeysInBatches: the mirror's size counted a batch at a time
// equals the count key by key, across batches (10,000 entries, batches of
// 4,096) and on an empty map.
func TestCountKeysInBatches(t *testing.T) {
	lab.Require(t)
	tr := loadEmpty(t, 1<<14)
	if n, m := countKeys(tr.core.objs.NeighMirror), countKeysOneByOne(tr.core.objs.NeighMirror); n != 0 || m != 0 {
		t.Fatalf("empty mirror counted %d in batches, %d key by key", n, m)
	}
	const want = 10_000
	seedReachable(t, tr, want)
	if got, byKey := countKeys(tr.core.objs.NeighMirror), countKeysOneByOne(tr.core.objs.NeighMirror); got != want || byKey != want {
		t.Fatalf("mirror of %d entries counted %d in batches, %d key by key", want, got, byKey)
	}
}

// loadEmpty loads an xmit tracer whose mirror holds mirrorSize entries,
// closed when the test ends.
func loadEmpty(tb testing.TB, mirrorSize int) *Tracer {
	tb.Helper()
	tr, err := LoadTracer(TracerOptions{Mode: TracerXmit, MirrorSize: mirrorSize})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { tr.Close() })
	return tr
}

// seedReachable seeds n REACHABLE entries, each with an address and a MAC
// of its own (10.0.0.0/8, n at most 2^24), spread over ifindexes 1 to 3.
func seedReachable(tb testing.TB, tr *Tracer, n int) {
	tb.Helper()
	batch := make([]SeedEntry, 0, n)
	for i := range n {
		a := netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)})
		batch = append(batch, SeedEntry{Ifindex: 1 + i%3, Addr: a, State: unix.NUD_REACHABLE, MAC: net.HardwareAddr{2, 0, 0, byte(i >> 16), byte(i >> 8), byte(i)}})
	}
	if k, _, err := tr.Seed(batch); err != nil || k != n {
		tb.Fatalf("seeded %d of %d: %v", k, n, err)
	}
}
