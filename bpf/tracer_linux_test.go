package bpf

import (
	"context"
	"log/slog"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/neighwatch/neighwatch/internal/lab"
	"github.com/neighwatch/neighwatch/monitor"
)

// stuckLab is problem.md's reproduction: the node's entry for the client is
// STALE with the client's old MAC, and the client then moves to a new MAC
// without telling the node.
type stuckLab struct {
	*lab.Lab
	oldMAC, newMAC string
	mon            *monitor.Monitor
	tracer         *Tracer
	feed           *FeedCounters
	dp             *Datapath
}

func newStuckLab(t *testing.T, prefix string, mode Mode, tmode TracerMode) *stuckLab {
	t.Helper()
	l := lab.New(t, prefix)
	s := &stuckLab{Lab: l, feed: &FeedCounters{}}
	if err := l.PinClientToNode(); err != nil {
		t.Fatal(err)
	}
	// Quick neighbour timers on the node so recovery fits in a test.
	if err := l.Node.QuickNeighTimers(lab.NodeClientIf); err != nil {
		t.Fatal(err)
	}
	old, err := l.Client.MAC(lab.ClientIf)
	if err != nil {
		t.Fatal(err)
	}
	s.oldMAC = old.String()
	if err := l.Node.SetNeigh(lab.NodeClientIf, lab.ClientIP, old, "stale"); err != nil {
		t.Fatal(err)
	}
	// Let the backend know the node, so replies do not wait on ARP.
	if err := l.Backend.Ping(lab.NodeBackendIP, 1, "2"); err != nil {
		t.Fatal(err)
	}

	if mode != "" {
		dp, err := LoadDatapath()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { dp.Close() })
		n1, _ := l.Node.Ifindex(lab.NodeBackendIf)
		if err := l.Node.Do(func() error { return dp.Attach(n1, mode) }); err != nil {
			t.Fatal(err)
		}
		s.dp = dp
	}

	h, err := l.Node.Handle()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	s.mon, _ = monitor.New(monitor.Config{NetNS: &h, StaleThreshold: 2 * time.Second})
	ino, err := NetNSInode("/run/netns/" + l.Node.Name)
	if err != nil {
		t.Fatal(err)
	}
	s.tracer, err = LoadTracer(TracerOptions{Mode: tmode, NetNSIno: ino})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	monDone := make(chan error, 1)
	feedDone := make(chan error, 1)
	go func() { monDone <- s.mon.Run(ctx) }()
	go func() {
		feedDone <- s.tracer.Feed(ctx, s.mon, 200*time.Millisecond, s.feed, slog.New(slog.DiscardHandler))
	}()
	t.Cleanup(func() {
		cancel()
		<-feedDone
		<-monDone
		s.tracer.Close()
	})
	select {
	case <-s.mon.Ready():
	case <-time.After(10 * time.Second):
		t.Fatal("monitor not ready")
	}
	time.Sleep(300 * time.Millisecond) // the feed seeds after ready
	newMAC := lab.HostMAC(77, 3)
	s.newMAC = newMAC.String()
	if err := l.MoveClientMAC(newMAC); err != nil {
		t.Fatal(err)
	}
	return s
}

func (s *stuckLab) clientKey(t *testing.T) monitor.Key {
	n0, err := s.Node.Ifindex(lab.NodeClientIf)
	if err != nil {
		t.Fatal(err)
	}
	return monitor.Key{Ifindex: int32(n0), Addr: lab.ClientIP}
}

// traffic pings the backend from the client: requests are forwarded by the
// node's stack, replies come back through n1 ingress (the datapath, if any).
func (s *stuckLab) traffic(count int) error {
	return s.Client.Ping(lab.BackendIP, count, "1")
}

// TestTracerCountsLegacyBypass runs the failure with the legacy datapath,
// once with the xmit tracer and once asking for fentry. Where the kernel
// refuses fentry (these machines: EPERM) the second run exercises the
// fallback end to end; where it loads, it checks fentry's attribution.
func TestTracerCountsLegacyBypass(t *testing.T) {
	lab.Require(t)
	t.Parallel()
	for _, tm := range []TracerMode{TracerXmit, TracerFentry} {
		t.Run(string(tm), func(t *testing.T) {
			t.Parallel()
			testLegacyBypass(t, tm)
		})
	}
}

func testLegacyBypass(t *testing.T, tm TracerMode) {
	s := newStuckLab(t, "trl", ModeLegacy, tm)
	if tm == TracerFentry {
		if s.tracer.Mode == TracerXmit && s.tracer.Fallback == nil {
			t.Fatal("fell back to xmit without saying why")
		}
		t.Logf("asked for fentry, running %s (fallback: %v)", s.tracer.Mode, s.tracer.Fallback)
	}
	if err := s.traffic(15); err == nil {
		t.Fatal("pings got through with the legacy datapath and a moved client: the lab does not reproduce the failure")
	}
	k := s.clientKey(t)
	var e monitor.Entry
	waitUntil(t, 5*time.Second, "bypass hits on the client's entry", func() bool {
		e, _ = s.mon.Table().Lookup(k)
		return e.BypassPackets >= 10
	})
	ke, err := s.Node.Entry(lab.NodeClientIf, lab.ClientIP)
	if err != nil {
		t.Fatal(err)
	}
	if ke.State[0] != "STALE" || !strings.EqualFold(ke.LLAddr, s.oldMAC) {
		t.Fatalf("kernel entry %v %s, want STALE at the old MAC %s", ke.State, ke.LLAddr, s.oldMAC)
	}
	before := e.BypassPackets
	if err := s.traffic(5); err == nil {
		t.Fatal("pings got through")
	}
	waitUntil(t, 5*time.Second, "hits to keep rising with traffic", func() bool {
		e, _ = s.mon.Table().Lookup(k)
		return e.BypassPackets >= before+4
	})
	waitUntil(t, 5*time.Second, "the entry to be classified stuck", func() bool {
		e, _ = s.mon.Table().Lookup(k)
		return e.Class() == monitor.ClassStuck
	})
	n0, _ := s.Node.Ifindex(lab.NodeClientIf)
	n1, _ := s.Node.Ifindex(lab.NodeBackendIf)
	if feeds, err := s.dp.FeedsInto(n0); err != nil || len(feeds) != 1 || feeds[0] != n1 {
		t.Errorf("FeedsInto(n0) = %v, %v; want [n1=%d]", feeds, err, n1)
	}
	counts, _ := s.dp.Counts()
	if counts[Redirect] < 20 {
		t.Errorf("legacy datapath redirected %d packets, want >= 20", counts[Redirect])
	}
	t.Logf("bypass packets %d, datapath redirects %d", e.BypassPackets, counts[Redirect])
}

func TestTracerNoFalsePositives(t *testing.T) {
	lab.Require(t)
	t.Parallel()
	for _, tc := range []struct {
		name string
		mode Mode
	}{{"neigh datapath", ModeNeigh}, {"kernel forwarding", ""}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := newStuckLab(t, "trn", tc.mode, TracerXmit)
			k := s.clientKey(t)
			sub := s.mon.Table().Events().Subscribe(256)
			defer sub.Close()
			start := time.Now()
			waitUntil(t, 20*time.Second, "the entry to recover with the new MAC", func() bool {
				_ = s.Client.Ping(lab.BackendIP, 1, "1") // replies make the kernel re-resolve
				e, ok := s.mon.Table().Lookup(k)
				return ok && e.HardwareAddr().String() == s.newMAC && (e.State == monitor.StateReachable || e.State == monitor.StateStale)
			})
			t.Logf("recovered after %v", time.Since(start).Round(100*time.Millisecond))
			if err := s.traffic(10); err != nil {
				t.Fatalf("traffic does not flow after recovery: %v", err)
			}
			e, _ := s.mon.Table().Lookup(k)
			if e.BypassPackets != 0 {
				t.Errorf("%d bypass packets counted for traffic that went through the neighbour subsystem", e.BypassPackets)
			}
			// The STALE -> DELAY the kernel made on transmit reached the
			// event stream through the tracepoints.
			sawDelay := false
			for len(sub.C) > 0 {
				ev := <-sub.C
				if ev.IP == lab.ClientIP && ev.Cause == monitor.CauseTracepoint && ev.From == monitor.StateStale && ev.To == monitor.StateDelay {
					sawDelay = true
				}
			}
			if !sawDelay {
				t.Error("no STALE->DELAY event with cause tracepoint")
			}
			if s.feed.Transitions.Load() == 0 {
				t.Error("the feed applied no silent transitions")
			}
		})
	}
}

func waitUntil(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestFentryFallback forces the fentry programs to fail to load and checks
// that the tracer says why and runs in xmit mode.
func TestFentryFallback(t *testing.T) {
	lab.Require(t)
	t.Parallel()
	refuse := func() (*ebpf.CollectionSpec, error) {
		spec, err := loadFentry()
		if err != nil {
			return nil, err
		}
		// An instruction stream the verifier must reject: read R2 uninitialised.
		p := spec.Programs["fe_redirect"]
		p.Instructions = asm.Instructions{asm.Mov.Reg(asm.R0, asm.R2), asm.Return()}
		return spec, nil
	}
	tr, err := LoadTracer(TracerOptions{Mode: TracerAuto, fentrySpec: refuse})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	if tr.Mode != TracerXmit || tr.Fallback == nil || !strings.Contains(tr.Fallback.Error(), "fentry") {
		t.Fatalf("mode %s, fallback %v; want xmit and a reason naming fentry", tr.Mode, tr.Fallback)
	}
	// The real fentry object on this kernel: either it loads, or the
	// refusal is reported the same way.
	tr2, err := LoadTracer(TracerOptions{Mode: TracerFentry})
	if err != nil {
		t.Fatal(err)
	}
	defer tr2.Close()
	if tr2.Mode == TracerXmit && tr2.Fallback == nil {
		t.Fatal("xmit mode without a fallback reason")
	}
	t.Logf("this kernel: fentry mode %s, fallback reason: %v", tr2.Mode, tr2.Fallback)
}

// TestTracerBlamesTheGateway: routed traffic goes to the gateway's MAC with
// a destination IP that has no entry of its own; the hits belong to the
// gateway's entry.
func TestTracerBlamesTheGateway(t *testing.T) {
	lab.Require(t)
	t.Parallel()
	s := newStuckLab(t, "trg", ModeLegacy, TracerXmit)
	// The client becomes the gateway to 10.0.9.0/24.
	s.Node.MustIP(t, "route", "add", "10.0.9.0/24", "via", lab.ClientIP.String(), "dev", lab.NodeClientIf)
	if err := s.Backend.Ping(netip.MustParseAddr("10.0.9.5"), 10, "1"); err == nil {
		t.Fatal("routed pings answered")
	}
	k := s.clientKey(t)
	waitUntil(t, 5*time.Second, "hits on the gateway's entry", func() bool {
		e, _ := s.mon.Table().Lookup(k)
		return e.BypassPackets >= 8
	})
	if _, ok := s.mon.Table().Lookup(monitor.Key{Ifindex: k.Ifindex, Addr: netip.MustParseAddr("10.0.9.5")}); ok {
		t.Fatal("an entry for the routed destination exists: the test would not show attribution")
	}
}

// TestTracerWatchesLargeIfindex: interfaces with an index beyond the
// watched bitmap (65536 and up, common on long-lived Kubernetes nodes) are
// watched through the hash map; the mirror follows their entries.
func TestTracerWatchesLargeIfindex(t *testing.T) {
	lab.Require(t)
	t.Parallel()
	ns := lab.NewNS(t, "big")
	const idx = 70001
	ns.MustIP(t, "link", "add", "big0", "index", "70001", "type", "veth", "peer", "name", "big1")
	ns.MustIP(t, "link", "set", "big0", "up")
	ino, err := NetNSInode("/run/netns/" + ns.Name)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := LoadTracer(TracerOptions{Mode: TracerXmit, NetNSIno: ino})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	if err := tr.SetWatched([]int{idx}, false); err != nil {
		t.Fatal(err)
	}
	ns.MustIP(t, "neigh", "add", "10.7.0.1", "lladdr", "02:00:00:00:07:01", "dev", "big0", "nud", "stale")
	k := nkeyOf(idx, netip.MustParseAddr("10.7.0.1"))
	var v tracerNval
	waitUntil(t, 2*time.Second, "the entry in the mirror", func() bool {
		return tr.objs.NeighMirror.Lookup(k, &v) == nil && v.State == 0x04
	})
	mk := tracerMkey{Ifindex: idx, Family: k.Family, Mac: [6]byte{2, 0, 0, 0, 7, 1}}
	var mv tracerMval
	if err := tr.objs.StaleMacs.Lookup(mk, &mv); err != nil || mv.Count != 1 {
		t.Fatalf("STALE MAC not recorded for ifindex %d: %v %+v", idx, err, mv)
	}
	// Unwatched again: new entries there are not mirrored.
	if err := tr.SetWatched(nil, false); err != nil {
		t.Fatal(err)
	}
	ns.MustIP(t, "neigh", "add", "10.7.0.2", "lladdr", "02:00:00:00:07:02", "dev", "big0", "nud", "stale")
	time.Sleep(200 * time.Millisecond)
	if tr.objs.NeighMirror.Lookup(nkeyOf(idx, netip.MustParseAddr("10.7.0.2")), &v) == nil {
		t.Fatal("an entry of an unwatched interface was mirrored")
	}
}
