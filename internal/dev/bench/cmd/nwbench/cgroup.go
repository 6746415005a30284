package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// memCgroup is a memory cgroup of its own for one agent, as a pod would
// give it: its usage counts the agent's RSS and the kernel memory it is
// charged for (BPF maps, socket buffers), which a pod's memory limit
// applies to.
type memCgroup struct {
	dir                 string
	usageFile, peakFile string // v1 or v2 names
}

func newMemCgroup(name string) (memCgroup, error) {
	switch {
	case exists("/sys/fs/cgroup/memory/memory.usage_in_bytes"):
		c := memCgroup{filepath.Join("/sys/fs/cgroup/memory", name), "memory.usage_in_bytes", "memory.max_usage_in_bytes"}
		return c, os.Mkdir(c.dir, 0o755)
	case exists("/sys/fs/cgroup/cgroup.controllers"):
		c := memCgroup{filepath.Join("/sys/fs/cgroup", name), "memory.current", "memory.peak"}
		return c, os.Mkdir(c.dir, 0o755)
	}
	return memCgroup{}, errors.New("no memory cgroup hierarchy under /sys/fs/cgroup")
}

func (c memCgroup) add(pid int) error {
	return os.WriteFile(filepath.Join(c.dir, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0o644)
}

func (c memCgroup) read(f string) int64 {
	b, err := os.ReadFile(filepath.Join(c.dir, f))
	if err != nil {
		return 0
	}
	n, _ := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	return n
}

func (c memCgroup) usage() int64 { return c.read(c.usageFile) }
func (c memCgroup) peak() int64  { return c.read(c.peakFile) }

// kernelSide says, in MiB, what the cgroup is charged for beside its
// processes' pages: cgroup v1's kernel memory (memory.kmem.*) and
// memory.stat's rss and cache; v2's memory.stat kernel lines.
func (c memCgroup) kernelSide() string {
	b, err := os.ReadFile(filepath.Join(c.dir, "memory.stat"))
	if err != nil {
		return ""
	}
	want := map[string]bool{"rss": true, "cache": true, "anon": true, "file": true, "kernel": true, "kernel_stack": true,
		"percpu": true, "slab": true, "vmalloc": true, "sock": true}
	var parts []string
	if c.usageFile == "memory.usage_in_bytes" {
		parts = append(parts, fmt.Sprintf("kmem %.1f (peak %.1f)", float64(c.read("memory.kmem.usage_in_bytes"))/(1<<20),
			float64(c.read("memory.kmem.max_usage_in_bytes"))/(1<<20)))
	}
	for _, l := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(l, " ")
		if n, err := strconv.ParseInt(v, 10, 64); ok && err == nil && want[k] {
			parts = append(parts, fmt.Sprintf("%s %.1f", k, float64(n)/(1<<20)))
		}
	}
	return strings.Join(parts, ", ")
}

// remove deletes the cgroup once its processes are gone.
func (c memCgroup) remove() error {
	if c.dir == "" {
		return nil
	}
	if err := os.Remove(c.dir); err != nil {
		return fmt.Errorf("remove cgroup %s: %w", c.dir, err)
	}
	return nil
}

func exists(p string) bool { _, err := os.Stat(p); return err == nil }

// kernelBytes is the cgroup's kernel memory: cgroup v1's
// memory.kmem.usage_in_bytes, or v2's memory.stat slab.
func (c memCgroup) kernelBytes() int64 {
	if exists(filepath.Join(c.dir, "memory.kmem.usage_in_bytes")) {
		return c.read("memory.kmem.usage_in_bytes")
	}
	b, _ := os.ReadFile(filepath.Join(c.dir, "memory.stat"))
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "slab "); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	return 0
}
