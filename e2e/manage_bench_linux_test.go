package e2e

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/neighwatch/neighwatch/internal/dev/lab"
)

// BenchmarkRecoveryAfterMove measures, on the lab with the project's
// legacy datapath, how long traffic stays black-holed after the client
// moves with no ARP reaching the node: on the default strategies (the
// entry managed before the move, repaired on evidence after it) against
// the probe strategy alone (scope stuck: it acts once the entry is
// stuck), ten moves each, interleaved round by round, with the kernel's
// default timers and with short ones.
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
		// Scope stuck, the default, on both sides; the manage side keeps
		// the default strategies (manage first).
		args = append(args, "--remediation.scope", "stuck")
		if strategy == "probe" {
			args = append(args, "--remediation.strategies", strategy)
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
	b.Logf("probe actions by the manage side: %d", probeActions(sides[0].a.metrics(b)))
}

// BenchmarkManagedProbeTraffic counts what managed entries cost the
// network: 1,000 entries on n0 made managed (as the manage strategy
// makes them) for hosts that answer, the kernel's own ARP requests
// counted on n0 for one minute after a minute of warm-up, with the
// kernel's default timers. Reported per 1,000 entries per minute.
func BenchmarkManagedProbeTraffic(b *testing.B) {
	lab.Require(b)
	const n = 1000
	lab.RaiseGCThresh(b, 8*n)
	for range b.N {
		l := lab.New(b, "bmp")
		var client, node []string
		node = append(node, "addr add 10.1.255.254/16 dev "+lab.NodeClientIf)
		for i := range n {
			ip := fmt.Sprintf("10.1.%d.%d", i/250, i%250+1)
			client = append(client, "addr add "+ip+"/16 dev "+lab.ClientIf)
			node = append(node, "neigh replace "+ip+" dev "+lab.NodeClientIf+" managed protocol 110")
		}
		if err := l.Client.Batch(client); err != nil {
			b.Fatal(err)
		}
		if err := l.Node.Batch(node[:1]); err != nil {
			b.Fatal(err)
		}
		if err := l.Node.Batch(node[1:]); err != nil {
			b.Fatal(err)
		}
		nodeMAC, err := l.Node.MAC(lab.NodeClientIf)
		if err != nil {
			b.Fatal(err)
		}
		time.Sleep(time.Minute)
		stop, err := l.Node.Capture(lab.NodeClientIf, func(f []byte) bool {
			// ARP requests (opcode 1) the node sent.
			return len(f) >= 22 && string(f[6:12]) == string(nodeMAC) && f[12] == 0x08 && f[13] == 0x06 && f[21] == 1
		})
		if err != nil {
			b.Fatal(err)
		}
		time.Sleep(time.Minute)
		got := len(stop())
		out, _ := l.Node.IPOutput("neigh", "show", "dev", lab.NodeClientIf)
		b.ReportMetric(float64(got)*1000/n, "arp-requests/1000-entries/min")
		b.Logf("%d ARP requests in a minute for %d managed entries; states: %d REACHABLE, %d STALE, %d DELAY, %d PROBE",
			got, n, strings.Count(out, "REACHABLE"), strings.Count(out, "STALE"), strings.Count(out, "DELAY"), strings.Count(out, "PROBE"))
	}
}
