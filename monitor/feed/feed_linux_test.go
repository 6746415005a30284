package feed_test

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/neighwatch/neighwatch/bpf"
	"github.com/neighwatch/neighwatch/internal/dev/lab"
	"github.com/neighwatch/neighwatch/monitor/feed"
	"github.com/neighwatch/neighwatch/monitor/mirror"
	"github.com/neighwatch/neighwatch/table"
)

// stuckLab is problem.md's reproduction: the node's entry for the client is
// STALE with the client's old MAC, and the client then moves to a new MAC
// without telling the node.
type stuckLab struct {
	*lab.Lab
	oldMAC, newMAC string
	table          *table.Table
	tracer         *bpf.Tracer
	feed           *feed.Feed
	dp             *bpf.Datapath
}

func newStuckLab(t *testing.T, prefix string, mode bpf.Mode, tmode bpf.TracerMode, tune ...func(*feed.Config)) *stuckLab {
	t.Helper()
	l := lab.New(t, prefix)
	s := &stuckLab{Lab: l, table: table.New(2*time.Second, nil)}
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
	if err := l.Backend.Ping(lab.NodeBackendIP, 1, 2*time.Second); err != nil {
		t.Fatal(err)
	}

	if mode != "" {
		dp, err := bpf.LoadDatapath()
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
	mir := mirror.New(mirror.Config{NetNS: &h}, s.table)
	ino, err := bpf.NetNSInode("/run/netns/" + l.Node.Name)
	if err != nil {
		t.Fatal(err)
	}
	s.tracer, err = bpf.LoadTracer(bpf.TracerOptions{Mode: tmode, NetNSIno: ino, InNetNS: l.Node.Do})
	if err != nil {
		t.Fatal(err)
	}
	// Hooks attached all the time while some entry is stale-long.
	cfg := feed.Config{Interval: 200 * time.Millisecond, Window: time.Second, Period: time.Second,
		Logger: slog.New(slog.DiscardHandler)}
	for _, f := range tune {
		f(&cfg)
	}
	s.feed = feed.New(s.tracer, s.table, mir, cfg)
	ctx, cancel := context.WithCancel(context.Background())
	mirDone := make(chan error, 1)
	feedDone := make(chan error, 1)
	go func() { mirDone <- mir.Run(ctx) }()
	go func() { feedDone <- s.feed.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-feedDone; err != nil {
			t.Errorf("feed: %v", err)
		}
		if err := <-mirDone; err != nil {
			t.Errorf("mirror: %v", err)
		}
		s.tracer.Close()
	})
	select {
	case <-s.feed.Ready(): // the table is loaded and the tracer seeded
	case err := <-feedDone:
		t.Fatalf("feed stopped before ready: %v", err)
	case <-time.After(lab.Patience(20 * time.Second)):
		t.Fatal("feed not ready after 20s")
	}
	// The per-packet hooks attach once the entry is stale-long.
	k := s.clientKey(t)
	lab.WaitFor(t, 20*time.Second, "the client's entry to be stale-long and the hooks attached", func() bool {
		e, ok := s.table.Lookup(k)
		return ok && e.Class() >= table.ClassStaleLong && s.feed.HookState().Attached
	})
	newMAC := lab.HostMAC(77, 3)
	s.newMAC = newMAC.String()
	if err := l.MoveClientMAC(newMAC); err != nil {
		t.Fatal(err)
	}
	return s
}

func (s *stuckLab) clientKey(t *testing.T) table.Key {
	n0, err := s.Node.Ifindex(lab.NodeClientIf)
	if err != nil {
		t.Fatal(err)
	}
	return table.Key{Ifindex: int32(n0), Addr: lab.ClientIP}
}

// traffic pings the backend from the client: requests are forwarded by the
// node's stack, replies come back through n1 ingress (the datapath, if any).
func (s *stuckLab) traffic(count int) error {
	return s.Client.Ping(lab.BackendIP, count, 1*time.Second)
}

// blackHoled sends count echo requests from the moved client, whose
// replies must all be lost, and waits until the table has taken at
// least more bypass packets for its entry than it held before them
// (what names the wait); it returns the entry as it then was.
func (s *stuckLab) blackHoled(t *testing.T, count int, more uint64, what string) table.Entry {
	t.Helper()
	k := s.clientKey(t)
	e, _ := s.table.Lookup(k)
	before := e.Observed().BypassPackets
	if err := s.traffic(count); err == nil {
		t.Fatal("pings got through with the legacy datapath and a moved client: the lab does not reproduce the failure")
	}
	lab.WaitFor(t, 5*time.Second, what, func() bool {
		e, _ = s.table.Lookup(k)
		return e.Observed().BypassPackets >= before+more
	})
	return e
}

// TestTracerCountsLegacyBypass runs the failure with the legacy datapath,
// once with the xmit tracer and once asking for fentry. Where the kernel
// refuses fentry (these machines: EPERM) the second run exercises the
// fallback end to end; where it loads, it checks fentry's attribution.
func TestTracerCountsLegacyBypass(t *testing.T) {
	lab.Require(t)
	t.Parallel()
	for _, tm := range []bpf.TracerMode{bpf.TracerXmit, bpf.TracerFentry} {
		t.Run(string(tm), func(t *testing.T) {
			t.Parallel()
			testLegacyBypass(t, tm)
		})
	}
}

func testLegacyBypass(t *testing.T, tm bpf.TracerMode) {
	s := newStuckLab(t, "trl", bpf.ModeLegacy, tm)
	if tm == bpf.TracerFentry {
		if s.tracer.Mode() == bpf.TracerXmit && s.tracer.Fallback() == nil {
			t.Fatal("fell back to xmit without saying why")
		}
		t.Logf("asked for fentry, running %s (fallback: %v)", s.tracer.Mode(), s.tracer.Fallback())
	}
	k := s.clientKey(t)
	s.blackHoled(t, 15, 10, "bypass hits on the client's entry")
	ke, err := s.Node.Entry(lab.NodeClientIf, lab.ClientIP)
	if err != nil {
		t.Fatal(err)
	}
	if ke.State[0] != "STALE" || !strings.EqualFold(ke.LLAddr, s.oldMAC) {
		t.Fatalf("kernel entry %v %s, want STALE at the old MAC %s", ke.State, ke.LLAddr, s.oldMAC)
	}
	e := s.blackHoled(t, 5, 4, "hits to keep rising with traffic")
	// The moved client keeps sending: its packets arrive from the new MAC
	// while the node sends to the old one.
	lab.WaitFor(t, 10*time.Second, "the entry to be classified stuck by its source MAC", func() bool {
		e, _ = s.table.Lookup(k)
		return e.Class() == table.ClassStuck
	})
	if !e.Observed().SourceMismatch || e.HardwareAddr().String() == s.newMAC || net.HardwareAddr(e.Observed().SourceMAC).String() != s.newMAC {
		t.Errorf("evidence %+v: want the new MAC %s as source, the old one in the entry", e.Evidence(), s.newMAC)
	}
	n0, _ := s.Node.Ifindex(lab.NodeClientIf)
	n1, _ := s.Node.Ifindex(lab.NodeBackendIf)
	if feeds, err := s.dp.FeedsInto(n0); err != nil || len(feeds) != 1 || feeds[0] != n1 {
		t.Errorf("FeedsInto(n0) = %v, %v; want [n1=%d]", feeds, err, n1)
	}
	counts, _ := s.dp.Counts()
	if counts[bpf.Redirect] < 20 {
		t.Errorf("legacy datapath redirected %d packets, want >= 20", counts[bpf.Redirect])
	}
	t.Logf("bypass packets %d, datapath redirects %d", e.Observed().BypassPackets, counts[bpf.Redirect])
}

// TestIdleHitCountersDropped: the kernel's bypass counter of an entry
// no packet reached for a sweep's period is dropped (its map holds the
// entries with traffic lately, bpf.MaxHitEntries of them at most), and
// traffic after it counts in full from a new counter: the table's
// bypass packets go on rising by what was sent.
func TestIdleHitCountersDropped(t *testing.T) {
	lab.Require(t)
	t.Parallel()
	s := newStuckLab(t, "trd", bpf.ModeLegacy, bpf.TracerXmit, func(c *feed.Config) { c.HitSweep = 2 * time.Second })
	k := s.clientKey(t)
	hk := bpf.HitKey{Ifindex: int(k.Ifindex), Addr: k.Addr}
	counter := func() (uint64, bool) {
		all, err := s.tracer.Hits()
		if err != nil {
			t.Fatal(err)
		}
		n, ok := all[hk]
		return n, ok
	}
	// The table's bypass packets come from the kernel's counter alone:
	// it was there. (Not read here: under load it may be gone already.)
	s.blackHoled(t, 15, 10, "bypass hits on the client's entry")
	// No packet now: two sweeps later at most, the counter is gone.
	lab.WaitFor(t, 20*time.Second, "the idle counter dropped in the kernel", func() bool {
		_, ok := counter()
		return !ok
	})
	e, _ := s.table.Lookup(k)
	if e.State != table.StateStale {
		t.Fatalf("the client's entry %v after its counter was dropped, want it still STALE", e.State)
	}
	before := e.Observed().BypassPackets
	// The old counter is gone: what the table takes now came through a
	// new one.
	e = s.blackHoled(t, 10, 4, "hits to rise again with traffic, from a new counter")
	t.Logf("bypass packets %d before the drop, %d after", before, e.Observed().BypassPackets)
}

func TestTracerNoFalsePositives(t *testing.T) {
	lab.Require(t)
	t.Parallel()
	for _, tc := range []struct {
		name string
		mode bpf.Mode
	}{{"neigh datapath", bpf.ModeNeigh}, {"kernel forwarding", ""}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := newStuckLab(t, "trn", tc.mode, bpf.TracerXmit)
			k := s.clientKey(t)
			sub := s.table.Events().Subscribe(256)
			defer sub.Close()
			start := time.Now()
			lab.WaitFor(t, 20*time.Second, "the entry to recover with the new MAC", func() bool {
				_ = s.Client.Ping(lab.BackendIP, 1, 1*time.Second) // replies make the kernel re-resolve
				e, ok := s.table.Lookup(k)
				return ok && e.HardwareAddr().String() == s.newMAC && (e.State == table.StateReachable || e.State == table.StateStale)
			})
			t.Logf("recovered after %v", time.Since(start).Round(100*time.Millisecond))
			if err := s.traffic(10); err != nil {
				t.Fatalf("traffic does not flow after recovery: %v", err)
			}
			e, _ := s.table.Lookup(k)
			if e.Observed().BypassPackets != 0 {
				t.Errorf("%d bypass packets counted for traffic that went through the neighbour subsystem", e.Observed().BypassPackets)
			}
			// The STALE -> DELAY the kernel made on transmit reached the
			// event stream through the tracepoints.
			sawDelay := false
			for len(sub.C()) > 0 {
				ev := <-sub.C()
				if ev.IP == lab.ClientIP && ev.Cause == table.CauseTracepoint && ev.From == table.StateStale && ev.To == table.StateDelay {
					sawDelay = true
				}
			}
			if !sawDelay {
				t.Error("no STALE->DELAY event with cause tracepoint")
			}
			if s.feed.Counters()[feed.TransitionsApplied] == 0 {
				t.Error("the feed applied no silent transitions")
			}
		})
	}
}

// TestTracerBlamesTheGateway: routed traffic goes to the gateway's MAC with
// a destination IP that has no entry of its own; the hits belong to the
// gateway's entry.
func TestTracerBlamesTheGateway(t *testing.T) {
	lab.Require(t)
	t.Parallel()
	s := newStuckLab(t, "trg", bpf.ModeLegacy, bpf.TracerXmit)
	// The client becomes the gateway to 10.0.9.0/24.
	s.Node.MustIP(t, "route", "add", "10.0.9.0/24", "via", lab.ClientIP.String(), "dev", lab.NodeClientIf)
	if err := s.Backend.Ping(netip.MustParseAddr("10.0.9.5"), 10, 1*time.Second); err == nil {
		t.Fatal("routed pings answered")
	}
	k := s.clientKey(t)
	lab.WaitFor(t, 5*time.Second, "hits on the gateway's entry", func() bool {
		e, _ := s.table.Lookup(k)
		return e.Observed().BypassPackets >= 8
	})
	if _, ok := s.table.Lookup(table.Key{Ifindex: k.Ifindex, Addr: netip.MustParseAddr("10.0.9.5")}); ok {
		t.Fatal("an entry for the routed destination exists: the test would not show attribution")
	}
}

// TestCreatedEntriesLookedUp: the kernel creates IPv6 multicast entries
// without any netlink notification; the neigh_create tracepoint names
// them and the feed looks them up, so the table has them within a second
// or two, without a resync.
func TestCreatedEntriesLookedUp(t *testing.T) {
	lab.Require(t)
	t.Parallel()
	l := lab.New(t, "crt")
	h, err := l.Node.Handle()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	tb := table.New(time.Minute, nil)
	mir := mirror.New(mirror.Config{NetNS: &h}, tb)
	ino, err := bpf.NetNSInode("/run/netns/" + l.Node.Name)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := bpf.LoadTracer(bpf.TracerOptions{Mode: bpf.TracerXmit, NetNSIno: ino, InNetNS: l.Node.Do})
	if err != nil {
		t.Fatal(err)
	}
	f := feed.New(tr, tb, mir, feed.Config{Interval: 200 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 2)
	go func() { done <- mir.Run(ctx) }()
	go func() { done <- f.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		for range 2 {
			if err := <-done; err != nil {
				t.Error(err)
			}
		}
		tr.Close()
	})
	select {
	case <-f.Ready():
	case err := <-done:
		t.Fatalf("stopped before ready: %v", err)
	}
	// The second dump, once the hooks are attached, is part of start-up.
	lab.WaitFor(t, 5*time.Second, "the dump after the hooks", func() bool { return mir.Counters()[mirror.Dumps] == 2 })
	n0, _ := l.Node.Ifindex(lab.NodeClientIf)
	group := netip.MustParseAddr("ff02::1:ff00:2") // a solicited-node group nobody else uses here
	k := table.Key{Ifindex: int32(n0), Addr: group}
	if _, ok := tb.Lookup(k); ok {
		t.Fatal("the multicast entry exists before the test made it")
	}
	mc0, fc0 := mir.Counters(), f.Counters()
	// Sending to a multicast group makes the kernel create a NOARP entry
	// for it, and tell netlink nothing.
	if _, _, err := l.Node.Echo(group.WithZone(lab.NodeClientIf), 1, time.Millisecond, 10*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	lab.WaitFor(t, 5*time.Second, "the multicast entry in the table", func() bool {
		e, ok := tb.Lookup(k)
		return ok && e.State == table.StateNoARP
	})
	// The contract: the tracepoint named the entry, the feed asked the
	// kernel for it, and it is in the table without a dump past start-up.
	// Whether the lookup added it is logged, not asserted: once on 6.12
	// (one CI run of many) the lookup found it already there, brought by
	// another update (the counters below are of the whole namespace).
	c, fc := mir.Counters(), f.Counters()
	how := fmt.Sprintf("lookups that added an entry %d, netlink messages %d, silent transitions %d, creations looked up %d",
		c[mirror.Lookups]-mc0[mirror.Lookups], c[mirror.Messages]-mc0[mirror.Messages], fc[feed.TransitionsApplied]-fc0[feed.TransitionsApplied], fc[feed.Created]-fc0[feed.Created])
	t.Logf("while the entry came: %s", how)
	if fc[feed.Created] == fc0[feed.Created] {
		t.Errorf("no creation was named by the tracepoint and looked up: %s", how)
	}
	if c[mirror.Dumps] != 2 || c[mirror.ResyncHooks] != 1 {
		t.Errorf("dumps %d (%d after the hooks): want no resync past start-up (%s)", c[mirror.Dumps], c[mirror.ResyncHooks], how)
	}
	if ke, err := l.Node.Entry(lab.NodeClientIf, group); err != nil || ke.State[0] != "NOARP" {
		t.Errorf("kernel entry: %+v %v", ke, err)
	}
}
