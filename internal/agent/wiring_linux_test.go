package agent

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/neighwatch/neighwatch/internal/dev/lab"
	"github.com/neighwatch/neighwatch/monitor/evidence"
	"github.com/neighwatch/neighwatch/monitor/mirror"
	"github.com/neighwatch/neighwatch/table"
)

// TestEvidenceFollowsLinks runs the mirror and the evidence watcher wired
// as the agent wires them, while interfaces come and go: ARP and NDP
// listeners start and stop with them, and nothing leaks.
func TestEvidenceFollowsLinks(t *testing.T) {
	lab.Require(t)
	t.Parallel()
	ns := lab.NewNS(t, "arl")
	h, err := ns.Handle()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	tb := table.New(time.Minute, nil)
	ev := evidence.New(evidence.Config{NetNS: &h}, tb)
	mir := mirror.New(mirror.Config{NetNS: &h, OnLink: linksToEvidence(ev)}, tb)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 2)
	go func() { done <- mir.Run(ctx) }()
	go func() { done <- afterPart{ev, mir.LinksReady()}.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		for range 2 {
			if err := <-done; err != nil {
				t.Error(err)
			}
		}
	})
	select {
	case <-ev.Ready():
	case err := <-done:
		t.Fatalf("stopped before ready: %v", err)
	}
	base, base6 := len(ev.Listening(false)), len(ev.Listening(true))
	g0 := runtime.NumGoroutine()
	for range 5 {
		for i := range 4 {
			ns.MustIP(t, "link", "add", fmt.Sprintf("a%d", i), "type", "veth", "peer", "name", fmt.Sprintf("z%d", i))
		}
		lab.WaitFor(t, 10*time.Second, "listeners on 8 new interfaces", func() bool {
			return len(ev.Listening(false)) == base+8 && len(ev.Listening(true)) == base6+8
		})
		for i := range 4 {
			ns.MustIP(t, "link", "del", fmt.Sprintf("a%d", i)) // takes its peer with it
		}
		lab.WaitFor(t, 10*time.Second, "listeners to stop", func() bool {
			return len(ev.Listening(false)) == base && len(ev.Listening(true)) == base6
		})
	}
	if err := ev.Disabled(); err != nil {
		t.Fatalf("listeners disabled: %v", err)
	}
	lab.WaitFor(t, 10*time.Second, "goroutines to settle", func() bool { return runtime.NumGoroutine() <= g0+8 })
}
