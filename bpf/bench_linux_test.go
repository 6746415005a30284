package bpf

import (
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/neighwatch/neighwatch/internal/dev/bench/fwdrig"
	"github.com/neighwatch/neighwatch/internal/dev/lab"
	"github.com/neighwatch/neighwatch/internal/dev/pkt"
	"golang.org/x/sys/unix"
)

// fwdBench is the forwarding benchmark's lab: frames are injected into the
// node's backend-facing veth (n1) with XDP live frames and leave through
// n0 towards the client, where a tcx program drops them (fwdrig).
type fwdBench struct {
	rig     *fwdrig.Rig
	frame   []byte
	dp      *Datapath
	tracers map[string]*Tracer
	empty   link.Link // an empty program on the transmit tracepoint
}

func newFwdBench(b *testing.B) *fwdBench {
	if ok, why := lab.Privileged(); !ok {
		b.Skip(why)
	}
	f := &fwdBench{rig: fwdrig.New(b, lab.New(b, "fwb")), tracers: map[string]*Tracer{}}
	f.frame = f.rig.Aim(b, lab.ClientIP)
	l := f.rig.L
	var err error
	if f.dp, err = LoadDatapath(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { f.dp.Close() })
	ino, _ := NetNSInode("/run/netns/" + l.Node.Name)
	for name, filter := range map[string]uint32{"full": 4, "no-mac-filter": 3, "watched-only": 2, "naive": 1} {
		tr, err := LoadTracer(TracerOptions{Mode: TracerXmit, NetNSIno: ino, xmitFilter: filter})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { tr.Close() })
		if err := tr.SetPerPacket(false); err != nil {
			b.Fatal(err)
		}
		if err := tr.SetWatched([]int{f.rig.N0, f.rig.N1}, false); err != nil {
			b.Fatal(err)
		}
		f.tracers[name] = tr
	}
	return f
}

// setup puts the node in one configuration: datapath mode ("" = kernel
// forwarding) and tracer variant ("" = none).
func (f *fwdBench) setup(b *testing.B, mode Mode, tracer string) {
	for name, tr := range f.tracers {
		if err := tr.SetPerPacket(name == tracer); err != nil {
			b.Fatal(err)
		}
	}
	if f.empty != nil {
		f.empty.Close()
		f.empty = nil
	}
	var err error
	switch tracer {
	case "empty-tp_btf":
		f.empty, err = link.AttachTracing(link.TracingOptions{Program: f.rig.Progs.EmptyTpBtf})
	case "empty-raw_tp":
		f.empty, err = link.AttachRawTracepoint(link.RawTracepointOptions{Name: "net_dev_start_xmit", Program: f.rig.Progs.EmptyRawTp})
	case "empty-tcx-egress":
		err = f.rig.L.Node.Do(func() error {
			var err error
			f.empty, err = link.AttachTCX(link.TCXOptions{Interface: f.rig.N0, Program: f.rig.Progs.EmptyTcxEgress, Attach: ebpf.AttachTCXEgress})
			return err
		})
	}
	if err != nil {
		b.Fatal(err)
	}
	cur := f.dp.Mode(f.rig.N1)
	switch {
	case mode == "" && cur != "":
		if err := f.dp.Detach(f.rig.N1); err != nil {
			b.Fatal(err)
		}
	case mode != "" && cur == "":
		if err := f.rig.L.Node.Do(func() error { return f.dp.Attach(f.rig.N1, mode) }); err != nil {
			b.Fatal(err)
		}
	case mode != "" && cur != mode:
		if err := f.dp.SetMode(f.rig.N1, mode); err != nil {
			b.Fatal(err)
		}
	}
}

// inject sends n frames into n1 from one pinned CPU and returns packets per
// second. Every frame must come out at the client's drop program.
func (f *fwdBench) inject(b *testing.B, n uint32) float64 {
	return float64(n) / f.rig.Inject(b, f.frame, n).Seconds()
}

// BenchmarkForwarding measures injected forwarding throughput (64-byte UDP
// frames, one core) for kernel forwarding, the legacy and neigh datapaths,
// each with and without the xmit tracer, and the tracer's filter steps.
// Each benchmark iteration is one round that runs every configuration once
// on the same machine state; ratios are taken per round and reported as
// medians with their range. Run it as
//
//	go test ./bpf -run '^$' -bench Forwarding -benchtime 15x
func BenchmarkForwarding(b *testing.B) {
	f := newFwdBench(b)
	const frames = 1_000_000
	type cfg struct {
		name   string
		mode   Mode
		tracer string // a tracer variant, or "empty-tp_btf" / "empty-raw_tp"
		stale  bool   // a STALE entry (other MAC) sits on the egress interface
	}
	cfgs := []cfg{
		{"kernel", "", "", false}, {"kernel+tracer", "", "full", false},
		{"legacy", ModeLegacy, "", false}, {"legacy+tracer", ModeLegacy, "full", false},
		{"neigh", ModeNeigh, "", false}, {"neigh+tracer", ModeNeigh, "full", false},
		{"legacy+naive", ModeLegacy, "naive", false}, {"legacy+watched-only", ModeLegacy, "watched-only", false},
		{"legacy+no-mac-filter", ModeLegacy, "no-mac-filter", false},
		{"legacy+empty-tp_btf", ModeLegacy, "empty-tp_btf", false}, {"legacy+empty-raw_tp", ModeLegacy, "empty-raw_tp", false},
		{"legacy+empty-tcx-egress", ModeLegacy, "empty-tcx-egress", false},
		{"legacy/stale-on-egress", ModeLegacy, "", true}, {"legacy+tracer/stale-on-egress", ModeLegacy, "full", true},
	}
	f.setup(b, ModeLegacy, "")
	f.inject(b, frames) // warm up
	pps := fwdrig.Series{}
	ratios := fwdrig.Series{}
	staleIP := "10.0.1.99"
	b.ResetTimer()
	for r := 0; r < b.N; r++ {
		for _, c := range cfgs {
			if c.stale {
				if err := f.rig.L.Node.SetNeigh(lab.NodeClientIf, mustAddr(staleIP), net.HardwareAddr{2, 0, 0, 0, 9, 9}, "stale"); err != nil {
					b.Fatal(err)
				}
			}
			f.setup(b, c.mode, c.tracer)
			pps.Add(c.name, f.inject(b, frames))
			if c.stale {
				f.rig.L.Node.MustIP(b, "neigh", "del", staleIP, "dev", lab.NodeClientIf)
			}
		}
		last := pps.Last
		ratios.Add("neigh/legacy", last("neigh")/last("legacy"))
		ratios.Add("legacy/kernel", last("legacy")/last("kernel"))
		for _, base := range []string{"kernel", "legacy", "neigh"} {
			ratios.Add(base+" tracer/none", last(base+"+tracer")/last(base))
		}
		ratios.Add("legacy naive/none", last("legacy+naive")/last("legacy"))
		ratios.Add("legacy watched-only/none", last("legacy+watched-only")/last("legacy"))
		ratios.Add("legacy no-mac-filter/none", last("legacy+no-mac-filter")/last("legacy"))
		ratios.Add("legacy empty tp_btf hook/none", last("legacy+empty-tp_btf")/last("legacy"))
		ratios.Add("legacy empty raw_tp hook/none", last("legacy+empty-raw_tp")/last("legacy"))
		ratios.Add("legacy empty tcx egress/none", last("legacy+empty-tcx-egress")/last("legacy"))
		ratios.Add("legacy tracer/none, STALE on egress", last("legacy+tracer/stale-on-egress")/last("legacy/stale-on-egress"))
	}
	b.StopTimer()
	var out strings.Builder
	fmt.Fprintf(&out, "rounds=%d frames/round/config=%d\n", b.N, frames)
	for _, c := range cfgs {
		m, lo, hi := fwdrig.Stats(pps[c.name])
		fmt.Fprintf(&out, "  %-32s median %5.3f Mpps  (min %5.3f, max %5.3f)\n", c.name, m/1e6, lo/1e6, hi/1e6)
	}
	keys := make([]string, 0, len(ratios))
	for k := range ratios {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		m, lo, hi := fwdrig.Stats(ratios[k])
		fmt.Fprintf(&out, "  ratio %-36s median %.3f  (min %.3f, max %.3f)\n", k, m, lo, hi)
	}
	writeReport(b, out.String())
	m, _, _ := fwdrig.Stats(ratios["neigh/legacy"])
	b.ReportMetric(m, "neigh/legacy")
	m, _, _ = fwdrig.Stats(ratios["legacy tracer/none"])
	b.ReportMetric(m, "legacy-tracer/none")
	m, _, _ = fwdrig.Stats(pps["legacy"])
	b.ReportMetric(m, "legacy-pps")
}

// writeReport prints a benchmark's report in full (b.Log output of
// benchmarks is cut to a few lines) and writes it to NEIGHWATCH_BENCH_OUT
// when set, an absolute path (tests run in the package's directory).
func writeReport(b *testing.B, report string) {
	fmt.Print(report)
	if p := os.Getenv("NEIGHWATCH_BENCH_OUT"); p != "" {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			b.Error(err)
		}
		if err := os.WriteFile(p, []byte(report), 0o644); err != nil {
			b.Errorf("write %s: %v", p, err)
		}
	}
}

func mustAddr(s string) netip.Addr { return netip.MustParseAddr(s) }

func mustNetip(s string) netip.Addr { return netip.MustParseAddr(s) }

// BenchmarkDecision measures the datapath per packet with prog.Run
// (BPF_PROG_TEST_RUN) for each decision. The test run repeats the program
// on one skb without restoring it, and the forwarding decisions decrement
// the TTL, so frames start at TTL 255 and a call repeats at most 250
// times. The per-call syscall cost is removed by timing calls of 50 and
// of 250 repeats alternately and taking the slope.
func BenchmarkDecision(b *testing.B) {
	if ok, why := lab.Privileged(); !ok {
		b.Skip(why)
	}
	l := lab.New(b, "dcb")
	cmac, _ := l.Client.MAC(lab.ClientIf)
	if err := l.Node.SetNeigh(lab.NodeClientIf, lab.ClientIP, cmac, "stale"); err != nil {
		b.Fatal(err)
	}
	if err := l.Node.SetNeigh(lab.NodeClientIf, lab.ClientIP6, cmac, "stale"); err != nil {
		b.Fatal(err)
	}
	l.Node.MustIP(b, "route", "add", "blackhole", "10.9.9.0/24")
	n1, _ := l.Node.Ifindex(lab.NodeBackendIf)
	n1mac, _ := l.Node.MAC(lab.NodeBackendIf)
	src := net.HardwareAddr{2, 0, 0, 0, 0xb0, 1}
	dp, err := LoadDatapath()
	if err != nil {
		b.Fatal(err)
	}
	defer dp.Close()
	cases := []struct {
		name  string
		frame func() []byte
	}{
		{"ipv4-to-stale-neighbour", func() []byte { return pkt.UDP4(n1mac, src, lab.BackendIP, lab.ClientIP, 255, 0, 18) }},
		{"ipv4-no-neigh", func() []byte { return pkt.UDP4(n1mac, src, lab.BackendIP, mustNetip("10.0.1.3"), 255, 0, 18) }},
		{"ipv6-to-stale-neighbour", func() []byte { return pkt.UDP6(n1mac, src, lab.BackendIP6, lab.ClientIP6, 255, 18) }},
		{"pass-local", func() []byte { return pkt.UDP4(n1mac, src, lab.BackendIP, lab.NodeBackendIP, 64, 0, 18) }},
		{"pass-fib-other", func() []byte { return pkt.UDP4(n1mac, src, lab.BackendIP, mustNetip("10.9.9.9"), 64, 0, 18) }},
		{"pass-ttl", func() []byte { return pkt.UDP4(n1mac, src, lab.BackendIP, lab.ClientIP, 1, 0, 18) }},
	}
	for _, mode := range []Mode{ModeLegacy, ModeNeigh} {
		for _, c := range cases {
			b.Run(string(mode)+"/"+c.name, func(b *testing.B) {
				var short, long time.Duration
				run := func(repeat uint32) time.Duration {
					var d time.Duration
					err := l.Node.Do(func() error {
						start := time.Now()
						_, err := dp.Program(mode).Run(&ebpf.RunOptions{Data: c.frame(), Repeat: repeat, Context: skbCtx(n1)})
						d = time.Since(start)
						return err
					})
					if err != nil {
						b.Fatal(err)
					}
					return d
				}
				for i := 0; i < b.N; i++ {
					short += run(50)
					long += run(250)
				}
				b.ReportMetric(float64((long-short).Nanoseconds())/float64(b.N*200), "ns/pkt")
			})
		}
	}
}

// BenchmarkForwardingSampled measures what the tracer costs forwarding as
// the agent runs it on its defaults: the per-packet hooks attached only
// while some entry is stale-long, and then for 1 s out of every 30 s. Each
// configuration is measured over a whole period (frames injected back to
// back for 30 s) and every round runs all four, interleaved: the legacy
// datapath with the tracer off and sampled, with and without a stale-long
// entry (another MAC) on the egress interface. Without one the agent keeps
// the hooks detached, so sampled must equal off. Run it as
//
//	go test ./bpf -run '^$' -bench ForwardingSampled -benchtime 5x
//
// NEIGHWATCH_BENCH_PERIOD and NEIGHWATCH_BENCH_WINDOW change the period and
// window (durations).
func BenchmarkForwardingSampled(b *testing.B) {
	f := newFwdBench(b)
	period, window := 30*time.Second, time.Second
	if v, err := time.ParseDuration(os.Getenv("NEIGHWATCH_BENCH_PERIOD")); err == nil {
		period = v
	}
	if v, err := time.ParseDuration(os.Getenv("NEIGHWATCH_BENCH_WINDOW")); err == nil {
		window = v
	}
	tr := f.tracers["full"]
	staleIP := mustAddr("10.0.1.99")
	staleMAC := net.HardwareAddr{2, 0, 0, 0, 9, 9}
	f.setup(b, ModeLegacy, "")
	f.inject(b, 1_000_000) // warm up
	// measure injects frames back to back for one period; with sampled,
	// the hooks are attached for the window at its start, as the agent
	// does when some entry is stale-long. It returns packets per second
	// and the fraction of the period the hooks were attached.
	measure := func(sampled, stale bool) (float64, float64) {
		if stale {
			if err := f.rig.L.Node.SetNeigh(lab.NodeClientIf, staleIP, staleMAC, "stale"); err != nil {
				b.Fatal(err)
			}
			defer f.rig.L.Node.MustIP(b, "neigh", "del", staleIP.String(), "dev", lab.NodeClientIf)
			if _, err := tr.UpdateCandidates([]Candidate{{Ifindex: f.rig.N0, Addr: staleIP, MAC: staleMAC}}); err != nil {
				b.Fatal(err)
			}
		} else if err := tr.PruneCandidates(func(int, netip.Addr) bool { return false }); err != nil {
			b.Fatal(err)
		}
		_, before := tr.PerPacket()
		done := make(chan struct{})
		go func() {
			defer close(done)
			if !sampled || !stale { // the agent attaches nothing without a stale-long entry
				return
			}
			if err := tr.SetPerPacket(true); err != nil {
				b.Error(err)
			}
			time.Sleep(window)
			if err := tr.SetPerPacket(false); err != nil {
				b.Error(err)
			}
		}()
		var frames uint64
		start := time.Now()
		for time.Since(start) < period {
			f.inject(b, 250_000)
			frames += 250_000
		}
		elapsed := time.Since(start)
		<-done
		_, after := tr.PerPacket()
		return float64(frames) / elapsed.Seconds(), (after - before).Seconds() / elapsed.Seconds()
	}
	pps, ratios, attached := fwdrig.Series{}, fwdrig.Series{}, fwdrig.Series{}
	b.ResetTimer()
	for r := 0; r < b.N; r++ {
		for _, stale := range []bool{false, true} {
			suffix := "/no stale-long entry"
			if stale {
				suffix = "/stale-long entry on egress"
			}
			off, _ := measure(false, stale)
			on, frac := measure(true, stale)
			pps.Add("legacy, tracer off"+suffix, off)
			pps.Add("legacy, tracer sampled"+suffix, on)
			ratios.Add("sampled/off"+suffix, on/off)
			attached.Add("hooks attached"+suffix, frac)
		}
	}
	b.StopTimer()
	var out strings.Builder
	fmt.Fprintf(&out, "rounds=%d period=%v window=%v (each configuration over one whole period)\n", b.N, period, window)
	fwdrig.Report(&out, pps, ratios, attached)
	writeReport(b, out.String())
	m, _, _ := fwdrig.Stats(ratios["sampled/off/stale-long entry on egress"])
	b.ReportMetric(m, "sampled/off-stale")
}

// BenchmarkForwardingFentry sets the fentry tracer's cost per packet next
// to the xmit tracer's, with their per-packet hooks attached (as in a
// window), on injected frames (64-byte UDP, one core) forwarded by the
// kernel and by the legacy datapath (bpf_fib_lookup + bpf_redirect), the
// egress entry PERMANENT or STALE (every frame then a counted hit). Rounds
// interleave every configuration; ratios are per round. fentry needs a
// kernel without lockdown: run it on a matrix kernel,
//
//	nwkernels exec 6.12 -- bpf.test -test.run '^$' -test.bench ForwardingFentry -test.benchtime 7x
func BenchmarkForwardingFentry(b *testing.B) {
	f := newFwdBench(b)
	ino, _ := NetNSInode("/run/netns/" + f.rig.L.Node.Name)
	fe, err := LoadTracer(TracerOptions{Mode: TracerFentry, NetNSIno: ino, InNetNS: f.rig.L.Node.Do})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { fe.Close() })
	if fe.Mode() != TracerFentry {
		b.Skipf("fentry refused on this kernel: %v", fe.Fallback())
	}
	if fe.core.fentryKept != nil {
		b.Skip("this kernel attaches a tracing program once: fentry cannot be switched off between rounds")
	}
	if err := fe.SetWatched([]int{f.rig.N0, f.rig.N1}, false); err != nil {
		b.Fatal(err)
	}
	f.tracers["fentry"] = fe
	cmac, _ := f.rig.L.Client.MAC(lab.ClientIf)
	const frames = 200_000
	type cfg struct {
		name, tracer string
		mode         Mode
		stale        bool
	}
	var cfgs []cfg
	for _, stale := range []bool{false, true} {
		for _, mode := range []Mode{"", ModeLegacy} {
			if mode == "" && stale {
				continue // the kernel would re-validate the entry
			}
			for _, tr := range []string{"", "full", "fentry"} {
				name := "kernel"
				if mode != "" {
					name = string(mode)
				}
				if tr != "" {
					name += "+" + map[string]string{"full": "xmit", "fentry": "fentry"}[tr]
				}
				if stale {
					name += "/stale"
				}
				cfgs = append(cfgs, cfg{name, tr, mode, stale})
			}
		}
	}
	state := func(stale bool) {
		st := "permanent"
		if stale {
			st = "stale"
		}
		if err := f.rig.L.Node.SetNeigh(lab.NodeClientIf, lab.ClientIP, cmac, st); err != nil {
			b.Fatal(err)
		}
	}
	f.setup(b, ModeLegacy, "")
	f.inject(b, frames) // warm up
	pps, ratios := fwdrig.Series{}, fwdrig.Series{}
	b.ResetTimer()
	for r := 0; r < b.N; r++ {
		for _, c := range cfgs {
			state(c.stale)
			f.setup(b, c.mode, c.tracer)
			pps.Add(c.name, f.inject(b, frames))
		}
		last := pps.Last
		for _, base := range []string{"kernel", "legacy", "legacy/stale"} {
			x, y := base, ""
			if i := strings.IndexByte(base, '/'); i >= 0 {
				x, y = base[:i], base[i:]
			}
			ratios.Add(base+" xmit/none", last(x+"+xmit"+y)/last(base))
			ratios.Add(base+" fentry/none", last(x+"+fentry"+y)/last(base))
		}
	}
	b.StopTimer()
	state(false)
	var out strings.Builder
	fmt.Fprintf(&out, "rounds=%d frames/round/config=%d\n", b.N, frames)
	for _, c := range cfgs {
		m, lo, hi := fwdrig.Stats(pps[c.name])
		fmt.Fprintf(&out, "  %-24s median %7.4f Mpps  (min %7.4f, max %7.4f)\n", c.name, m/1e6, lo/1e6, hi/1e6)
	}
	keys := make([]string, 0, len(ratios))
	for k := range ratios {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		m, lo, hi := fwdrig.Stats(ratios[k])
		fmt.Fprintf(&out, "  ratio %-28s median %.3f  (min %.3f, max %.3f)\n", k, m, lo, hi)
	}
	writeReport(b, out.String())
}

// BenchmarkTracerScrapeReads measures what a scrape of the tracer's
// metrics reads from the kernel, part by part, on a loaded xmit tracer:
// program run counts, the STALE counts per interface, the counters, and
// the program list.
func BenchmarkTracerScrapeReads(b *testing.B) {
	lab.Require(b)
	tr, err := LoadTracer(TracerOptions{Mode: TracerXmit})
	if err != nil {
		b.Fatal(err)
	}
	defer tr.Close()
	for _, c := range []struct {
		name string
		read func()
	}{
		{"ProgramRuns", func() { tr.ProgramRuns() }},
		{"StaleCounted", func() { _, _ = tr.StaleCounted() }},
		{"Stats", func() { _, _ = tr.Stats() }},
		{"Programs", func() { tr.Programs() }},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for range b.N {
				c.read()
			}
		})
	}
}

// BenchmarkSeed measures seeding the tracer's in-kernel mirror, per
// entry, in the batches of 1,024 the feed uses: STALE entries with MACs of
// their own (the common case: each is counted in the filters too) and
// REACHABLE ones (the mirror only). The maps are sized for a million
// entries and emptied, untimed, before they fill.
func BenchmarkSeed(b *testing.B) {
	lab.Require(b)
	for _, c := range []struct {
		name  string
		state uint8
	}{{"Stale", unix.NUD_STALE}, {"Reachable", unix.NUD_REACHABLE}} {
		b.Run(c.name, func(b *testing.B) {
			const size = 1 << 20
			load := func() *Tracer {
				tr, err := LoadTracer(TracerOptions{Mode: TracerXmit, MirrorSize: size})
				if err != nil {
					b.Fatal(err)
				}
				return tr
			}
			tr := load()
			defer func() { tr.Close() }()
			batch := make([]SeedEntry, 1024)
			next := uint32(0)
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				if next+uint32(len(batch)) > size*3/4 {
					b.StopTimer()
					tr.Close()
					tr, next = load(), 0
					b.StartTimer()
				}
				b.StopTimer()
				for j := range batch {
					next++
					var a [4]byte
					binary.BigEndian.PutUint32(a[:], 0x0a000000+next)
					batch[j] = SeedEntry{Ifindex: 1 + i%4, Addr: netip.AddrFrom4(a), State: c.state,
						MAC: net.HardwareAddr{0x02, 0, a[0], a[1], a[2], a[3]}}
				}
				b.StartTimer()
				if _, _, err := tr.Seed(batch); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(batch)), "ns/entry")
		})
	}
}

// BenchmarkCountMirror counts a mirror of 100,000 entries, in batches
// (what RefreshMirrorSize does) and key by key (what it did).
func BenchmarkCountMirror(b *testing.B) {
	lab.Require(b)
	tr := loadEmpty(b, 1<<17)
	const n = 100_000
	seedReachable(b, tr, n)
	for _, c := range []struct {
		name  string
		count func(*ebpf.Map) int
	}{{"Batch", countKeys}, {"OneByOne", countKeysOneByOne}} {
		b.Run(c.name, func(b *testing.B) {
			for range b.N {
				if got := c.count(tr.core.objs.NeighMirror); got != n {
					b.Fatalf("counted %d, want %d", got, n)
				}
			}
		})
	}
}
