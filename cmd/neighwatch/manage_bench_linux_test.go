package main

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/neighwatch/neighwatch/internal/lab"
)

// BenchmarkRecoveryAfterMove measures, on the lab with the project's
// legacy datapath, how long traffic stays black-holed after the client
// moves with no ARP reaching the node: with the manage strategy (the
// entry managed before the move) against the probe strategy (scope
// stuck: it acts once the entry is stuck), ten moves each, interleaved
// round by round, with the kernel's default timers and with short ones.
// Run it alone: go test -run '^$' -bench RecoveryAfterMove -benchtime 1x.
func BenchmarkRecoveryAfterMove(b *testing.B) {
	lab.Require(b)
	for _, short := range []bool{true, false} {
		name := "default-timers"
		if short {
			name = "short-timers"
		}
		b.Run(name, func(b *testing.B) {
			for range b.N {
				benchRecovery(b, short)
			}
		})
	}
}

func benchRecovery(b *testing.B, short bool) {
	const rounds = 10
	type side struct {
		name string
		m    *managedLab
		a    *agentProc
		sock string
		took []time.Duration
	}
	var sides []*side
	for _, strategy := range []string{"manage", "probe"} {
		m, args := newManagedLabTimers(b, "bm"+strategy[:1], "project", false, short)
		args = append(args, "--remediation.strategies", strategy)
		if strategy == "probe" {
			args = append(args, "--remediation.scope", "stuck")
		}
		sock := sockPath(b)
		sides = append(sides, &side{name: strategy, m: m, a: startAgent(b, m.Node, sock, args...), sock: sock})
	}
	// steady waits until a side is in the state its strategy starts from:
	// managed by neighwatch and REACHABLE, or at-risk (STALE past the
	// threshold with bypass traffic), traffic flowing.
	steady := func(s *side) {
		lab.WaitFor(b, 5*time.Minute, s.name+" steady state", func() bool {
			_, _, _ = s.m.Client.Echo(s.m.backend, 2, 100*time.Millisecond, time.Second)
			e := s.m.entry(b, s.sock)
			if s.name == "manage" {
				return e.ManagedBy == "neighwatch" && e.State == "reachable"
			}
			return e.Class == "at-risk"
		})
	}
	for r := range rounds {
		for _, s := range sides {
			steady(s)
			mac := lab.HostMAC(90+r, 1)
			if err := s.m.MoveClientMAC(mac); err != nil {
				b.Fatal(err)
			}
			start := time.Now()
			lab.WaitFor(b, 5*time.Minute, s.name+": traffic back", func() bool {
				_, got, _ := s.m.Client.Echo(s.m.backend, 1, 0, 200*time.Millisecond)
				return got == 1
			})
			s.took = append(s.took, time.Since(start))
		}
	}
	ratios := make([]float64, rounds)
	for r := range rounds {
		ratios[r] = sides[0].took[r].Seconds() / sides[1].took[r].Seconds()
	}
	for _, s := range sides {
		sorted := slices.Clone(s.took)
		slices.Sort(sorted)
		med := (sorted[rounds/2-1] + sorted[rounds/2]) / 2
		b.ReportMetric(med.Seconds(), s.name+"-median-s")
		b.ReportMetric(sorted[rounds-1].Seconds(), s.name+"-max-s")
		b.Logf("%s: %v", s.name, s.took)
	}
	slices.Sort(ratios)
	b.ReportMetric((ratios[rounds/2-1]+ratios[rounds/2])/2, "manage/probe-median-ratio")
	b.Logf("per-round manage/probe ratios: %s", fmt.Sprint(ratios))
	b.Logf("probe actions by the manage side: %d", probeActions(b, sides[0].a))
}
