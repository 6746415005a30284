package main

import (
	"encoding/binary"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"

	"github.com/cilium/ebpf"
)

// mapcost measures what the kernel charges a memory cgroup for each
// element of a hash map allocated on demand (BPF_F_NO_PREALLOC, as the
// tracer's are): the element is the kernel's header, the key and the
// value, each padded to 8 bytes, and the kernel takes it from a slab size
// class, so two shapes a few bytes apart may cost a size class apart.
// fdinfo's memlock (what neighwatch_tracer_map_bytes reports) counts the
// element's own size. Each shape runs in a child process in a memory
// cgroup of its own; the figure is the cgroup's kernel memory
// (memory.kmem.usage_in_bytes on cgroup v1, memory.stat's slab on v2)
// after the inserts less before, over the elements.
//
//	nwbench mapcost [--shapes 24:8,12:20,24:32] [--elements 200000]
func mapcost(args []string) error {
	fs := flag.NewFlagSet("mapcost", flag.ContinueOnError)
	// The tracer's per-entry maps: the mirror (nkey, nval), the STALE
	// MACs (mkey, mval) and the source-MAC candidates (nkey, cand).
	shapes := fs.String("shapes", "24:8,12:20,24:32", "key:value sizes in bytes, comma-separated")
	elements := fs.Int("elements", 200000, "elements inserted in each map")
	if err := fs.Parse(args); err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	fmt.Println("| key | value | element (memlock) | charged per element |")
	fmt.Println("|---|---|---|---|")
	for i, s := range strings.Split(*shapes, ",") {
		cg, err := newMemCgroup(fmt.Sprintf("nwbench-mapcost-%d-%d", os.Getpid(), i))
		if err != nil {
			return err
		}
		out, err := exec.Command(self, "mapcost-one", cg.dir, s, strconv.Itoa(*elements)).Output()
		_ = cg.remove()
		if err != nil {
			return fmt.Errorf("shape %s: %w", s, err)
		}
		var r mapCostResult
		if err := json.Unmarshal(out, &r); err != nil {
			return fmt.Errorf("shape %s: %w", s, err)
		}
		fmt.Printf("| %d | %d | %.1f | %.1f |\n", r.Key, r.Value, r.MemlockPerElement, r.ChargedPerElement)
	}
	return nil
}

type mapCostResult struct {
	Key, Value        uint32
	MemlockPerElement float64
	ChargedPerElement float64
}

// mapCostOne is the child: it joins the cgroup dir, creates the map and
// fills it, and prints a mapCostResult.
func mapCostOne(args []string) error {
	if len(args) != 3 {
		return fmt.Errorf("usage: mapcost-one CGROUP KEY:VALUE ELEMENTS")
	}
	cg := memCgroup{dir: args[0]}
	if err := cg.add(os.Getpid()); err != nil {
		return err
	}
	k, v, _ := strings.Cut(args[1], ":")
	ks, err1 := strconv.Atoi(k)
	vs, err2 := strconv.Atoi(v)
	n, err3 := strconv.Atoi(args[2])
	if err1 != nil || err2 != nil || err3 != nil || ks < 4 || vs < 1 || n < 1 {
		return fmt.Errorf("shape %q, elements %q: want KEY:VALUE sizes (key at least 4) and a count", args[1], args[2])
	}
	m, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.Hash, KeySize: uint32(ks), ValueSize: uint32(vs),
		MaxEntries: uint32(n), Flags: 1 /* BPF_F_NO_PREALLOC */})
	if err != nil {
		return err
	}
	defer m.Close()
	slots, err := memlock(m)
	if err != nil {
		return err
	}
	before := cg.kernelBytes()
	key, val := make([]byte, ks), make([]byte, vs)
	for i := range n {
		binary.LittleEndian.PutUint32(key, uint32(i))
		if err := m.Put(key, val); err != nil {
			return fmt.Errorf("insert %d: %w", i, err)
		}
	}
	after := cg.kernelBytes()
	full, err := memlock(m)
	if err != nil {
		return err
	}
	return json.NewEncoder(os.Stdout).Encode(mapCostResult{Key: uint32(ks), Value: uint32(vs),
		MemlockPerElement: float64(full-slots) / float64(n), ChargedPerElement: float64(after-before) / float64(n)})
}

// memlock is the map's memlock as the kernel reports it (fdinfo), read
// as the tracer's MapMemory reads it.
func memlock(m *ebpf.Map) (int64, error) {
	info, err := m.Info()
	if err != nil {
		return 0, err
	}
	b, ok := info.Memlock()
	if !ok {
		return 0, fmt.Errorf("the kernel reports no memlock for the map")
	}
	return int64(b), nil
}
