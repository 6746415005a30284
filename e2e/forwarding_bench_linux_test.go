package e2e

import (
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/neighwatch/neighwatch/bpf"
	"github.com/neighwatch/neighwatch/internal/dev/bench/progs"
	"github.com/neighwatch/neighwatch/internal/dev/lab"
	"github.com/neighwatch/neighwatch/internal/dev/pkt"
	"golang.org/x/sys/unix"
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
	n1, err := l.Node.Ifindex(lab.NodeBackendIf)
	if err != nil {
		b.Fatal(err)
	}
	cmac, _ := l.Client.MAC(lab.ClientIf)
	n1mac, _ := l.Node.MAC(lab.NodeBackendIf)
	// No IPv6 on the path: router solicitations would make STALE
	// link-local entries at random moments; the stale entry stays.
	for _, ns := range []struct {
		n   lab.NS
		dev string
	}{{l.Client, lab.ClientIf}, {l.Node, lab.NodeClientIf}, {l.Node, lab.NodeBackendIf}} {
		if err := ns.n.Sysctl("net.ipv6.conf."+ns.dev+".disable_ipv6", "1"); err != nil {
			b.Fatal(err)
		}
	}
	if err := l.Node.Sysctl("net.ipv4.neigh."+lab.NodeClientIf+".gc_stale_time", "3600"); err != nil {
		b.Fatal(err)
	}
	if err := l.Node.SetNeigh(lab.NodeClientIf, lab.ClientIP, cmac, "permanent"); err != nil {
		b.Fatal(err)
	}
	staleIP := netip.MustParseAddr("10.0.1.99")
	if err := l.Node.SetNeigh(lab.NodeClientIf, staleIP, net.HardwareAddr{2, 0, 0, 0, 9, 9}, "stale"); err != nil {
		b.Fatal(err)
	}
	staleSince := time.Now()

	xdp, err := progs.Load()
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { xdp.Close() })
	c0, _ := l.Client.Ifindex(lab.ClientIf)
	if err := l.Client.Do(func() error {
		drop, err := link.AttachTCX(link.TCXOptions{Interface: c0, Program: xdp.TcDropBench, Attach: ebpf.AttachTCXIngress})
		if err == nil {
			b.Cleanup(func() { drop.Close() })
		}
		return err
	}); err != nil {
		b.Fatal(err)
	}
	dp, err := bpf.LoadDatapath()
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { dp.Close() })
	if err := l.Node.Do(func() error { return dp.Attach(n1, bpf.ModeLegacy) }); err != nil {
		b.Fatal(err)
	}

	// aim points the injected frames at dst: the template the XDP
	// program writes over each frame (Ethernet, IPv4 and UDP headers).
	aim := func(dst netip.Addr) []byte {
		frame := pkt.UDP4(n1mac, net.HardwareAddr{2, 0, 0, 0, 0xb0, 1}, lab.BackendIP, dst, 64, 0, 18) // 60 bytes
		var tmpl [42]byte
		copy(tmpl[:], frame)
		if err := xdp.Tmpl.Set(tmpl); err != nil {
			b.Fatal(err)
		}
		return frame
	}
	// inject sends n frames into n1 from CPU 0 and returns how long
	// they took; every one must reach the client's drop program.
	inject := func(frame []byte, n uint32) time.Duration {
		ctx := make([]byte, 24) // struct xdp_md
		binary.NativeEndian.PutUint32(ctx[4:], uint32(len(frame)))
		binary.NativeEndian.PutUint32(ctx[12:], uint32(n1))
		var before, after uint64
		_ = xdp.Dropped.Get(&before)
		var d time.Duration
		if err := l.Node.Do(func() error {
			var set unix.CPUSet
			set.Set(0)
			if err := unix.SchedSetaffinity(0, &set); err != nil {
				return err
			}
			start := time.Now()
			_, err := xdp.XdpPass.Run(&ebpf.RunOptions{Data: frame, Repeat: n, Flags: unix.BPF_F_TEST_XDP_LIVE_FRAMES, Context: ctx})
			d = time.Since(start)
			return err
		}); err != nil {
			b.Fatal(err)
		}
		_ = xdp.Dropped.Get(&after)
		if got := after - before; got < uint64(n)*99/100 {
			b.Fatalf("only %d of %d injected frames reached the client", got, n)
		}
		return d
	}
	// measure injects back to back for the periods and returns packets
	// a second.
	measure := func(frame []byte) float64 {
		const chunk = 250_000
		var frames uint64
		var busy time.Duration
		start := time.Now()
		for time.Since(start) < time.Duration(periods)*period {
			busy += inject(frame, chunk)
			frames += chunk
		}
		return float64(frames) / busy.Seconds()
	}
	attachedSeconds := func(a *agentProc) float64 {
		v, _ := strconv.ParseFloat(metricValue(a.metrics(b), "neighwatch_tracer_hooks_attached_seconds_total"), 64)
		return v
	}
	healthy, hole := aim(lab.ClientIP), aim(staleIP)
	inject(healthy, 1_000_000) // warm up

	pps, ratios, attached, busy := series{}, series{}, series{}, series{}
	b.ResetTimer()
	for r := 0; r < b.N; r++ {
		aim(lab.ClientIP)
		pps.add("no agent", measure(healthy))
		aim(staleIP)
		pps.add("no agent, to the stale-long entry", measure(hole))
		// The agent finds the entry stale-long when it starts: its STALE
		// age past the default threshold (1m).
		time.Sleep(time.Until(staleSince.Add(time.Minute + 5*time.Second)))
		a := startAgent(b, l.Node, sockPath(b))
		time.Sleep(settle)
		before, at, cpu0 := attachedSeconds(a), time.Now(), procCPU(b, a.pid())
		aim(lab.ClientIP)
		pps.add("agent", measure(healthy))
		mid, at2, cpu1 := attachedSeconds(a), time.Now(), procCPU(b, a.pid())
		attached.add("hooks attached, agent", (mid-before)/at2.Sub(at).Seconds())
		busy.add("agent CPU, agent", (cpu1-cpu0).Seconds()/at2.Sub(at).Seconds())
		aim(staleIP)
		pps.add("agent, to the stale-long entry", measure(hole))
		attached.add("hooks attached, agent, to the stale-long entry", (attachedSeconds(a)-mid)/time.Since(at2).Seconds())
		busy.add("agent CPU, agent, to the stale-long entry", (procCPU(b, a.pid())-cpu1).Seconds()/time.Since(at2).Seconds())
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
		last := func(k string) float64 { return pps[k][len(pps[k])-1] }
		ratios.add("agent/no agent", last("agent")/last("no agent"))
		ratios.add("agent/no agent, to the stale-long entry", last("agent, to the stale-long entry")/last("no agent, to the stale-long entry"))
	}
	b.StopTimer()
	var out strings.Builder
	fmt.Fprintf(&out, "rounds=%d, each configuration over %d period(s) of %v\n", b.N, periods, period)
	for _, s := range []series{pps, ratios, attached, busy} {
		keys := make([]string, 0, len(s))
		for k := range s {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			m, lo, hi := stats(s[k])
			if s[k][0] > 1000 { // packets a second: Mpps
				m, lo, hi = m/1e6, lo/1e6, hi/1e6
			}
			fmt.Fprintf(&out, "  %-52s median %.4f  (min %.4f, max %.4f)\n", k, m, lo, hi)
		}
	}
	fmt.Print(out.String())
	if p := os.Getenv("NEIGHWATCH_BENCH_OUT"); p != "" {
		if err := os.WriteFile(p, []byte(out.String()), 0o644); err != nil {
			b.Error(err)
		}
	}
	m, _, _ := stats(ratios["agent/no agent"])
	b.ReportMetric(m, "agent/none")
	m, _, _ = stats(ratios["agent/no agent, to the stale-long entry"])
	b.ReportMetric(m, "agent/none-hole")
}

type series map[string][]float64

func (s series) add(k string, v float64) { s[k] = append(s[k], v) }

// stats returns the median, min and max of v.
func stats(v []float64) (med, lo, hi float64) {
	x := append([]float64(nil), v...)
	sort.Float64s(x)
	return x[len(x)/2], x[0], x[len(x)-1]
}
