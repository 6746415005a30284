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
