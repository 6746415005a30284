package agent

import (
	"github.com/neighwatch/neighwatch/bpf"
	"github.com/neighwatch/neighwatch/internal/kver"
)

// cgroupMemoryLimit returns the memory limit of the cgroup the agent
// runs in, in bytes, or 0 when there is none (or it cannot be read): the
// unified hierarchy's memory.max, else the v1 memory controller's
// memory.limit_in_bytes.
func cgroupMemoryLimit() int64 {
	return cgroupMemoryLimitAt("/proc/self/cgroup", "/sys/fs/cgroup")
}

// kernelTracerCost is the tracer maps' cost on the running kernel.
func kernelTracerCost() tracerCost {
	if ok, _, err := kver.AtLeast(bpf.CandidatesInMirrorFrom[0], bpf.CandidatesInMirrorFrom[1]); err == nil && ok {
		return costCandidatesInMirror
	}
	return costOwnCandidates
}
