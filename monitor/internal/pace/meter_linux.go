package pace

import (
	"syscall"
	"time"
)

// A Meter measures what one run of a job cost: the longer of the wall
// time it took and the CPU time the whole process spent meanwhile. A
// resync's dump is the kernel's work inside the receive call and the
// table's in another goroutine at the same time: at 1,000,000 entries,
// two agents side by side, one resync took 1.6 s of wall time and
// another cost 2.2 s measured this way, so paced by wall time alone it
// cost more than the 0.1 % of a core Factor promises (BENCHMARKS.md).
// Whatever else the process does meanwhile is counted too, which only
// makes the wait longer.
type Meter struct {
	began time.Time
	cpu   time.Duration
}

// Start begins a measurement.
func Start() Meter { return Meter{began: now(), cpu: cpuTime()} }

// Took returns what the job has cost since Start.
func (m Meter) Took() time.Duration {
	return max(m.Wall(), cpuTime()-m.cpu)
}

// Wall returns the wall time since Start alone.
func (m Meter) Wall() time.Duration { return now().Sub(m.began) }

// now and cpuTime are the clocks a Meter reads; tests replace them.
var (
	now     = time.Now
	cpuTime = processCPU
)

// processCPU returns the CPU time, user and system, the process has spent
// so far; 0 if the kernel will not say, and a Meter then measures wall
// time alone.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
