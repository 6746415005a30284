package feed_test

import (
	"context"
	"log/slog"
	"net/netip"
	"testing"
	"time"

	"github.com/neighwatch/neighwatch/bpf"
	"github.com/neighwatch/neighwatch/internal/dev/lab"
	"github.com/neighwatch/neighwatch/monitor/feed"
	"github.com/neighwatch/neighwatch/monitor/mirror"
	"github.com/neighwatch/neighwatch/table"
)

// TestTracepointChangesMatchTheKernel: the transitions netlink never
// reports reach the table through the tracepoints as the kernel has
// them, field by field, with cause tracepoint: STALE -> DELAY when the
// kernel sends to a STALE entry, an entry the kernel creates INCOMPLETE
// to resolve an address, and one it creates NOARP for a multicast group,
// which no transition names: the feed looks it up when neigh_create
// fires.
func TestTracepointChangesMatchTheKernel(t *testing.T) {
	lab.Require(t)
	t.Parallel()
	ns, peer := lab.VethPair(t, "ftp")
	host, nobody := netip.MustParseAddr("10.34.0.7"), netip.MustParseAddr("10.34.0.99")
	ns.MustIP(t, "addr", "add", "10.34.0.1/24", "dev", "v0")
	peer.MustIP(t, "addr", "add", host.String()+"/24", "dev", "v1")
	// DELAY and INCOMPLETE last long enough to be compared: the first
	// probe 30 s after DELAY began, broadcast probes 10 s apart.
	for k, v := range map[string]string{"net.ipv4.neigh.v0.delay_first_probe_time": "30", "net.ipv4.neigh.v0.retrans_time_ms": "10000"} {
		if err := ns.Sysctl(k, v); err != nil {
			t.Fatal(err)
		}
	}
	mac, err := peer.MAC("v1")
	if err != nil {
		t.Fatal(err)
	}
	ns.MustIP(t, "neigh", "replace", host.String(), "lladdr", mac.String(), "dev", "v0", "nud", "stale")

	tb := table.New(time.Hour, nil)
	h, err := ns.Handle()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	mir := mirror.New(mirror.Config{NetNS: &h}, tb)
	ino, err := bpf.NetNSInode("/run/netns/" + ns.Name)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := bpf.LoadTracer(bpf.TracerOptions{Mode: bpf.TracerXmit, NetNSIno: ino, InNetNS: ns.Do})
	if err != nil {
		t.Fatal(err)
	}
	f := feed.New(tr, tb, mir, feed.Config{Interval: 100 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{}, 2)
	go func() { _ = mir.Run(ctx); done <- struct{}{} }()
	go func() { _ = f.Run(ctx); done <- struct{}{} }()
	t.Cleanup(func() {
		cancel()
		<-done
		<-done
		tr.Close()
	})
	select {
	case <-f.Ready():
	case <-time.After(lab.Patience(20 * time.Second)):
		t.Fatal("feed not ready after 20s")
	}
	lab.RequireTableMatches(t, ns, tb, "v0", host, "loaded")
	sub := tb.Events().Subscribe(256)
	defer sub.Close()
	idx, _ := ns.Ifindex("v0")
	group := netip.MustParseAddr("ff02::1:5")
	for _, step := range []struct {
		to   netip.Addr
		what string
		want table.State
	}{
		{host, "sent to a STALE entry", table.StateDelay},
		{nobody, "sent to an address with no entry", table.StateIncomplete},
		// NOARP from its first moment: no transition, and no netlink
		// message; only neigh_create names it.
		{group, "sent to a multicast group", table.StateNoARP},
	} {
		if _, err := ns.SendUDP(step.to.WithZone("v0"), 9, 1); err != nil {
			t.Fatal(err)
		}
		k := table.Key{Ifindex: int32(idx), Addr: step.to}
		lab.WaitFor(t, 10*time.Second, step.what+": the table to follow", func() bool {
			e, ok := tb.Lookup(k)
			return ok && e.State == step.want
		})
		lab.RequireTableMatches(t, ns, tb, "v0", step.to, step.what)
		// The table published the change under its lock, before it
		// showed it: the event is waiting.
		var cause table.Cause
		for cause == "" {
			select {
			case ev := <-sub.C():
				if ev.IP == step.to && ev.To == step.want {
					cause = ev.Cause
				}
			default:
				t.Fatalf("%s: no event for the change", step.what)
			}
		}
		if cause != table.CauseTracepoint {
			t.Errorf("%s: the event has cause %s, want tracepoint", step.what, cause)
		}
	}
}
