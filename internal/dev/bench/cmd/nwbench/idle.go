package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/neighwatch/neighwatch/internal/dev/lab"
)

// idleAgent is one agent held idle on a table of its own.
type idleAgent struct {
	bin     string // path@flags, as --bin gives it
	entries int
	ns      lab.NS
	sock    string // control socket
	cmd     *exec.Cmd
	// samples every --sample: CPU seconds used, RSS, and the Go heap as
	// the agent's own /metrics says.
	at    []time.Duration
	cpu   []float64
	rssKB []int
	// allocTot is go_memstats_alloc_bytes_total at the first and the
	// last sample (scraped only then: a scrape allocates too).
	allocTot [2]float64
	// gc is the live heap after each collection, as the runtime's
	// gctrace says (GODEBUG=gctrace=1 on the agent): MB, and whether the
	// collection was forced (the runtime forces one every 2 minutes).
	gcMu   sync.Mutex
	gcLive []int
	forced int
	// paced: the agent's lines saying a periodic job waits longer than its
	// interval for its cost, with what the job last cost.
	paced []string
	err   error
	// ready is how long the agent took from start to ready (/readyz/tracer,
	// /readyz with the tracer off), readyz to /readyz alone (the table
	// synced, evidence, metrics and control up); cg is the
	// memory cgroup it runs in (what a pod's limit applies to: its RSS,
	// and the kernel memory it is charged for, the tracer's maps among
	// it), cgKB its usage at each sample.
	ready    time.Duration
	readyz   time.Duration
	cg       memCgroup
	cgKB     []int
	scrapeMS []float64 // the last sample's scrapes
	// mapBytes: neighwatch_tracer_map_bytes at the last sample, by map;
	// kernel: the cgroup's kernel-side lines then.
	mapBytes map[string]float64
	kernel   string
}

// idle holds agents idle side by side, one table each, and samples what
// they cost: nwbench idle --entries 1000,10000,100000 --bin A,B@--tracer=off
// --duration 10m. Every (size, binary) pair runs at once, so before and
// after builds see the same machine; the tables are STALE entries on a
// veth in a namespace, as in a large quiet L2 domain.
func idle(args []string) error {
	fs := flag.NewFlagSet("idle", flag.ContinueOnError)
	sizes := fs.String("entries", "1000,10000,100000", "comma-separated table sizes")
	bin := fs.String("bin", "bin/neighwatch", "agent binaries (path[@flags]), comma-separated")
	duration := fs.Duration("duration", 10*time.Minute, "how long to hold them after ready")
	sample := fs.Duration("sample", 10*time.Second, "sampling interval")
	profiles := fs.String("profiles", "", "directory for each agent's heap profile at the end (agents whose control socket serves /debug/pprof/)")
	cpuProfiles := fs.String("cpu-profiles", "", "directory for each agent's CPU profiles of its first minute after ready, three of 20 s (agents whose control socket serves /debug/pprof/)")
	thresh := fs.Int("gc-thresh3", 0, "set gc_thresh1..3 of IPv4 and IPv6 to at least this (as an operator who raised them would), not only above the tables")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if ok, why := lab.Privileged(); !ok {
		return errors.New(why)
	}
	var ns []int
	total := 0
	for _, s := range strings.Split(*sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil {
			return err
		}
		ns = append(ns, n)
	}
	bins := strings.Split(*bin, ",")
	for _, n := range ns {
		total += n * len(bins)
	}
	restore, err := raiseGC(total, *thresh)
	if err != nil {
		return fmt.Errorf("raise gc_thresh: %w", err)
	}
	defer restore()
	var agents []*idleAgent
	cleanup := func() {
		for _, a := range agents {
			if a.cmd != nil && a.cmd.Process != nil {
				_ = a.cmd.Process.Signal(syscall.SIGTERM)
				_ = a.cmd.Wait()
			}
			_ = a.cg.remove()
			_ = exec.Command("ip", "netns", "del", a.ns.Name).Run()
		}
	}
	defer cleanup()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	go func() { <-sig; cleanup(); restore(); os.Exit(130) }()
	for _, n := range ns {
		for _, b := range bins {
			a := &idleAgent{bin: b, entries: n, ns: lab.NS{Name: lab.Unique("nwidle")}}
			agents = append(agents, a)
			if err := a.table(); err != nil {
				return err
			}
		}
	}
	for _, a := range agents {
		if err := a.start(); err != nil {
			return fmt.Errorf("%s at %d: %w", a.bin, a.entries, err)
		}
	}
	fmt.Printf("# %d agents ready; holding them %v, sampling every %v\n", len(agents), *duration, *sample)
	start := time.Now()
	var profiling sync.WaitGroup
	if *cpuProfiles != "" {
		for _, a := range agents {
			profiling.Add(1)
			go func() {
				defer profiling.Done()
				for i := range 3 {
					if err := a.profile(*cpuProfiles, fmt.Sprintf("cpu%d", i), "profile?seconds=20"); err != nil {
						fmt.Printf("# %s at %d: CPU profile: %v\n", a.bin, a.entries, err)
						return
					}
				}
			}()
		}
	}
	defer profiling.Wait()
	for done := false; !done; {
		done = time.Since(start) >= *duration
		var wg sync.WaitGroup
		for _, a := range agents {
			wg.Add(1)
			go func() { defer wg.Done(); a.sample(time.Since(start), done) }()
		}
		wg.Wait()
		if !done {
			time.Sleep(min(*sample, time.Until(start.Add(*duration))))
		}
	}
	for _, a := range agents {
		a.report(*duration)
		if *profiles != "" {
			if err := a.profile(*profiles, "heap", "heap?gc=1"); err != nil {
				fmt.Printf("  heap profile: %v\n", err)
			}
		}
	}
	return nil
}

// profile saves one of the agent's profiles (what: the pprof path and
// query, as "heap?gc=1", a heap profile after a collection) from its
// control socket, under dir as kind-entries-binary.pb.gz.
func (a *idleAgent) profile(dir, kind, what string) error {
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", a.sock)
	}}}
	resp, err := hc.Get("http://neighwatch/debug/pprof/" + what)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s", resp.Status)
	}
	name := filepath.Join(dir, fmt.Sprintf("%s-%d-%s.pb.gz", kind, a.entries, strings.NewReplacer("/", "_", "@", "_", " ", "_", "=", "_").Replace(a.bin)))
	f, err := os.Create(name)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.Copy(f, resp.Body)
	fmt.Printf("  %s profile: %s\n", kind, name)
	return err
}

func (a *idleAgent) table() error {
	if out, err := exec.Command("ip", "netns", "add", a.ns.Name).CombinedOutput(); err != nil {
		return fmt.Errorf("%v: %s", err, out)
	}
	for _, c := range [][]string{{"link", "set", "lo", "up"}, {"link", "add", "v0", "type", "veth", "peer", "name", "v1"}, {"link", "set", "v0", "up"}, {"link", "set", "v1", "up"}} {
		if err := a.ns.IP(c...); err != nil {
			return err
		}
	}
	// STALE entries stay STALE: nothing uses them, and the periodic GC
	// leaves STALE entries alone below gc_thresh1... which raiseGC lifted.
	_ = a.ns.Sysctl("net.ipv4.neigh.v0.gc_stale_time", "86400")
	lines := make([]string, a.entries)
	for i := range lines {
		lines[i] = fmt.Sprintf("neigh add %s lladdr %s dev v0 nud stale", hostIP(i), lab.HostMAC(i, 0))
	}
	return a.ns.Batch(lines)
}

func (a *idleAgent) start() error {
	path, extra, _ := strings.Cut(a.bin, "@")
	sock := fmt.Sprintf("/tmp/%s.sock", lab.Unique("nwi"))
	a.sock = sock
	args := append([]string{"agent", "--metrics.listen", "127.0.0.1:9947", "--control.socket", sock}, strings.Fields(extra)...)
	a.cmd = a.ns.Command(path, args...)
	a.cmd.Env = append(os.Environ(), "GODEBUG=gctrace=1")
	a.cmd.Stdout = nil
	stderr, err := a.cmd.StderrPipe()
	if err != nil {
		return err
	}
	cg, err := newMemCgroup(lab.Unique("nwidle"))
	if err != nil {
		return err
	}
	a.cg = cg
	began := time.Now()
	if err := a.cmd.Start(); err != nil {
		return err
	}
	if err := a.cg.add(a.cmd.Process.Pid); err != nil {
		return err
	}
	go a.readGCTrace(stderr)
	parts := []string{"/readyz", "/readyz/tracer"}
	if strings.Contains(extra, "tracer=off") {
		parts = parts[:1]
	}
	for i := 0; ; i++ {
		if code, _, err := a.ns.HTTPGet("http://127.0.0.1:9947" + parts[0]); err == nil && code == 200 {
			if a.readyz == 0 {
				a.readyz = time.Since(began)
			}
			if parts = parts[1:]; len(parts) == 0 {
				a.ready = time.Since(began)
				return nil
			}
			continue
		}
		if i > 1200 {
			return fmt.Errorf("%s not ready after 60 s", parts[0])
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// gcLine matches the heap sizes of a gctrace line: "gc 7 @12.3s 0%: ...,
// 9->9->4 MB, 9 MB goal, ...": at the start and end of the collection, and
// the live heap it marked.
var gcLine = regexp.MustCompile(`^gc \d+ @.* (\d+)->(\d+)->(\d+) MB`)

func (a *idleAgent) readGCTrace(r io.Reader) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		m := gcLine.FindStringSubmatch(sc.Text())
		if m == nil {
			if strings.Contains(sc.Text(), "paced by its cost") {
				a.gcMu.Lock()
				a.paced = append(a.paced, sc.Text())
				a.gcMu.Unlock()
			}
			continue
		}
		live, _ := strconv.Atoi(m[3])
		a.gcMu.Lock()
		a.gcLive = append(a.gcLive, live)
		if strings.HasSuffix(sc.Text(), "(forced)") {
			a.forced++
		}
		a.gcMu.Unlock()
	}
}

// sample reads the agent's CPU time and RSS from /proc; the first and the
// last sample also read its allocation total from /metrics.
func (a *idleAgent) sample(at time.Duration, last bool) {
	pid := a.cmd.Process.Pid
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		a.err = err
		return
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	utime, _ := strconv.ParseFloat(f[11], 64)
	stime, _ := strconv.ParseFloat(f[12], 64)
	_, rss := procMem(pid)
	if last {
		for range 5 {
			t0 := time.Now()
			if code, _, err := a.ns.HTTPGet("http://127.0.0.1:9947/metrics"); err == nil && code == 200 {
				a.scrapeMS = append(a.scrapeMS, float64(time.Since(t0).Microseconds())/1000)
			}
		}
	}
	a.cgKB = append(a.cgKB, int(a.cg.usage()>>10))
	if len(a.at) == 0 || last {
		code, body, err := a.ns.HTTPGet("http://127.0.0.1:9947/metrics")
		if err != nil || code != 200 {
			a.err = fmt.Errorf("scrape: %d %v", code, err)
			return
		}
		i := 0
		if last {
			i = 1
		}
		for _, l := range strings.Split(body, "\n") {
			if v, ok := strings.CutPrefix(l, "go_memstats_alloc_bytes_total "); ok {
				a.allocTot[i], _ = strconv.ParseFloat(v, 64)
			}
			if rest, ok := strings.CutPrefix(l, `neighwatch_tracer_map_bytes{map="`); ok && last {
				name, v, _ := strings.Cut(rest, `"} `)
				if a.mapBytes == nil {
					a.mapBytes = map[string]float64{}
				}
				a.mapBytes[name], _ = strconv.ParseFloat(v, 64)
			}
		}
		if last {
			a.kernel = a.cg.kernelSide()
		}
	}
	a.at = append(a.at, at)
	a.cpu = append(a.cpu, (utime+stime)/100) // clock ticks: USER_HZ 100
	a.rssKB = append(a.rssKB, rss)
}

func (a *idleAgent) report(d time.Duration) {
	fmt.Printf("\nagent %s, %d STALE entries, held %v\n", a.bin, a.entries, d)
	if a.err != nil {
		fmt.Printf("  error: %v\n", a.err)
	}
	n := len(a.at)
	if n < 2 {
		return
	}
	// Idle CPU per minute: CPU seconds used in each minute of the hold.
	var perMin []float64
	j := 0
	for i := 1; i < n; i++ {
		if a.at[i]-a.at[j] >= time.Minute || i == n-1 {
			perMin = append(perMin, 100*(a.cpu[i]-a.cpu[j])/(a.at[i]-a.at[j]).Seconds())
			j = i
		}
	}
	cpuAll := 100 * (a.cpu[n-1] - a.cpu[0]) / (a.at[n-1] - a.at[0]).Seconds()
	allocRate := (a.allocTot[1] - a.allocTot[0]) / (a.at[n-1] - a.at[0]).Seconds()
	fmt.Printf("  idle CPU, %% of a core: whole hold %.2f; per minute %s\n", cpuAll, fmtList(perMin, "%.2f"))
	rss := make([]float64, n)
	for i, kb := range a.rssKB {
		rss[i] = float64(kb) / 1024
	}
	var marks []string
	for _, m := range []time.Duration{0, time.Minute, 2 * time.Minute, 5 * time.Minute, d} {
		i := sort.Search(n, func(i int) bool { return a.at[i] >= m })
		if i < n {
			marks = append(marks, fmt.Sprintf("%v %.1f", a.at[i].Round(time.Second), rss[i]))
		}
	}
	fmt.Printf("  ready %.1f s after start (/readyz %.1f s)\n", a.ready.Seconds(), a.readyz.Seconds())
	a.gcMu.Lock()
	for _, l := range a.paced {
		fmt.Printf("  the agent: %s\n", l)
	}
	a.gcMu.Unlock()
	fmt.Printf("  RSS MiB: %s; min %.1f max %.1f\n", strings.Join(marks, ", "), minf(rss), maxf(rss))
	if hwm, _ := procMem(a.cmd.Process.Pid); hwm > 0 {
		fmt.Printf("  RSS peak (VmHWM) %.1f MiB\n", float64(hwm)/1024)
	}
	cg := make([]float64, len(a.cgKB))
	for i, kb := range a.cgKB {
		cg[i] = float64(kb) / 1024
	}
	var cgLate []float64
	for i := range cg {
		if a.at[i] >= 2*time.Minute {
			cgLate = append(cgLate, cg[i])
		}
	}
	if len(cgLate) == 0 {
		cgLate = cg
	}
	fmt.Printf("  cgroup memory MiB (RSS and kernel memory charged: the tracer's maps): from minute 2 on max %.1f; peak %.1f\n", maxf(cgLate), float64(a.cg.peak())/(1<<20))
	if a.kernel != "" {
		fmt.Printf("  cgroup, at the end: %s\n", a.kernel)
	}
	if len(a.mapBytes) > 0 {
		var names []string
		total := 0.0
		for n, b := range a.mapBytes {
			names = append(names, n)
			total += b
		}
		sort.Strings(names)
		var parts []string
		for _, n := range names {
			parts = append(parts, fmt.Sprintf("%s %.2f", n, a.mapBytes[n]/(1<<20)))
		}
		fmt.Printf("  tracer maps MiB (neighwatch_tracer_map_bytes): %s; all %.1f\n", strings.Join(parts, ", "), total/(1<<20))
	}
	if len(a.scrapeMS) > 0 {
		sort.Float64s(a.scrapeMS)
		fmt.Printf("  one scrape: median %.1f ms of %d (max %.1f)\n", med(a.scrapeMS), len(a.scrapeMS), maxf(a.scrapeMS))
	}
	// RSS after the first two minutes, when the start-up has settled.
	var late []float64
	for i := range n {
		if a.at[i] >= 2*time.Minute {
			late = append(late, rss[i])
		}
	}
	if len(late) > 0 {
		fmt.Printf("  RSS MiB from minute 2 on: min %.1f max %.1f\n", minf(late), maxf(late))
	}
	a.gcMu.Lock()
	defer a.gcMu.Unlock()
	if k := len(a.gcLive); k > 0 {
		live := a.gcLive[k-1]
		fmt.Printf("  live heap after the last of %d collections (%d forced): %d MB, %.0f bytes per entry\n",
			k, a.forced, live, float64(live)*1e6/float64(a.entries))
	}
	fmt.Printf("  allocation rate %.0f bytes/s\n", allocRate)
}

func fmtList(v []float64, f string) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = fmt.Sprintf(f, x)
	}
	return strings.Join(s, " ")
}
