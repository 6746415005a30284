package agent

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/neighwatch/neighwatch/bpf"
)

// What the agent costs the node's memory accounting (the cgroup a pod's
// limit applies to), measured with nwbench idle at 1,000, 100,000 and
// 1,000,000 STALE entries (BENCHMARKS.md, The pod's memory): a base; per
// entry the table's record and index and the Go heap's share (the
// cgroup's peak less its kernel memory: 18.7 MiB at 100,000, 80.8 at
// 1,000,000, 2026-12-05: 76 bytes an entry and 11 MiB besides, which
// the base rounds up to leave room for a worse run); with the tracer,
// what its kernel maps take (tracerCost). The binary's pages (about 15 MiB of the RSS) are page
// cache the kernel reclaims under the limit rather than kill the agent,
// and are not in it. The formula of docs/metrics.md and the chart's comment on its
// memory limit are these.
const (
	memBaseBytes  = 20 << 20
	memEntryBytes = 76
)

// tracerCost is what the tracer's kernel maps take: per entry, the
// elements it keeps for it, and per slot the 16 bytes the kernel sets
// aside in each hash map the table's size sizes, whatever it holds (the
// slots follow the table: loadSlots). The bypass hit counters' map has
// as many slots, up to bpf.MaxHitEntries (hitSlotBytes each).
type tracerCost struct{ entry, slot int64 }

const hitSlotBytes = 16

var (
	// Before 6.0 the source-MAC candidates have a map of their own: two
	// elements an entry (the mirror, the candidate: 104 + 104 bytes
	// charged) and two maps' slots (the mirror, the candidates).
	costOwnCandidates = tracerCost{entry: 208, slot: 32}
	// From 6.0 they live in the mirror's values: one element (96 bytes,
	// charged 104) and the mirror's slots.
	costCandidatesInMirror = tracerCost{entry: 104, slot: 16}
)

// memNeed is the memory the agent needs for a node whose neighbour
// tables may hold entries entries, with the tracer's maps of mapSlots
// slots (0: no tracer) costing c.
func memNeed(entries, mapSlots int, c tracerCost) int64 {
	need := int64(memBaseBytes) + int64(entries)*memEntryBytes
	if mapSlots > 0 {
		need += int64(entries)*c.entry + int64(mapSlots)*c.slot + int64(hitSlots(mapSlots))*hitSlotBytes
	}
	return need
}

// hitSlots is the capacity of the bypass hit counters' map beside maps
// of mapSlots slots: as many, up to bpf.MaxHitEntries. The feed drops a
// counter idle for a sweep's period, so the map holds the entries with
// bypass traffic lately, not the table.
func hitSlots(mapSlots int) int { return min(mapSlots, bpf.MaxHitEntries) }

// memWarning is the one line that says the cgroup's memory limit is too
// small, or "": for the entries the node's neighbour tables hold now
// (the agent may be OOM-killed as it starts), else for the most they may
// hold (gc_thresh3 of IPv4 and IPv6: as the table grows). The slots are
// the tracer's maps' for each (0: no tracer).
func memWarning(now, nowSlots, most, mostSlots int, limit int64, c tracerCost) string {
	if limit <= 0 {
		return ""
	}
	tracer := func(slots int) string {
		if slots > 0 {
			return fmt.Sprintf("with the tracer's maps of %d slots", slots)
		}
		return "without the tracer"
	}
	if need := memNeed(now, nowSlots, c); need > limit {
		return fmt.Sprintf("memory: the neighbour tables hold %d entries now, which need about %d MiB %s (docs/metrics.md, Memory); the cgroup's memory limit is %d MiB: raise the limit (the chart's resources.limits.memory), or the agent will be OOM-killed",
			now, need>>20, tracer(nowSlots), limit>>20)
	}
	if need := memNeed(most, mostSlots, c); need > limit {
		return fmt.Sprintf("memory: the neighbour tables may grow to %d entries (gc_thresh3 of IPv4 and IPv6), which would need about %d MiB %s (docs/metrics.md, Memory); the cgroup's memory limit is %d MiB: raise the limit (the chart's resources.limits.memory) or lower gc_thresh3, or the agent may be OOM-killed as the table grows",
			most, need>>20, tracer(mostSlots), limit>>20)
	}
	return ""
}

// cgroupMemoryLimitAt reads the limit from a /proc/<pid>/cgroup file and
// the cgroup file system mounted at root (split out for tests).
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
