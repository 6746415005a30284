package agent

import (
	"bufio"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// cgroupMemoryLimit returns the memory limit of the cgroup the agent
// runs in, in bytes, or 0 when there is none (or it cannot be read): the
// unified hierarchy's memory.max, else the v1 memory controller's
// memory.limit_in_bytes.
func cgroupMemoryLimit() int64 {
	return cgroupMemoryLimitAt("/proc/self/cgroup", "/sys/fs/cgroup")
}

func cgroupMemoryLimitAt(procCgroup, root string) int64 {
	f, err := os.Open(procCgroup)
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	var v1, v2 string
	for sc.Scan() {
		// hierarchy-ID:controller-list:path
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 {
			continue
		}
		switch {
		case parts[0] == "0" && parts[1] == "":
			v2 = parts[2]
		case containsField(parts[1], "memory"):
			v1 = parts[2]
		}
	}
	var candidates []string
	if v1 != "" {
		candidates = append(candidates, filepath.Join(root, "memory", v1, "memory.limit_in_bytes"), filepath.Join(root, "memory", "memory.limit_in_bytes"))
	}
	if v2 != "" {
		candidates = append(candidates, filepath.Join(root, v2, "memory.max"), filepath.Join(root, "unified", v2, "memory.max"), filepath.Join(root, "memory.max"))
	}
	for _, p := range candidates {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		s := strings.TrimSpace(string(b))
		if s == "max" {
			return 0
		}
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n <= 0 || n >= 1<<62 { // v1's "unlimited" is near 2^63
			return 0
		}
		return n
	}
	return 0
}

func containsField(list, name string) bool {
	for _, f := range strings.Split(list, ",") {
		if f == name {
			return true
		}
	}
	return false
}
