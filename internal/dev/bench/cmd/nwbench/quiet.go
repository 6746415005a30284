package main

import (
	"os"
	"strconv"
	"strings"
	"time"
)

// waitQuiet returns once the machine has been at least 85 % idle, all
// CPUs together, for two half-second windows in a row, or after limit.
// An agent that exits with a million entries leaves the kernel freeing
// its maps and sockets for seconds after; the next agent started in that
// time syncs slower, whichever binary it is. It returns how long it
// waited.
func waitQuiet(limit time.Duration) time.Duration {
	start := time.Now()
	quiet := 0
	idle0, total0, ok := cpuTimes()
	for ok && quiet < 2 && time.Since(start) < limit {
		time.Sleep(500 * time.Millisecond)
		idle1, total1, ok1 := cpuTimes()
		if !ok1 || total1 == total0 {
			break
		}
		if float64(idle1-idle0)/float64(total1-total0) >= 0.85 {
			quiet++
		} else {
			quiet = 0
		}
		idle0, total0 = idle1, total1
	}
	return time.Since(start)
}

// cpuTimes reads the idle (idle + iowait) and total jiffies of all CPUs
// from /proc/stat.
func cpuTimes() (idle, total uint64, ok bool) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0, false
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 6 || f[0] != "cpu" {
		return 0, 0, false
	}
	for i, s := range f[1:] {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return 0, 0, false
		}
		total += v
		if i == 3 || i == 4 {
			idle += v
		}
	}
	return idle, total, true
}
