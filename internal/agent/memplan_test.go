package agent

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestMemWarning(t *testing.T) {
	c := costOwnCandidates
	if w := memWarning(1_000_000, 1<<21, 1_000_000, 1<<21, 0, c); w != "" {
		t.Errorf("no limit: %q", w)
	}
	need := memNeed(1_000_000, 1<<21, c)
	if w := memWarning(1_000_000, 1<<21, 1_000_000, 1<<21, need, c); w != "" {
		t.Errorf("a limit equal to the need: %q", w)
	}
	if memNeed(1_000_000, 0, c) >= need {
		t.Errorf("the tracer's maps cost nothing: %d with, %d without", need, memNeed(1_000_000, 0, c))
	}
	// The measured figures of BENCHMARKS.md, The pod's memory: the plan
	// must not promise less. 1,000,000 STALE entries took at most 215.0
	// MiB of the cgroup with the candidates in the mirror's 16-byte
	// values and the hit counters' map at 65,536 slots (2026-12-07,
	// 6.18), 100,000 at most 36.7, and 1,000 with gc_thresh3 at
	// 2,000,000 at most 14.9 (2026-12-04). Before 6.0 the candidate's
	// element (104 bytes charged) and its map's slots (16 bytes each)
	// come on top: 99 + 32 MiB more at 1,000,000, 10 + 2 at 100,000,
	// 0.1 + 0.25 at 1,000.
	for _, m := range []struct {
		c              tracerCost
		entries, slots int
		mib            float64
	}{
		{costOwnCandidates, 1_000_000, 1 << 21, 215.0 + 99 + 32}, {costOwnCandidates, 100_000, 1 << 17, 36.7 + 10 + 2},
		{costOwnCandidates, 1000, 1 << 14, 14.9 + 0.1 + 0.25},
		{costCandidatesInMirror, 1_000_000, 1 << 21, 215.0}, {costCandidatesInMirror, 100_000, 1 << 17, 36.7},
		{costCandidatesInMirror, 1000, 1 << 14, 14.9},
	} {
		if got := float64(memNeed(m.entries, m.slots, m.c)) / (1 << 20); got < m.mib {
			t.Errorf("plan for %d entries, %d slots, %+v: %.1f MiB, below the %.1f MiB measured", m.entries, m.slots, m.c, got, m.mib)
		}
	}
	// ... and not warn where the measured figure fits: the chart's 256
	// MiB hold 1,000,000 entries from 6.0.
	if w := memWarning(1_000_000, 1<<21, 1_000_000, 1<<21, 256<<20, costCandidatesInMirror); w != "" {
		t.Errorf("1,000,000 entries, measured at 215.0 MiB, warned of under 256 MiB: %s", w)
	}
	if memNeed(1_000_000, 1<<21, costCandidatesInMirror) >= memNeed(1_000_000, 1<<21, costOwnCandidates) {
		t.Error("the candidates in the mirror's values cost no less than in a map of their own")
	}
	// Too small for the table now: the agent will be OOM-killed.
	w := memWarning(1_000_000, 1<<21, 2_000_000, 1<<22, 256<<20, c)
	for _, want := range []string{"1000000 entries now", "256 MiB", "resources.limits.memory", "will be OOM-killed"} {
		if !strings.Contains(w, want) {
			t.Errorf("warning %q does not say %q", w, want)
		}
	}
	// Large enough now, not for gc_thresh3's worth.
	w = memWarning(1000, 16384, 4_000_000, 1<<22, 256<<20, c)
	for _, want := range []string{"may grow to 4000000 entries", "gc_thresh3", "256 MiB", "resources.limits.memory"} {
		if !strings.Contains(w, want) {
			t.Errorf("warning %q does not say %q", w, want)
		}
	}
	if strings.Contains(w, "\n") {
		t.Errorf("warning is more than one line: %q", w)
	}
	if w := memWarning(1000, 16384, 2048, 16384, 256<<20, c); w != "" {
		t.Errorf("a small node under 256 MiB: %q", w)
	}
}

// TestCgroupMemoryLimitFiles: the limit is read from the cgroup the
// process is in, in either hierarchy; none, "max" and v1's unlimited
// are no limit.
func TestCgroupMemoryLimitFiles(t *testing.T) {
	for _, tc := range []struct {
		name, cgroup string
		files        map[string]string
		want         int64
	}{
		{"v2", "0::/kubepods/pod1/c1\n", map[string]string{"kubepods/pod1/c1/memory.max": "268435456\n"}, 256 << 20},
		{"v2 max", "0::/x\n", map[string]string{"x/memory.max": "max\n"}, 0},
		{"v2 namespaced", "0::/\n", map[string]string{"memory.max": "134217728"}, 128 << 20},
		{"v1", "5:cpu,cpuacct:/a\n4:memory:/kubepods/p2\n0::/\n", map[string]string{"memory/kubepods/p2/memory.limit_in_bytes": "67108864"}, 64 << 20},
		{"v1 unlimited", "4:memory:/\n", map[string]string{"memory/memory.limit_in_bytes": "9223372036854771712"}, 0},
		{"none", "1:name=systemd:/\n", nil, 0},
	} {
		dir := t.TempDir()
		for p, v := range tc.files {
			p = filepath.Join(dir, "root", p)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte(v), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		pc := filepath.Join(dir, "cgroup")
		if err := os.WriteFile(pc, []byte(tc.cgroup), 0o644); err != nil {
			t.Fatal(err)
		}
		if got := cgroupMemoryLimitAt(pc, filepath.Join(dir, "root")); got != tc.want {
			t.Errorf("%s: limit %d, want %d", tc.name, got, tc.want)
		}
	}
}
