// Command nwbench runs the scripted 100k-entry benchmarks of BENCHMARKS.md:
// initial sync time and memory of the agent against a bare
// vishvananda NeighList of the same table, and /metrics scrape latency, in
// interleaved rounds.
//
//	nwbench run [--entries 1000,100000] [--rounds 7] [--bin bin/neighwatch[,other]]
//	nwbench idle [--entries 1000,10000,100000] [--bin A,B@--tracer=off] [--duration 10m]
//	nwbench mapcost [--shapes 24:8,12:20,24:32] [--elements 200000]
//	nwbench bare     (internal: one NeighList, prints JSON)
//
// With two or more --bin agents (say the build before and after a change),
// every round runs each of them after the bare dump, each round starting
// with the next one, and the report adds each agent's per-round ratio to
// the first. Each run waits for a quiet machine first (waitQuiet). An
// agent may carry extra flags after an @: --bin 'bin/neighwatch,bin/neighwatch@--tracer=off'.
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"os/exec"
	"os/signal"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/neighwatch/neighwatch/internal/dev/lab"
	"github.com/vishvananda/netlink"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: nwbench run|idle|mapcost|bare")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "bare":
		err = bare()
	case "run":
		err = runAll(os.Args[2:])
	case "idle":
		err = idle(os.Args[2:])
	case "mapcost":
		err = mapcost(os.Args[2:])
	case "mapcost-one":
		err = mapCostOne(os.Args[2:])
	default:
		err = fmt.Errorf("unknown command %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "nwbench: %v\n", err)
		os.Exit(1)
	}
}

type bareResult struct {
	Entries     int     `json:"entries"`
	DumpSeconds float64 `json:"dump_seconds"`
	HWMKB       int     `json:"vmhwm_kb"`
	RSSKB       int     `json:"vmrss_kb"`
}

// bare is the baseline: one NeighList of everything, as a program that
// only wants the table would do it.
func bare() error {
	start := time.Now()
	ns, err := netlink.NeighList(0, 0)
	if err != nil {
		return err
	}
	d := time.Since(start)
	hwm, rss := procMem(os.Getpid())
	return json.NewEncoder(os.Stdout).Encode(bareResult{len(ns), d.Seconds(), hwm, rss})
}

func procMem(pid int) (hwm, rss int) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) < 2 {
			continue
		}
		v, _ := strconv.Atoi(f[1])
		switch f[0] {
		case "VmHWM:":
			hwm = v
		case "VmRSS:":
			rss = v
		}
	}
	return hwm, rss
}

var gcKeys = []string{"gc_thresh1", "gc_thresh2", "gc_thresh3"}

func gcPath(fam, k string) string { return "/proc/sys/net/" + fam + "/neigh/default/" + k }

// raiseGC lifts the host-wide thresholds above n (to at least floor each)
// and returns the restore.
func raiseGC(n int, floor ...int) (func(), error) {
	want := 2*n + 4096
	for _, f := range floor {
		want = max(want, f)
	}
	saved := map[string][]byte{}
	restore := func() {
		// Lower thresh1 first and thresh3 last so every step is valid.
		for _, fam := range []string{"ipv4", "ipv6"} {
			for _, k := range gcKeys {
				if v, ok := saved[gcPath(fam, k)]; ok {
					_ = os.WriteFile(gcPath(fam, k), v, 0o644)
				}
			}
		}
	}
	for _, fam := range []string{"ipv4", "ipv6"} {
		for i := len(gcKeys) - 1; i >= 0; i-- {
			p := gcPath(fam, gcKeys[i])
			v, err := os.ReadFile(p)
			if err != nil {
				restore()
				return nil, err
			}
			saved[p] = v
			if err := os.WriteFile(p, []byte(strconv.Itoa(want)), 0o644); err != nil {
				restore()
				return nil, err
			}
		}
	}
	return restore, nil
}

type agentResult struct {
	SyncSeconds   float64 // the agent's own "took" of its first dump
	LoadedSeconds float64 // process start to the "neighbour table loaded" line
	ReadySeconds  float64 // process start to /readyz answering 200
	HWMKB, RSSKB  int
	ScrapeSeconds []float64
}

func runAll(args []string) error {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	sizes := fs.String("entries", "1000,100000", "comma-separated table sizes")
	rounds := fs.Int("rounds", 7, "interleaved rounds per size")
	bin := fs.String("bin", "bin/neighwatch", "agent binaries, comma-separated: each runs in every round")
	scrapes := fs.Int("scrapes", 30, "scrapes per round")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if ok, why := lab.Privileged(); !ok {
		return errors.New(why)
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	var ns []int
	for _, s := range strings.Split(*sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil {
			return err
		}
		ns = append(ns, n)
	}
	maxN := 0
	for _, n := range ns {
		maxN = max(maxN, n)
	}
	restore, err := raiseGC(maxN)
	if err != nil {
		return fmt.Errorf("raise gc_thresh: %w", err)
	}
	defer restore()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	go func() { <-sig; restore(); os.Exit(130) }()

	for _, n := range ns {
		if err := runSize(n, *rounds, *scrapes, self, strings.Split(*bin, ",")); err != nil {
			return err
		}
	}
	return nil
}

// series are one agent binary's figures over the rounds.
type series struct {
	syncRatio, sync, loaded, ready, hwm, rss, scrapeMed, allScrapes []float64
}

func runSize(n, rounds, scrapes int, self string, bins []string) error {
	name := lab.Unique("nwbench")
	nsx := lab.NS{Name: name}
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		return fmt.Errorf("%v: %s", err, out)
	}
	defer exec.Command("ip", "netns", "del", name).Run()
	for _, c := range [][]string{{"link", "set", "lo", "up"}, {"link", "add", "v0", "type", "veth", "peer", "name", "v1"}, {"link", "set", "v0", "up"}, {"link", "set", "v1", "up"}} {
		if err := nsx.IP(c...); err != nil {
			return err
		}
	}
	lines := make([]string, n)
	for i := range lines {
		lines[i] = fmt.Sprintf("neigh add %s lladdr %s dev v0 nud stale", hostIP(i), lab.HostMAC(i, 0))
	}
	start := time.Now()
	if err := nsx.Batch(lines); err != nil {
		return err
	}
	fmt.Printf("# %d entries created in %v\n", n, time.Since(start).Round(time.Millisecond))
	var bareSync, bareHWM []float64
	per := make([]series, len(bins))
	// vsFirst[i] are agent i's per-round ratios to agent 0: sync, steady
	// RSS, peak RSS, scrape median.
	vsFirst := make([][4][]float64, len(bins))
	var waited []float64
	for r := 0; r < rounds; r++ {
		waited = append(waited, waitQuiet(30*time.Second).Seconds())
		out, err := nsx.Command(self, "bare").Output()
		if err != nil {
			return fmt.Errorf("bare: %w", err)
		}
		var br bareResult
		if err := json.Unmarshal(out, &br); err != nil {
			return err
		}
		if br.Entries < n {
			return fmt.Errorf("bare listed %d entries, want >= %d", br.Entries, n)
		}
		bareSync = append(bareSync, br.DumpSeconds*1000)
		bareHWM = append(bareHWM, float64(br.HWMKB)/1024)
		// The agents take turns at going first: the one that runs right
		// after another agent's exit syncs measurably slower (by 1.4x at
		// 100,000 entries, whichever binary it is), so a fixed order would
		// put that into the ratio.
		this := make([][4]float64, len(bins))
		for j := range bins {
			i := (r + j) % len(bins)
			waited = append(waited, waitQuiet(30*time.Second).Seconds())
			ar, err := runAgent(nsx, bins[i], scrapes)
			if err != nil {
				return fmt.Errorf("%s: %w", bins[i], err)
			}
			s := &per[i]
			s.syncRatio = append(s.syncRatio, ar.SyncSeconds/br.DumpSeconds)
			s.sync = append(s.sync, ar.SyncSeconds*1000)
			s.loaded = append(s.loaded, ar.LoadedSeconds*1000)
			s.ready = append(s.ready, ar.ReadySeconds*1000)
			s.hwm = append(s.hwm, float64(ar.HWMKB)/1024)
			s.rss = append(s.rss, float64(ar.RSSKB)/1024)
			ms := make([]float64, len(ar.ScrapeSeconds))
			for j, d := range ar.ScrapeSeconds {
				ms[j] = d * 1000
			}
			s.scrapeMed = append(s.scrapeMed, med(ms))
			s.allScrapes = append(s.allScrapes, ms...)
			this[i] = [4]float64{ar.SyncSeconds, float64(ar.RSSKB), float64(ar.HWMKB), med(ms)}
		}
		for i := range bins {
			for k := range this[i] {
				vsFirst[i][k] = append(vsFirst[i][k], this[i][k]/this[0][k])
			}
		}
	}
	fmt.Printf("entries=%d rounds=%d\n", n, rounds)
	row := func(what string, v []float64, unit string) {
		fmt.Printf("  %-40s median %8.3f %s  min %8.3f  max %8.3f\n", what, med(v), unit, minf(v), maxf(v))
	}
	row("wait for a quiet machine before each run", waited, "s ")
	row("bare NeighList dump", bareSync, "ms")
	row("bare NeighList peak RSS (VmHWM)", bareHWM, "MB")
	for i, bin := range bins {
		s := per[i]
		fmt.Printf(" agent %s\n", bin)
		row("agent initial sync (its own timing)", s.sync, "ms")
		row("start to table loaded", s.loaded, "ms")
		row("start to /readyz 200", s.ready, "ms")
		row("agent/bare sync ratio (per round)", s.syncRatio, "x ")
		row("agent peak RSS (VmHWM)", s.hwm, "MB")
		row("agent RSS after sync", s.rss, "MB")
		row("agent /metrics scrape (round median)", s.scrapeMed, "ms")
		sort.Float64s(s.allScrapes)
		fmt.Printf("  %-40s p50 %.3f ms  p90 %.3f ms  p99 %.3f ms  (n=%d)\n", "all scrapes",
			pct(s.allScrapes, 50), pct(s.allScrapes, 90), pct(s.allScrapes, 99), len(s.allScrapes))
		if i > 0 {
			for k, what := range []string{"sync", "RSS after sync", "peak RSS", "scrape median"} {
				row(fmt.Sprintf("%s / first agent (per round)", what), vsFirst[i][k], "x ")
			}
		}
	}
	return nil
}

func hostIP(i int) string {
	return fmt.Sprintf("10.%d.%d.%d", 64+i/(254*254), (i/254)%254, i%254+1)
}

func runAgent(nsx lab.NS, bin string, scrapes int) (agentResult, error) {
	var res agentResult
	sock := fmt.Sprintf("/tmp/%s.sock", lab.Unique("nwb"))
	path, extra, _ := strings.Cut(bin, "@")
	args := append([]string{"agent", "--metrics.listen", "127.0.0.1:9947", "--control.socket", sock, "--log.format", "json", "--netlink.resync-interval", "0"},
		strings.Fields(extra)...)
	cmd := nsx.Command(path, args...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return res, err
	}
	started := time.Now()
	if err := cmd.Start(); err != nil {
		return res, err
	}
	defer func() { _ = cmd.Process.Signal(syscall.SIGTERM); _ = cmd.Wait() }()
	sc := bufio.NewScanner(stderr)
	loaded := make(chan float64, 1)
	settled := make(chan struct{})
	go func() {
		for sc.Scan() {
			var m map[string]any
			if json.Unmarshal(sc.Bytes(), &m) != nil {
				continue
			}
			switch m["msg"] {
			case "neighbour table loaded":
				res.LoadedSeconds = time.Since(started).Seconds()
				loaded <- seconds(m["took"])
			case "tracer running":
				close(settled)
			}
		}
	}()
	select {
	case res.SyncSeconds = <-loaded:
	case <-time.After(60 * time.Second):
		return res, errors.New("agent did not load the table in 60s")
	}
	for i := 0; ; i++ {
		if code, _, err := nsx.HTTPGet("http://127.0.0.1:9947/readyz"); err == nil && code == 200 {
			res.ReadySeconds = time.Since(started).Seconds()
			break
		}
		if i > 4000 {
			return res, errors.New("agent not ready")
		}
		time.Sleep(5 * time.Millisecond)
	}
	// Scrape the steady state: after the tracer has seeded its mirror.
	if !strings.Contains(extra, "tracer=off") {
		select {
		case <-settled:
		case <-time.After(30 * time.Second):
		}
	}
	time.Sleep(time.Second)
	res.HWMKB, res.RSSKB = procMem(cmd.Process.Pid)
	for i := 0; i < scrapes; i++ {
		t0 := time.Now()
		code, body, err := nsx.HTTPGet("http://127.0.0.1:9947/metrics")
		d := time.Since(t0)
		if err != nil || code != 200 || !strings.Contains(body, "neighwatch_neighbours{") {
			return res, fmt.Errorf("scrape: %d %v", code, err)
		}
		res.ScrapeSeconds = append(res.ScrapeSeconds, d.Seconds())
	}
	return res, nil
}

func med(v []float64) float64 {
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	return s[len(s)/2]
}

func pct(sorted []float64, p int) float64 { return sorted[(len(sorted)-1)*p/100] }

func minf(v []float64) float64 {
	m := v[0]
	for _, x := range v {
		m = min(m, x)
	}
	return m
}

func maxf(v []float64) float64 {
	m := v[0]
	for _, x := range v {
		m = max(m, x)
	}
	return m
}

// seconds reads a logged duration: the agent's log writes it as text
// ("348.977µs"); slog's own JSON handler as nanoseconds. NaN if neither.
func seconds(v any) float64 {
	switch v := v.(type) {
	case float64:
		return v / 1e9
	case string:
		if d, err := time.ParseDuration(v); err == nil {
			return d.Seconds()
		}
	}
	return math.NaN()
}
