package mirror

import (
	"testing"
	"time"

	"github.com/jpillora/backoff"
)

// TestRetryWait: failures in a row wait longer, jittered and bounded; a
// session that ran longer than the longest wait starts them afresh.
func TestRetryWait(t *testing.T) {
	b := backoff.Backoff{Min: 100 * time.Millisecond, Max: 5 * time.Second, Factor: 2, Jitter: true}
	if w := retryWait(&b, 0); w != b.Min {
		t.Fatalf("first wait %v, want %v", w, b.Min)
	}
	longest := b.Min
	for i := 1; i < 12; i++ {
		w := retryWait(&b, time.Millisecond)
		ceil := min(b.Min<<i, b.Max)
		if w < b.Min || w > ceil {
			t.Fatalf("wait %d: %v, want within [%v, %v]", i, w, b.Min, ceil)
		}
		longest = max(longest, w)
	}
	if longest <= b.Min {
		t.Fatalf("eleven failures in a row never waited longer than %v", b.Min)
	}
	if w := retryWait(&b, b.Max+time.Second); w != b.Min {
		t.Errorf("after a healthy session the wait is %v, want %v", w, b.Min)
	}
}
