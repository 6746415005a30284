package agent

import "fmt"

// What the agent's memory comes to, as the node's memory accounting (the
// pod's cgroup) sees it: a base, and per neighbour entry the table's
// record and index (outside the Go heap) plus the elements of the
// tracer's kernel maps that the entry fills (charged to the agent's
// cgroup too). Measured with nwbench idle at 1,000 and 1,000,000 STALE
// entries (BENCHMARKS.md, Memory); the README's formula and the chart's
// default limit are these.
const (
	memBaseBytes  = 40 << 20
	memEntryBytes = 400
)

// memNeed is the memory the agent needs for a node whose neighbour
// tables may hold entries entries.
func memNeed(entries int) int64 {
	return memBaseBytes + int64(entries)*memEntryBytes
}

// memWarning is the one line that says the cgroup's memory limit is too
// small for the entries the node's neighbour tables may hold, or "".
func memWarning(entries int, limit int64) string {
	need := memNeed(entries)
	if limit <= 0 || need <= limit {
		return ""
	}
	return fmt.Sprintf("memory: the neighbour tables may hold %d entries (gc_thresh3 of IPv4 and IPv6), which need about %d MiB (%d MiB and %d bytes per entry); the cgroup's memory limit is %d MiB: raise the limit (the chart's resources.limits.memory) or lower gc_thresh3, or the agent may be OOM-killed as the table grows",
		entries, need>>20, memBaseBytes>>20, memEntryBytes, limit>>20)
}
