// Package pace spaces the periodic jobs that walk a whole table or map
// (the netlink resync, the count of the tracer's mirror), so that each
// costs at most a fixed share of a CPU whatever the table's size: at a
// million entries a resync takes most of a second, and every five
// minutes that alone was a quarter of the agent's idle CPU.
package pace

import "time"

// Factor is how many times its last run's cost (a Meter's: wall time or
// CPU time, the longer) a job waits before the next: 1,000, at most 0.1
// % of a core each.
const Factor = 1000

// Wait returns how long a job waits before it runs again: at least
// every, and at least Factor times what its last run cost.
func Wait(every, took time.Duration) time.Duration {
	return max(every, Factor*took)
}
