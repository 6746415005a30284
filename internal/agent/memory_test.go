package agent

import (
	"sync/atomic"
	"testing"
	"time"
)

// TestMemReleaserCoalesces: requests while one release is pending make
// no second one; a request soon after a release waits for releaseEvery
// and is not dropped.
// (The lower bound on the wait cannot be broken by a slow machine.)
func TestMemReleaserCoalesces(t *testing.T) {
	var n atomic.Int32
	done := make(chan struct{}, 4)
	r := &memReleaser{free: func() { n.Add(1); done <- struct{}{} }, every: 500 * time.Millisecond}
	r.release("test")
	r.release("test")
	r.release("test")
	<-done
	start := time.Now()
	r.release("test") // within every of the first: deferred, not dropped
	<-done
	if waited := time.Since(start); waited < r.every/2 {
		t.Errorf("second release after %v, want about %v", waited, r.every)
	}
	if got := n.Load(); got != 2 {
		t.Errorf("%d releases, want 2 (the first three requests coalesce)", got)
	}
}
