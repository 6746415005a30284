package e2e

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/neighwatch/neighwatch/bpf"
	"github.com/neighwatch/neighwatch/internal/dev/bench/fwdrig"
	"github.com/neighwatch/neighwatch/internal/dev/lab"
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
// from /proc. And the cost over time taken apart: through each round
// the agent's per-packet programs' links are listed every 2 ms (the
// windows, seen from outside; the configurations without the agent run
// beside the same listing) and the frames are injected in chunks of
// 50,000, so that chunks inside a window are set against chunks beside
// it (within a second): the in-window cost, which the machine's drift
// over a period does not blur, times the share of the time the hooks
// were attached is what the hooks cost averaged over time. Outside the
// windows no program of the agent runs per packet. Run it as root:
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

	// NEIGHWATCH_BENCH_CHUNK: frames an injection sends (chunkFrames;
	// fewer in an emulated guest, where 50,000 take longer than a window).
	frameCount := uint64(chunkFrames)
	if v, err := strconv.ParseUint(os.Getenv("NEIGHWATCH_BENCH_CHUNK"), 10, 32); err == nil && v > 0 {
		frameCount = v
	}
	// measure injects back to back for the periods, in chunks whose
	// times it keeps in log (nil: none kept), and returns packets a
	// second.
	measure := func(frame []byte, log *[]chunk) float64 {
		var frames uint64
		var busy time.Duration
		start := time.Now()
		for time.Since(start) < time.Duration(periods)*period {
			t0 := time.Now()
			d := rig.Inject(b, frame, uint32(frameCount))
			if log != nil {
				*log = append(*log, chunk{from: t0, to: time.Now(), busy: d, frames: frameCount})
			}
			busy += d
			frames += frameCount
		}
		return float64(frames) / busy.Seconds()
	}
	attachedSeconds := func(a *agentProc) float64 {
		v, _ := strconv.ParseFloat(metricValue(a.metrics(b), "neighwatch_tracer_hooks_attached_seconds_total"), 64)
		return v
	}
	healthy, hole := rig.Aim(b, lab.ClientIP), rig.Aim(b, staleIP)
	rig.Inject(b, healthy, 1_000_000) // warm up

	pps, ratios, attached, busy, windows := fwdrig.Series{}, fwdrig.Series{}, fwdrig.Series{}, fwdrig.Series{}, fwdrig.Series{}
	b.ResetTimer()
	for r := 0; r < b.N; r++ {
		// The links are listed through the whole round, the
		// configurations without the agent too, so that every
		// configuration runs beside the same listing.
		hw := watchHooks(b)
		rig.Aim(b, lab.ClientIP)
		pps.Add("no agent", measure(healthy, nil))
		rig.Aim(b, staleIP)
		pps.Add("no agent, to the stale-long entry", measure(hole, nil))
		// The agent finds the entry stale-long when it starts: its STALE
		// age past the default threshold (1m).
		time.Sleep(time.Until(staleSince.Add(time.Minute + 5*time.Second)))
		a := startAgent(b, l.Node, sockPath(b))
		time.Sleep(settle)
		var log, logHole []chunk
		before, at, cpu0 := attachedSeconds(a), time.Now(), procCPU(b, a.pid())
		rig.Aim(b, lab.ClientIP)
		pps.Add("agent", measure(healthy, &log))
		mid, at2, cpu1 := attachedSeconds(a), time.Now(), procCPU(b, a.pid())
		attached.Add("hooks attached, agent", (mid-before)/at2.Sub(at).Seconds())
		busy.Add("agent CPU, agent", (cpu1-cpu0).Seconds()/at2.Sub(at).Seconds())
		rig.Aim(b, staleIP)
		pps.Add("agent, to the stale-long entry", measure(hole, &logHole))
		attached.Add("hooks attached, agent, to the stale-long entry", (attachedSeconds(a)-mid)/time.Since(at2).Seconds())
		busy.Add("agent CPU, agent, to the stale-long entry", (procCPU(b, a.pid())-cpu1).Seconds()/time.Since(at2).Seconds())
		spans := hw.stop(b)
		for _, c := range []struct {
			name string
			log  []chunk
		}{{"agent", log}, {"agent, to the stale-long entry", logHole}} {
			in, near, duty, ok := split(c.log, spans)
			attached.Add("hooks attached (the links seen), "+c.name, duty)
			if !ok {
				b.Logf("round %d, %s: no chunk both inside a window and beside one (%d windows seen)", r, c.name, len(spans))
				continue
			}
			windows.Add("in a window / beside it, "+c.name, in/near)
			windows.Add("averaged cost (attached share x in-window cost), "+c.name, duty*(1-in/near))
		}
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
	fwdrig.Report(&out, pps, ratios, attached, busy, windows)
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

// chunkFrames is how many frames one injection sends: about 15 ms at
// this machine's rate, so that a 1 s window holds dozens of chunks.
const chunkFrames = 50_000

// chunk is one injection: when it ran (wall time, the injection's own
// set-up included), how long the kernel took to send its frames, and
// how many it sent.
type chunk struct {
	from, to time.Time
	busy     time.Duration
	frames   uint64
}

// span is a time the agent's per-packet hooks were attached, as seen
// from outside: from the first poll that found a link of one of its
// per-packet programs to the first that did not.
type span struct{ on, off time.Time }

// hookPoll is how often hookWatch lists the kernel's links: the
// uncertainty of each span's ends.
const hookPoll = 2 * time.Millisecond

// hookWatch follows the kernel's links for the agent's per-packet
// programs (the transmit hook, the fentry programs, the source-MAC
// program), from a goroutine on CPU 1, away from the injecting CPU.
type hookWatch struct {
	quit  chan struct{}
	done  chan error
	log   spanLog
	spans []span // the log's, once stopped
}

// perPacket names the agent's per-packet programs (kernel names are
// cut at 15 bytes).
func perPacket(name string) bool {
	return name == "tr_xmit" || name == "tr_source" || strings.HasPrefix(name, "fe_")
}

func watchHooks(b *testing.B) *hookWatch {
	b.Helper()
	w := &hookWatch{quit: make(chan struct{}), done: make(chan error, 1)}
	go func() {
		runtime.LockOSThread() // pinned away from CPU 0 for good: the thread dies with the goroutine
		var set unix.CPUSet
		set.Set(1)
		if err := unix.SchedSetaffinity(0, &set); err != nil {
			w.done <- err
			return
		}
		names := map[ebpf.ProgramID]string{}
		for {
			attached, err := hooksAttached(names)
			now := time.Now()
			switch {
			case errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.ENOENT):
				// A link being attached (its ID not yet settled) or
				// just gone: this listing says nothing; the next will.
			case err != nil:
				w.done <- err
				return
			default:
				w.log.note(attached, now)
			}
			select {
			case <-w.quit:
				w.spans = w.log.closed(now)
				w.done <- nil
				return
			case <-time.After(hookPoll):
			}
		}
	}()
	return w
}

// hooksAttached reports whether a link of one of the agent's per-packet
// programs is in the kernel; names caches program names by ID.
func hooksAttached(names map[ebpf.ProgramID]string) (bool, error) {
	var it link.Iterator
	defer it.Close()
	for it.Next() {
		info, err := it.Link.Info()
		if err != nil {
			continue // detached meanwhile
		}
		name, ok := names[info.Program]
		if !ok {
			if p, err := ebpf.NewProgramFromID(info.Program); err == nil {
				if pi, err := p.Info(); err == nil {
					name = pi.Name
				}
				p.Close()
			}
			names[info.Program] = name
		}
		if perPacket(name) {
			return true, nil
		}
	}
	return false, it.Err()
}

// stop ends the watch and returns the spans seen.
func (w *hookWatch) stop(b *testing.B) []span {
	b.Helper()
	close(w.quit)
	if err := <-w.done; err != nil {
		b.Fatalf("listing the kernel's links: %v", err)
	}
	return w.spans
}

// split sorts log's chunks by the spans: those wholly inside one (a
// poll's width in from its ends), and those wholly outside every span
// but within a second of one's end (beside a window, so that the
// machine's drift over a period does not enter their ratio). It returns
// the packets a second of each, the share of the log's time the hooks
// were attached, and false when either side has no chunk.
func split(log []chunk, spans []span) (in, near, duty float64, ok bool) {
	if len(log) == 0 {
		return 0, 0, 0, false
	}
	from, to := log[0].from, log[len(log)-1].to
	var attached time.Duration
	for _, s := range spans {
		on, off := max(s.on.UnixNano(), from.UnixNano()), min(s.off.UnixNano(), to.UnixNano())
		if off > on {
			attached += time.Duration(off - on)
		}
	}
	duty = attached.Seconds() / to.Sub(from).Seconds()
	const margin, beside = 2 * hookPoll, time.Second
	var inBusy, nearBusy time.Duration
	var inN, nearN uint64
	for _, c := range log {
		inside, apart, nearby := false, true, false
		for _, s := range spans {
			if !c.from.Before(s.on.Add(margin)) && !c.to.After(s.off.Add(-margin)) {
				inside = true
			}
			if c.to.After(s.on.Add(-margin)) && c.from.Before(s.off.Add(margin)) {
				apart = false
			}
			if c.to.After(s.on.Add(-beside)) && c.from.Before(s.off.Add(beside)) {
				nearby = true
			}
		}
		switch {
		case inside:
			inBusy += c.busy
			inN += c.frames
		case apart && nearby:
			nearBusy += c.busy
			nearN += c.frames
		}
	}
	if inN == 0 || nearN == 0 {
		return 0, 0, duty, false
	}
	return float64(inN) / inBusy.Seconds(), float64(nearN) / nearBusy.Seconds(), duty, true
}
