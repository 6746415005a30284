package bpf

import (
	"testing"
	"unsafe"
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
