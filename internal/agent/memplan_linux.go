package agent

// cgroupMemoryLimit returns the memory limit of the cgroup the agent
// runs in, in bytes, or 0 when there is none (or it cannot be read): the
// unified hierarchy's memory.max, else the v1 memory controller's
// memory.limit_in_bytes.
func cgroupMemoryLimit() int64 {
	return cgroupMemoryLimitAt("/proc/self/cgroup", "/sys/fs/cgroup")
}
