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
		{tracerMapStaleMacs, unsafe.Sizeof(tracerMkey{}), unsafe.Sizeof(tracerMval{})},
		{tracerMapSourceCandidates, unsafe.Sizeof(tracerNkey{}), unsafe.Sizeof(tracerCand{})},
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
	tr, err := LoadTracer(TracerOptions{Mode: TracerXmit, MirrorSize: 1 << 14})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	if n, m := countKeys(tr.objs.NeighMirror), countKeysOneByOne(tr.objs.NeighMirror); n != 0 || m != 0 {
		t.Fatalf("empty mirror counted %d in batches, %d key by key", n, m)
	}
	const want = 10_000
	batch := make([]SeedEntry, 0, want)
	for i := range want {
		a := netip.AddrFrom4([4]byte{10, 99, byte(i >> 8), byte(i)})
		batch = append(batch, SeedEntry{Ifindex: 1 + i%3, Addr: a, State: unix.NUD_REACHABLE, MAC: net.HardwareAddr{2, 0, 0, 0, byte(i >> 8), byte(i)}})
	}
	n, _, err := tr.Seed(batch)
	if err != nil || n != want {
		t.Fatalf("seeded %d of %d: %v", n, want, err)
	}
	if got, byKey := countKeys(tr.objs.NeighMirror), countKeysOneByOne(tr.objs.NeighMirror); got != want || byKey != want {
		t.Fatalf("mirror of %d entries counted %d in batches, %d key by key", want, got, byKey)
	}
}
