package e2e

import (
	"context"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/neighwatch/neighwatch/internal/dev/lab"
)

// BenchmarkDetectionLatency measures how long the agent, on its defaults
// (the tracer's window 1 s of 30 s, the stale threshold 1m), takes to
// class a moved host stuck by its source MAC, over 10 moves, against the
// goal threshold + 5 s. Each move starts from a fresh STALE entry at the
// host's MAC (the host healthy and talking, its replies bypassed by the
// legacy datapath, so the entry stays STALE); the host moves, at a random
// age of that STALE entry between 0 and threshold + period, with no ARP
// reaching the node, and keeps sending. Another stale-long entry stays on
// the interface the whole time, so the sampler is somewhere in its period
// when the host moves, as on a busy node (NEIGHWATCH_BENCH_ALONE=1: none,
// as on a quiet one). NEIGHWATCH_BENCH_THRESHOLD and
// NEIGHWATCH_BENCH_PERIOD change the two (threshold 5s: the figures of
// 0.8.0 and before); NEIGHWATCH_BENCH_AGE=0 moves the host the moment its
// entry turns STALE; NEIGHWATCH_BENCH_MOVES the count. Run it as root:
//
//	go test ./e2e -run '^$' -bench DetectionLatency -benchtime 1x -timeout 60m
func BenchmarkDetectionLatency(b *testing.B) {
	if ok, why := lab.Privileged(); !ok {
		b.Skip(why)
	}
	threshold := time.Minute
	if v, err := time.ParseDuration(os.Getenv("NEIGHWATCH_BENCH_THRESHOLD")); err == nil {
		threshold = v
	}
	randomAge := os.Getenv("NEIGHWATCH_BENCH_AGE") != "0"
	moves := 10
	if v, err := strconv.Atoi(os.Getenv("NEIGHWATCH_BENCH_MOVES")); err == nil {
		moves = v
	}
	period := 30 * time.Second
	if v, err := time.ParseDuration(os.Getenv("NEIGHWATCH_BENCH_PERIOD")); err == nil {
		period = v
	}
	l := lab.New(b, "dlt")
	if err := l.PinClientToNode(); err != nil {
		b.Fatal(err)
	}
	for _, fam := range []string{"ipv4", "ipv6"} {
		if err := l.Node.Sysctl("net."+fam+".neigh."+lab.NodeClientIf+".gc_stale_time", "3600"); err != nil {
			b.Fatal(err)
		}
	}
	if os.Getenv("NEIGHWATCH_BENCH_ALONE") != "1" {
		l.Node.MustIP(b, "neigh", "replace", "10.0.1.77", "lladdr", "02:00:00:00:00:77", "dev", lab.NodeClientIf, "nud", "stale")
	}
	if err := l.Backend.Ping(lab.NodeBackendIP, 1, 2*time.Second); err != nil {
		b.Fatal(err)
	}
	sock := sockPath(b)
	a := startAgent(b, l.Node, sock, "--stale-threshold", threshold.String(), "--tracer", "xmit", "--tracer.period", period.String(),
		"--datapath.interfaces", lab.NodeBackendIf, "--datapath.mode", "legacy")
	// The client keeps talking to the backend, every 100 ms; not while it
	// moves: with its neighbour table flushed by the address change, it
	// would ARP for the node and give the move away.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var moving sync.Mutex
	go func() {
		for ctx.Err() == nil {
			moving.Lock()
			_, _, _ = l.Client.Echo(lab.BackendIP, 1, time.Millisecond, 100*time.Millisecond)
			moving.Unlock()
			time.Sleep(100 * time.Millisecond)
		}
	}()
	var lat []time.Duration
	for i := range moves {
		// Moves land anywhere in the sampler's period, not right after
		// the window that found the last one, and at any age of the
		// entry's STALE state: young (its windows see the move before
		// it turns stale-long) or long past the threshold.
		if !randomAge {
			time.Sleep(time.Duration(rand.Int64N(int64(period))))
		}
		mac := lab.HostMAC(i, 40)
		moving.Lock()
		if err := l.MoveClientMAC(mac); err != nil {
			b.Fatal(err)
		}
		if err := l.Node.SetNeigh(lab.NodeClientIf, lab.ClientIP, mac, "stale"); err != nil {
			b.Fatal(err)
		}
		age := time.Duration(0)
		if randomAge {
			// The host at the entry's MAC meanwhile, talking: healthy.
			moving.Unlock()
			age = time.Duration(rand.Int64N(int64(threshold + period)))
			time.Sleep(age)
			moving.Lock()
		}
		if err := l.MoveClientMAC(lab.HostMAC(i, 41)); err != nil {
			b.Fatal(err)
		}
		moving.Unlock()
		moved := time.Now()
		for {
			e, _ := findEntry(statusJSON(b, sock), lab.NodeClientIf, lab.ClientIP.String())
			if e.Class == "stuck" {
				lat = append(lat, time.Since(moved))
				b.Logf("move %d (the entry STALE for %v): stuck after %v, evidence %+v", i, age.Round(10*time.Millisecond), lat[len(lat)-1].Round(10*time.Millisecond), e.Evidence)
				break
			}
			if time.Since(moved) > 2*(threshold+period) {
				b.Fatalf("move %d: not stuck after %v: %+v\n%s", i, time.Since(moved), e, a.logs())
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	within := 0
	for _, d := range lat {
		if d <= threshold+5*time.Second {
			within++
		}
	}
	slices.Sort(lat)
	b.Logf("detection latency over %d moves: median %v, min %v, max %v; %d within the goal threshold %v + 5 s; all: %v",
		moves, lat[len(lat)/2].Round(100*time.Millisecond), lat[0].Round(100*time.Millisecond), lat[len(lat)-1].Round(100*time.Millisecond),
		within, threshold, lat)
	b.ReportMetric(lat[len(lat)/2].Seconds(), "median-s")
	b.ReportMetric(lat[len(lat)-1].Seconds(), "max-s")
	b.ReportMetric(float64(within)/float64(moves), "within-goal")
}
