package e2e

import (
	"fmt"
	"net"
	"os"
	"testing"
	"time"

	"github.com/neighwatch/neighwatch/internal/dev/lab"
	"golang.org/x/sys/unix"
)

// BenchmarkPacedFlood measures the flood of issue 64 that
// TestHijackHiddenInAFlood does not pass: every one of n entries moved
// once, to a MAC of its own, at a steady rate (each move then ranks with
// a hijack: a first move, to a MAC of one claim), and 10 s in, one reply
// hijacks a silent host. It asserts nothing; it logs, per run, whether
// and when the hijack became a conflict, when NeighbourMoveFlood paged
// (a real Prometheus and Alertmanager, every for: 2 s), the agent's CPU,
// the frames the node sent (its probes: it sends nothing else there)
// and the move checks by outcome. NEIGHWATCH_FLOOD_RUNS runs each size
// that many times (1 by default).
//
//	go test ./e2e -run '^$' -bench PacedFlood -benchtime 1x
func BenchmarkPacedFlood(b *testing.B) {
	runs := 1
	if n, err := fmt.Sscan(os.Getenv("NEIGHWATCH_FLOOD_RUNS"), &runs); err != nil || n != 1 {
		runs = 1
	}
	for _, sc := range []struct{ n, rate int }{{2000, 200}, {10000, 1000}} {
		for run := range runs {
			b.Run(fmt.Sprintf("%d-at-%d/%d", sc.n, sc.rate, run), func(b *testing.B) {
				for range b.N {
					pacedFlood(b, sc.n, sc.rate)
				}
			})
		}
	}
}

func pacedFlood(b *testing.B, n, rate int) {
	lab.RaiseGCThresh(b, 4*n+4096)
	seg := lab.NewSegment(b, lab.Unique("pf"), 2)
	victimIP := lab.SegmentHostIP(0)
	nodeMAC, err := seg.Node.MAC(lab.SegmentBridge)
	if err != nil {
		b.Fatal(err)
	}
	if err := seg.Hosts[0].SetNeigh(lab.SegmentHostIf, lab.SegmentNodeIP, nodeMAC, "permanent"); err != nil {
		b.Fatal(err)
	}
	// The entries at their round-0 MACs, and the moves to other MACs,
	// each one of its own: one round moves every entry once.
	held := lab.FloodMovers(n)
	if err := seg.Node.AddNeighs(lab.SegmentBridge, held, unix.NUD_STALE); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = seg.Node.IP("neigh", "flush", "dev", lab.SegmentBridge) })
	moves := make([]lab.Mover, n)
	for i, m := range held {
		mac := append(net.HardwareAddr(nil), m.MAC...)
		mac[1] = 0x78
		moves[i] = lab.Mover{IP: m.IP, MAC: mac}
	}
	sock := sockPath(b)
	a := startAgent(b, seg.Node, sock, "--tracer", "off", "--remediation", "on", "--remediation.verify-timeout", "1s")
	// The agent hears the victim answer before the flood, as an agent
	// that runs all along has: the node resolves it, and later
	// re-validates its STALE entry, which the victim answers at its MAC.
	if err := seg.Node.Ping(victimIP, 1, 2*time.Second); err != nil {
		b.Fatal(err)
	}
	victimMAC, err := seg.Hosts[0].MAC(lab.SegmentHostIf)
	if err != nil {
		b.Fatal(err)
	}
	if err := seg.Node.SetNeigh(lab.SegmentBridge, victimIP, victimMAC, "stale"); err != nil {
		b.Fatal(err)
	}
	if err := seg.Node.Ping(victimIP, 1, 2*time.Second); err != nil {
		b.Fatal(err)
	}
	lab.WaitFor(b, 30*time.Second, "the agent to hear the victim at its MAC", func() bool {
		e, ok := findEntry(statusJSON(b, sock), lab.SegmentBridge, victimIP.String())
		return ok && e.SeenLLAddr == victimMAC.String()
	})
	alerts := shippedAlerts(b)
	hooks := startAlerting(b, seg.Node, alerts)
	attacker := seg.Hosts[1]
	spoofMAC := net.HardwareAddr{0x02, 0x66, 0, 0, 0, 1}
	cpu0, sent0 := procCPU(b, a.pid()), nodeSent(b, seg)
	stop, done := make(chan struct{}), make(chan struct{})
	var flood lab.MoveFlood
	var floodErr error
	start := time.Now()
	go func() {
		defer close(done)
		flood, floodErr = attacker.SendMoves(lab.SegmentHostIf, nodeMAC, moves, rate, 1, stop)
	}()
	defer func() { close(stop); <-done }()
	// 10 s in (the issue's), the hijack of the silent victim.
	time.Sleep(10 * time.Second)
	if _, err := attacker.SendMoves(lab.SegmentHostIf, nodeMAC, []lab.Mover{{IP: victimIP, MAC: spoofMAC}}, 0, 1, nil); err != nil {
		b.Fatal(err)
	}
	var hijacked time.Time
	lab.WaitFor(b, 30*time.Second, "the node's kernel to take the spoofer's MAC", func() bool {
		e, err := seg.Node.KernelEntry(lab.SegmentBridge, victimIP)
		if err == nil && e.LLAddr.String() == spoofMAC.String() {
			hijacked = time.Now()
			return true
		}
		return false
	})
	// Up to 30 s for the conflict (the issue asks 10).
	conflict := time.Duration(-1)
	for time.Since(hijacked) < 30*time.Second {
		if e, ok := findEntry(statusJSON(b, sock), lab.SegmentBridge, victimIP.String()); ok && e.Class == "conflict" {
			conflict = time.Since(hijacked)
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	paged := time.Duration(-1)
	if at, ok := hooks.find("NeighbourMoveFlood", "firing", map[string]string{"interface": lab.SegmentBridge}); ok {
		paged = at.Sub(start)
	}
	<-done
	if floodErr != nil {
		b.Fatal(floodErr)
	}
	elapsed := time.Since(start)
	cpu, sent := procCPU(b, a.pid())-cpu0, nodeSent(b, seg)-sent0
	body := a.metrics(b)
	found := "not found within 30 s"
	if conflict >= 0 {
		found = fmt.Sprintf("conflict %.1fs after the kernel took it", conflict.Seconds())
	}
	checks := ""
	for _, o := range []string{"answered", "unanswered", "failed", "dropped"} {
		checks += fmt.Sprintf(" %s %s", o, metricValue(body, `neighwatch_remediation_move_checks_total{outcome="`+o+`"}`))
	}
	b.Logf("paced flood | %d entries moved once at %d/s: sent %d in %v | the hijack 10 s in: %s | NeighbourMoveFlood %v after the flood began | agent CPU %.2f s over %v (%.1f%% of a CPU) | the node sent %d frames (%.1f/s) | move checks:%s",
		n, rate, flood.Sent, flood.Took.Round(time.Millisecond), found, paged.Round(100*time.Millisecond), cpu.Seconds(), elapsed.Round(time.Second),
		100*cpu.Seconds()/elapsed.Seconds(), sent, float64(sent)/elapsed.Seconds(), checks)
	b.ReportMetric(float64(sent)/elapsed.Seconds(), "node-frames/s")
	if conflict >= 0 {
		b.ReportMetric(conflict.Seconds(), "s-to-conflict")
	}
}
