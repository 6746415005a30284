package e2e

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/neighwatch/neighwatch/bpf"
	"github.com/neighwatch/neighwatch/internal/dev/bench/fwdrig"
	"github.com/neighwatch/neighwatch/internal/dev/lab"
)

// BenchmarkForwardingWithAgent measures what the agent costs forwarding
// as deployed: the agent binary on its defaults (the tracer on auto, its
// per-packet hooks 1 s of every 30 s while some entry is stale-long),
// against no agent at all, side by side. Frames (64-byte UDP) are
// injected back to back from one pinned CPU into the node's
// backend-facing veth, forwarded by the legacy datapath (bpf_fib_lookup
// + bpf_redirect, the failure's datapath) and dropped at the client; a
// STALE entry at another MAC sits on the egress interface the whole run,
// stale-long from the first round on. Two traffics: to the client (a
// PERMANENT entry), the stale-long entry idle beside it, and to the
// stale-long entry itself (every frame a bypass hit: the black hole the
// agent is there to find). Each configuration is measured over
// NEIGHWATCH_BENCH_PERIODS periods of 30 s (1), and each round runs all
// four: without the agent, then with one started for the round (ready
// before it is measured) and stopped after. Ratios are per round; the
// fraction of the time the hooks were attached is the agent's own
// neighwatch_tracer_hooks_attached_seconds_total, and the agent's CPU
// from /proc. Run it as root:
//
//	go test ./e2e -run '^$' -bench ForwardingWithAgent -benchtime 5x -timeout 60m
func BenchmarkForwardingWithAgent(b *testing.B) {
	if ok, why := lab.Privileged(); !ok {
		b.Skip(why)
	}
	periods := 1
	if v, err := strconv.Atoi(os.Getenv("NEIGHWATCH_BENCH_PERIODS")); err == nil && v > 0 {
		periods = v
	}
	const period = 30 * time.Second
	// NEIGHWATCH_BENCH_SETTLE: how long the agent runs after it is ready
	// before it is measured (0: at once).
	settle, _ := time.ParseDuration(os.Getenv("NEIGHWATCH_BENCH_SETTLE"))
	l := lab.New(b, "fwa")
	rig := fwdrig.New(b, l)
	if err := l.Node.Sysctl("net.ipv4.neigh."+lab.NodeClientIf+".gc_stale_time", "3600"); err != nil {
		b.Fatal(err)
	}
	staleIP := netip.MustParseAddr("10.0.1.99")
	if err := l.Node.SetNeigh(lab.NodeClientIf, staleIP, net.HardwareAddr{2, 0, 0, 0, 9, 9}, "stale"); err != nil {
		b.Fatal(err)
	}
	staleSince := time.Now()
	dp, err := bpf.LoadDatapath()
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { dp.Close() })
	if err := l.Node.Do(func() error { return dp.Attach(rig.N1, bpf.ModeLegacy) }); err != nil {
		b.Fatal(err)
	}

	// measure injects back to back for the periods and returns packets
	// a second.
	measure := func(frame []byte) float64 {
		const chunk = 250_000
		var frames uint64
		var busy time.Duration
		start := time.Now()
		for time.Since(start) < time.Duration(periods)*period {
			busy += rig.Inject(b, frame, chunk)
			frames += chunk
		}
		return float64(frames) / busy.Seconds()
	}
	attachedSeconds := func(a *agentProc) float64 {
		v, _ := strconv.ParseFloat(metricValue(a.metrics(b), "neighwatch_tracer_hooks_attached_seconds_total"), 64)
		return v
	}
	healthy, hole := rig.Aim(b, lab.ClientIP), rig.Aim(b, staleIP)
	rig.Inject(b, healthy, 1_000_000) // warm up

	pps, ratios, attached, busy := fwdrig.Series{}, fwdrig.Series{}, fwdrig.Series{}, fwdrig.Series{}
	b.ResetTimer()
	for r := 0; r < b.N; r++ {
		rig.Aim(b, lab.ClientIP)
		pps.Add("no agent", measure(healthy))
		rig.Aim(b, staleIP)
		pps.Add("no agent, to the stale-long entry", measure(hole))
		// The agent finds the entry stale-long when it starts: its STALE
		// age past the default threshold (1m).
		time.Sleep(time.Until(staleSince.Add(time.Minute + 5*time.Second)))
		a := startAgent(b, l.Node, sockPath(b))
		time.Sleep(settle)
		before, at, cpu0 := attachedSeconds(a), time.Now(), procCPU(b, a.pid())
		rig.Aim(b, lab.ClientIP)
		pps.Add("agent", measure(healthy))
		mid, at2, cpu1 := attachedSeconds(a), time.Now(), procCPU(b, a.pid())
		attached.Add("hooks attached, agent", (mid-before)/at2.Sub(at).Seconds())
		busy.Add("agent CPU, agent", (cpu1-cpu0).Seconds()/at2.Sub(at).Seconds())
		rig.Aim(b, staleIP)
		pps.Add("agent, to the stale-long entry", measure(hole))
		attached.Add("hooks attached, agent, to the stale-long entry", (attachedSeconds(a)-mid)/time.Since(at2).Seconds())
		busy.Add("agent CPU, agent, to the stale-long entry", (procCPU(b, a.pid())-cpu1).Seconds()/time.Since(at2).Seconds())
		// What is measured is the agent at work: its hooks attached in
		// each, and the black hole's frames counted as bypass traffic.
		e, ok := findEntry(statusJSON(b, a.sock), lab.NodeClientIf, staleIP.String())
		if !ok || e.Class == "ok" || e.BypassPackets == 0 {
			b.Fatalf("the agent did not see the frames to the stale-long entry: %+v (found %v)\n%s", e, ok, a.logs())
		}
		for k, v := range attached {
			if v[len(v)-1] == 0 {
				b.Fatalf("%s: the per-packet hooks were never attached\n%s", k, a.logs())
			}
		}
		a.stop(b)
		last := pps.Last
		ratios.Add("agent/no agent", last("agent")/last("no agent"))
		ratios.Add("agent/no agent, to the stale-long entry", last("agent, to the stale-long entry")/last("no agent, to the stale-long entry"))
	}
	b.StopTimer()
	var out strings.Builder
	fmt.Fprintf(&out, "rounds=%d, each configuration over %d period(s) of %v\n", b.N, periods, period)
	fwdrig.Report(&out, pps, ratios, attached, busy)
	fmt.Print(out.String())
	if p := os.Getenv("NEIGHWATCH_BENCH_OUT"); p != "" {
		if err := os.WriteFile(p, []byte(out.String()), 0o644); err != nil {
			b.Error(err)
		}
	}
	m, _, _ := fwdrig.Stats(ratios["agent/no agent"])
	b.ReportMetric(m, "agent/none")
	m, _, _ = fwdrig.Stats(ratios["agent/no agent, to the stale-long entry"])
	b.ReportMetric(m, "agent/none-hole")
}
