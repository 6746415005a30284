package bpf

import (
	"sort"
	"testing"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"
)

// TestRawTracepointsUsePreallocatedMaps: a raw tracepoint program the
// loader keeps on every kernel it supports uses no hash map allocated at
// run time. Before 6.1 the verifier takes such a program with a kernel
// WARNING and a call trace (once a boot, "trace type BPF program uses
// run-time allocation"), which the 5.10 guest logged for tr_create_raw
// while watched_big was BPF_F_NO_PREALLOC. Raw programs whose tp_btf twin
// loads on every kernel of the matrix are tried only where it is refused.
func TestRawTracepointsUsePreallocatedMaps(t *testing.T) {
	spec, err := loadTracer()
	if err != nil {
		t.Fatal(err)
	}
	// tp_btf/neigh_create cannot read its pkey argument before 6.18, so
	// its raw twin is what loads there.
	alwaysRaw := []string{"tr_create_raw"}
	for _, name := range alwaysRaw {
		p := spec.Programs[name]
		if p == nil || p.Type != ebpf.RawTracepoint {
			t.Fatalf("%s: not a raw tracepoint program of the tracer object", name)
		}
		maps := mapsOf(p)
		if len(maps) == 0 {
			t.Fatalf("%s references no map: the test reads nothing", name)
		}
		for _, m := range maps {
			ms := spec.Maps[m]
			if ms == nil {
				continue // a global's section, an array
			}
			switch ms.Type {
			case ebpf.Hash, ebpf.PerCPUHash:
				if ms.Flags&unix.BPF_F_NO_PREALLOC != 0 {
					t.Errorf("%s uses %s, a hash map allocated at run time: a kernel before 6.1 warns when it loads", name, m)
				}
			}
		}
	}
}

// mapsOf names the maps a program's instructions refer to.
func mapsOf(p *ebpf.ProgramSpec) []string {
	seen := map[string]bool{}
	for _, ins := range p.Instructions {
		if ins.IsLoadFromMap() && ins.Reference() != "" {
			seen[ins.Reference()] = true
		}
	}
	var names []string
	for n := range seen {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}
