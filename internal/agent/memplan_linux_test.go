package agent

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/neighwatch/neighwatch/internal/dev/lab"
)

// TestCgroupMemoryLimitReal: a process in a memory cgroup of this
// machine's kernel (v1 or v2, whichever it mounts) is seen under that
// cgroup's limit.
func TestCgroupMemoryLimitReal(t *testing.T) {
	lab.Require(t)
	const limit = 96 << 20
	var dir, limitFile, procs string
	name := lab.Unique("nwmem")
	switch {
	case fileExists("/sys/fs/cgroup/memory/memory.limit_in_bytes"):
		dir = filepath.Join("/sys/fs/cgroup/memory", name)
		limitFile, procs = "memory.limit_in_bytes", "cgroup.procs"
	case fileExists("/sys/fs/cgroup/cgroup.controllers"):
		dir = filepath.Join("/sys/fs/cgroup", name)
		limitFile, procs = "memory.max", "cgroup.procs"
	default:
		t.Fatal("no memory cgroup hierarchy mounted under /sys/fs/cgroup")
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		_ = os.Remove(dir)
	})
	if err := os.WriteFile(filepath.Join(dir, limitFile), []byte(fmt.Sprint(limit)), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, procs), []byte(fmt.Sprint(cmd.Process.Pid)), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := cgroupMemoryLimitAt(fmt.Sprintf("/proc/%d/cgroup", cmd.Process.Pid), "/sys/fs/cgroup"); got != limit {
		t.Fatalf("limit read %d, want %d", got, limit)
	}
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }
