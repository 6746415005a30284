package pace

import (
	"testing"
	"time"
)

// TestMeterTakesTheLonger: a job whose CPU ran past its wall time (work
// in two goroutines at once) costs its CPU; one that waited longer than
// it worked costs its wall time.
func TestMeterTakesTheLonger(t *testing.T) {
	defer func(n func() time.Time, c func() time.Duration) { now, cpuTime = n, c }(now, cpuTime)
	wall, cpu := time.Unix(1_700_000_000, 0), 40*time.Second
	now = func() time.Time { return wall }
	cpuTime = func() time.Duration { return cpu }
	for _, c := range []struct{ wall, cpu, want time.Duration }{
		{630 * time.Millisecond, 1300 * time.Millisecond, 1300 * time.Millisecond}, // a million entries' resync
		{2 * time.Second, 100 * time.Millisecond, 2 * time.Second},
		{0, 0, 0},
	} {
		m := Start()
		wall, cpu = wall.Add(c.wall), cpu+c.cpu
		if got := m.Took(); got != c.want {
			t.Errorf("wall %v, CPU %v: took %v, want %v", c.wall, c.cpu, got, c.want)
		}
	}
}

// TestProcessCPUCounts: the process's CPU clock advances with work done,
// so that a Meter sees it.
func TestProcessCPUCounts(t *testing.T) {
	m := Start()
	before := processCPU()
	if before <= 0 {
		t.Fatalf("process CPU %v: getrusage gave nothing", before)
	}
	x := uint64(1)
	for i := 0; processCPU()-before < 20*time.Millisecond; i++ {
		for range 100_000 {
			x = x*6364136223846793005 + 1442695040888963407
		}
		if i > 1_000_000 {
			t.Fatalf("no CPU time counted after %d rounds of work (%d)", i, x)
		}
	}
	if took := m.Took(); took < 20*time.Millisecond {
		t.Errorf("took %v after 20 ms of CPU", took)
	}
}
