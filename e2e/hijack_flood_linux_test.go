package e2e

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/neighwatch/neighwatch/internal/dev/lab"
	"golang.org/x/sys/unix"
)

// floodMovers is how many other entries the flood keeps moving (issue
// 53: 10,000 on the client's wire).
const floodMovers = 10_000

// TestHijackHiddenInAFlood (issue 53): a spoofer floods the segment with
// gratuitous replies that move 10,000 other entries of the node between
// MACs that do not exist, at the fastest rate one sender here reaches and
// at 10,000 a second; 10 s in (3 s in make test), one more reply hijacks
// a silent host's entry. The hijack must be a conflict within hijackBound all the same:
// its move check is the one that matters (an address not seen moving
// before), not one of the flood's. Before the move checks were ranked by
// stake, a queue of 256 filled with the flood's moves within the first
// second and the hijack's check was dropped, every time. The log line
// says what the flood cost: the agent's CPU, the frames the node sent
// to the hosts (the agent's probes: the node sends nothing else here),
// the move checks by outcome, the resyncs after netlink overflowed.
//
// NEIGHWATCH_FLOOD_RUNS repeats each rate (the issue asks five of five;
// make test runs one of each).
func TestHijackHiddenInAFlood(t *testing.T) {
	lab.Require(t)
	t.Parallel()
	// make test floods 3 s before the hijack (every entry has moved
	// twice by then, and the queue is the flood's): two floods of a CPU
	// each beside the kernel matrix's guests cost the suite enough.
	// NEIGHWATCH_FLOOD_RUNS=N repeats each rate N times with the issue's
	// 10 s.
	runs, lead := 1, 3*time.Second
	if n, err := strconv.Atoi(os.Getenv("NEIGHWATCH_FLOOD_RUNS")); err == nil && n > 0 {
		runs, lead = n, 10*time.Second
	}
	// Not parallel with each other (each floods a CPU, and the two rates
	// would measure each other), nor with the other tests that hold the
	// neighbour thresholds.
	for _, rate := range []int{0, 10_000} {
		for run := range runs {
			t.Run(fmt.Sprintf("%s/%d", rateName(rate), run), func(t *testing.T) {
				hijackInFlood(t, fmt.Sprintf("hf%d%d", rate/10_000, run), rate, lead)
			})
		}
	}
}

func hijackInFlood(t *testing.T, name string, rate int, lead time.Duration) {
	// 10,000 entries and more: above the host's thresholds, held for
	// the test (and STALE entries never collected meanwhile).
	lab.RaiseGCThresh(t, 4*floodMovers)
	movers := lab.FloodMovers(floodMovers)
	nodeIP := lab.SegmentNodeIP
	// A watched segment as the other hijack tests have, but for the
	// event stream: a flood's events would pile up in this process.
	seg := lab.NewSegment(t, name, 2)
	victimIP := lab.SegmentHostIP(0)
	victimMAC, err := seg.Hosts[0].MAC(lab.SegmentHostIf)
	if err != nil {
		t.Fatal(err)
	}
	nodeMAC, err := seg.Node.MAC(lab.SegmentBridge)
	if err != nil {
		t.Fatal(err)
	}
	// Silent: the victim knows the node for good, so it never asks for
	// it; it still answers requests for its address.
	if err := seg.Hosts[0].SetNeigh(lab.SegmentHostIf, nodeIP, nodeMAC, "permanent"); err != nil {
		t.Fatal(err)
	}
	if err := seg.Node.AddNeighs(lab.SegmentBridge, movers, unix.NUD_STALE); err != nil {
		t.Fatal(err)
	}
	// Flushed before the namespace goes: the kernel frees a deleted
	// namespace's entries late, and the thresholds go back down only
	// once they are freed.
	t.Cleanup(func() { _ = seg.Node.IP("neigh", "flush", "dev", lab.SegmentBridge) })
	if err := seg.Node.Ping(victimIP, 1, 2*time.Second); err != nil {
		t.Fatal(err)
	}
	sock := sockPath(t)
	a := startAgent(t, seg.Node, sock, "--tracer", "off", "--remediation", "on", "--remediation.verify-timeout", "1s")
	a.waitPart(t, "evidence")
	a.waitPart(t, "remediation")
	// The real Prometheus and Alertmanager, every for: shortened to 2 s:
	// the flood pages by itself (NeighbourMoveFlood), naming br0.
	alerts := shippedAlerts(t)
	hooks := startAlerting(t, seg.Node, alerts)
	attacker := seg.Hosts[1]
	spoofMAC := net.HardwareAddr{0x02, 0x66, 0, 0, 0, 1}

	cpu0, sent0 := procCPU(t, a.pid()), nodeSent(t, seg)
	var (
		flood    lab.MoveFlood
		floodErr error
		stopOnce sync.Once
	)
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		flood, floodErr = attacker.SendMoves(lab.SegmentHostIf, nodeMAC, movers, rate, 0, stop)
	}()
	stopFlood := func() lab.MoveFlood {
		stopOnce.Do(func() { close(stop) })
		<-done
		if floodErr != nil {
			t.Fatal(floodErr)
		}
		return flood
	}
	defer stopFlood()
	// lead of flood first, and every entry moved at least twice: the
	// flood's checks hold every slot they can by then.
	floodStart := time.Now()
	lab.WaitFor(t, 10*time.Minute, fmt.Sprintf("%v of flood, every entry moved twice", lead), func() bool {
		select {
		case <-done:
			t.Fatalf("the flood ended early: %+v %v", flood, floodErr)
		default:
		}
		return time.Since(floodStart) >= lead &&
			atoiOr(metricValue(a.metrics(t), `neighwatch_neighbour_lladdr_changes_total{family="inet",interface="br0"}`)) >= 2*floodMovers
	})
	// The hijack: one gratuitous reply claiming the victim's address for
	// the spoofer's MAC, in the middle of the flood.
	if _, err := attacker.SendMoves(lab.SegmentHostIf, nodeMAC, []lab.Mover{{IP: victimIP, MAC: spoofMAC}}, 0, 1, nil); err != nil {
		t.Fatal(err)
	}
	sentAt := time.Now()
	var hijacked time.Time
	lab.WaitFor(t, 30*time.Second, "the node's kernel to take the spoofer's MAC", func() bool {
		e, err := seg.Node.KernelEntry(lab.SegmentBridge, victimIP)
		if err == nil && e.LLAddr.String() == spoofMAC.String() {
			hijacked = time.Now()
			return true
		}
		return false
	})
	// The old MAC's answer to a move check is the only answer any check
	// can get here: the flood's MACs belong to no one, and none claims
	// an address twice; the entry is looked at once one was.
	var (
		body     string
		answered bool
		took     time.Duration
	)
	for deadline := time.Now().Add(3 * hijackBound); !answered && time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		body = a.metrics(t)
		took = time.Since(hijacked)
		if atoiOr(metricValue(body, `neighwatch_remediation_move_checks_total{outcome="answered"}`)) >= 1 {
			e, _ := findEntry(statusJSON(t, sock), lab.SegmentBridge, victimIP.String())
			answered = e.Class == "conflict"
		}
	}
	f := stopFlood()
	cpu, sent := procCPU(t, a.pid())-cpu0, nodeSent(t, seg)-sent0
	e, _ := findEntry(statusJSON(t, sock), lab.SegmentBridge, victimIP.String())
	t.Logf("hijack in a flood | %s | sent %d moves in %v (%.0f/s), %d refused by the socket | conflict %.1fs after the kernel took the hijack (%.1fs after it was sent), answered %v, entry %s at %s | agent CPU %.2f s (%.0f%% of one CPU) | node sent %d frames to the hosts (%.0f/s) | %s | %s",
		rateName(rate), f.Sent, f.Took.Round(time.Millisecond), f.Rate(), f.Refused, took.Seconds(), hijacked.Sub(sentAt).Seconds(), answered,
		e.Class, e.LLAddr, cpu.Seconds(), 100*cpu.Seconds()/f.Took.Seconds(), sent, float64(sent)/f.Took.Seconds(),
		grep(body, "move_checks_total"), grep(body, `netlink_resyncs_total{reason="enobufs"}`))
	if !answered || took > hijackBound || e.Class != "conflict" {
		t.Logf("the agent's goroutines:\n%s", agentGoroutines(t, sock))
		t.Errorf("the hijack of %s (%s -> %s) was not a conflict within %v of the kernel taking it (waited %v): its move check was lost in the flood\n%s",
			victimIP, victimMAC, spoofMAC, hijackBound, took.Round(10*time.Millisecond), grep(body, "move_checks"))
	}
	if f.Sent < 2*floodMovers {
		t.Errorf("the flood sent %d moves: it did not flood", f.Sent)
	}
	// Paged for the flood, on its interface: checks were dropped long
	// before now, so within a scrape, an evaluation and the 2 s for.
	lab.WaitFor(t, 30*time.Second, "NeighbourMoveFlood for br0 through Alertmanager", func() bool {
		_, ok := hooks.find("NeighbourMoveFlood", "firing", map[string]string{"interface": lab.SegmentBridge})
		return ok
	})
	paged, _ := hooks.find("NeighbourMoveFlood", "firing", map[string]string{"interface": lab.SegmentBridge})
	t.Logf("NeighbourMoveFlood for %s arrived %.1fs after the flood began", lab.SegmentBridge, paged.Sub(floodStart).Seconds())
}

func rateName(rate int) string {
	if rate == 0 {
		return "fastest"
	}
	return strconv.Itoa(rate) + "/s"
}

// procCPU is the CPU time a process has used, user and system.
func procCPU(t testing.TB, pid int) time.Duration {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	// The fields after the command's closing parenthesis: utime and
	// stime are the 12th and 13th, in clock ticks (USER_HZ, 100).
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	ut, _ := strconv.ParseUint(f[11], 10, 64)
	st, _ := strconv.ParseUint(f[12], 10, 64)
	return time.Duration(ut+st) * 10 * time.Millisecond
}

// nodeSent is the frames the segment's node sent to its hosts, on every
// bridge port.
func nodeSent(t testing.TB, seg *lab.Segment) uint64 {
	t.Helper()
	var n uint64
	for i := range seg.Hosts {
		_, tx, err := seg.Node.LinkStats(fmt.Sprintf("p%d", i))
		if err != nil {
			t.Fatal(err)
		}
		n += tx
	}
	return n
}

// agentGoroutines is the agent's goroutine profile, from its control
// socket: where its workers were when the test failed.
func agentGoroutines(t *testing.T, sock string) string {
	c := http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}}
	resp, err := c.Get("http://neighwatch/debug/pprof/goroutine?debug=1")
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}
