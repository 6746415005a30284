package evidence

import (
	"testing"
	"time"
)

// TestRetryBackoff: a listener that keeps failing is retried after a
// second, then up to twice as long each time, never past a minute.
func TestRetryBackoff(t *testing.T) {
	var r retry
	now := time.Unix(1000, 0)
	r.next(now)
	if r.backoff != time.Second || !r.at.Equal(now.Add(time.Second)) {
		t.Fatalf("first retry after %v at %v, want 1s at %v", r.backoff, r.at, now.Add(time.Second))
	}
	for i := 1; i < 20; i++ {
		r.next(now)
		ceil := min(time.Second<<i, time.Minute)
		if r.backoff < time.Second || r.backoff > ceil || !r.at.Equal(now.Add(r.backoff)) {
			t.Fatalf("retry %d after %v (at %v), want within [1s, %v]", i, r.backoff, r.at.Sub(now), ceil)
		}
	}
}
