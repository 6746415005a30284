package e2e

import (
	"bufio"
	"bytes"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/neighwatch/neighwatch/internal/dev/lab"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// BenchmarkChurn holds a large table under steady change and reports
// what the agent lost: n STALE entries on the node (a million by
// default, NEIGHWATCH_BENCH_ENTRIES), the agent on its defaults with a
// client of `neighwatch events` reading its stream, then NEIGHWATCH_BENCH_CHANGES
// changes a second (10,000) for NEIGHWATCH_BENCH_SECONDS (60): each a new
// MAC for the next entry, through netlink as the kernel's own updates
// come, once every entry is stale-long. It logs the events the client read, the events dropped by
// subscriber, the netlink resyncs by reason, the agent's CPU and peak
// RSS, and whether the table's count matches the kernel's after. As root:
//
//	go test ./e2e -run '^$' -bench Churn -benchtime 1x -timeout 30m
func BenchmarkChurn(b *testing.B) {
	if ok, why := lab.Privileged(); !ok {
		b.Skip(why)
	}
	n, rate, seconds := 1_000_000, 10_000, 60
	for env, v := range map[string]*int{"NEIGHWATCH_BENCH_ENTRIES": &n, "NEIGHWATCH_BENCH_CHANGES": &rate, "NEIGHWATCH_BENCH_SECONDS": &seconds} {
		if x, err := strconv.Atoi(os.Getenv(env)); err == nil && x > 0 {
			*v = x
		}
	}
	for range b.N {
		churn(b, n, rate, seconds)
	}
}

func churn(b *testing.B, n, rate, seconds int) {
	lab.RaiseGCThresh(b, 2*n+4096)
	seg := lab.NewSegment(b, lab.Unique("chn"), 1)
	held := lab.FloodMovers(n)
	start := time.Now()
	if err := seg.Node.AddNeighs(lab.SegmentBridge, held, unix.NUD_STALE); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = seg.Node.IP("neigh", "flush", "dev", lab.SegmentBridge) })
	b.Logf("%d STALE entries made in %v", n, time.Since(start).Round(time.Millisecond))
	sock := sockPath(b)
	a := startAgent(b, seg.Node, sock)
	mirrored := func() int {
		total := 0
		for _, l := range strings.Split(a.metrics(b), "\n") {
			if strings.HasPrefix(l, "neighwatch_neighbours{") && strings.Contains(l, `interface="`+lab.SegmentBridge+`"`) && strings.Contains(l, `family="inet"`) {
				v, _ := strconv.ParseFloat(l[strings.LastIndexByte(l, ' ')+1:], 64)
				total += int(v)
			}
		}
		return total
	}
	lab.WaitFor(b, 5*time.Minute, "the agent to mirror every entry", func() bool { return mirrored() >= n })
	// The steady state: every entry stale-long (the default threshold,
	// 1m, past), not the one-time burst of a million promotions that a
	// table made at once goes through.
	time.Sleep(time.Until(start.Add(time.Minute + 5*time.Second)))

	// The client of the event stream, reading as fast as it can.
	ev := exec.Command(binPath, "events", "--json", "--control.socket", sock)
	out, err := ev.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := ev.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() { _ = ev.Process.Kill(); _ = ev.Wait() }()
	var read atomic.Int64
	// The events read by kind and class.
	var (
		kindMu sync.Mutex
		kinds  = map[string]int{}
	)
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 64*1024), 1<<20)
		for sc.Scan() {
			read.Add(1)
			k := jsonField(sc.Bytes(), "kind") + "/" + jsonField(sc.Bytes(), "class")
			kindMu.Lock()
			kinds[k]++
			kindMu.Unlock()
		}
	}()

	h, err := seg.Node.Handle()
	if err != nil {
		b.Fatal(err)
	}
	defer h.Close()
	nh, err := netlink.NewHandleAt(h)
	if err != nil {
		b.Fatal(err)
	}
	defer nh.Close()
	link, err := nh.LinkByName(lab.SegmentBridge)
	if err != nil {
		b.Fatal(err)
	}
	// The stream is open once a change reaches the client.
	change := func(i int) error {
		m := held[i%n]
		mac := append(net.HardwareAddr(nil), m.MAC...)
		mac[5] = byte(1 + i/n)
		return nh.NeighSet(&netlink.Neigh{LinkIndex: link.Attrs().Index, Family: netlink.FAMILY_V4, State: unix.NUD_STALE, IP: m.IP.AsSlice(), HardwareAddr: mac})
	}
	i := 0
	lab.WaitFor(b, 30*time.Second, "the event stream to carry a change", func() bool {
		if err := change(i); err != nil {
			b.Fatal(err)
		}
		i++
		time.Sleep(50 * time.Millisecond)
		return read.Load() > 0
	})
	read.Store(0)
	kindMu.Lock()
	clear(kinds)
	kindMu.Unlock()
	cpu0 := procCPU(b, a.pid())
	const step = 10 * time.Millisecond
	perStep := max(1, rate/int(time.Second/step))
	total := rate * seconds
	start = time.Now()
	tick := time.NewTicker(step)
	sent := 0
	for sent < total {
		<-tick.C
		for range perStep {
			if err := change(i); err != nil {
				b.Fatal(err)
			}
			i++
			sent++
		}
	}
	tick.Stop()
	took := time.Since(start)
	// The stream never goes quiet (the changed entries turn stale-long a
	// threshold later, and those are events too): a few seconds for the
	// client to catch up, then what the agent says.
	time.Sleep(5 * time.Second)
	cpu := procCPU(b, a.pid()) - cpu0
	body := a.metrics(b)
	var dropped, resyncs []string
	for _, l := range strings.Split(body, "\n") {
		switch {
		case strings.HasPrefix(l, "neighwatch_events_dropped_total{"):
			dropped = append(dropped, strings.TrimPrefix(l, "neighwatch_events_dropped_total"))
		case strings.HasPrefix(l, "neighwatch_netlink_resyncs_total{"):
			resyncs = append(resyncs, strings.TrimPrefix(l, "neighwatch_netlink_resyncs_total"))
		}
	}
	peak := readStatusKB(b, a.pid(), "VmHWM")
	got := mirrored()
	b.Logf("churn: %d entries, %d changes in %v (%.0f a second); the client read %d events; events dropped %v; netlink resyncs %v; agent CPU %v (%.1f%% of a core); peak RSS %d MiB; mirrored %d of %d",
		n, sent, took.Round(time.Millisecond), float64(sent)/took.Seconds(), read.Load(), dropped, resyncs, cpu.Round(time.Millisecond),
		100*cpu.Seconds()/took.Seconds(), peak/1024, got, n)
	kindMu.Lock()
	b.Logf("events read by kind/class: %v", kinds)
	kindMu.Unlock()
	if read.Load() == 0 {
		b.Fatal("the client read no event: the stream was not watched")
	}
	b.ReportMetric(float64(read.Load()), "events-read")
}

// jsonField returns the value of a string field of a line of the event
// stream ("" when absent): enough for the stream's own lines, whose
// kinds and classes need no escapes.
func jsonField(line []byte, name string) string {
	key := []byte(`"` + name + `":"`)
	i := bytes.Index(line, key)
	if i < 0 {
		return ""
	}
	rest := line[i+len(key):]
	if j := bytes.IndexByte(rest, '"'); j >= 0 {
		return string(rest[:j])
	}
	return ""
}
