package pace

import (
	"testing"
	"time"
)

func TestWait(t *testing.T) {
	for _, c := range []struct{ every, took, want time.Duration }{
		{5 * time.Minute, 0, 5 * time.Minute},
		{5 * time.Minute, 20 * time.Millisecond, 5 * time.Minute}, // 100,000 entries
		{5 * time.Minute, 300 * time.Millisecond, 5 * time.Minute},
		{5 * time.Minute, 630 * time.Millisecond, 630 * time.Second}, // a million
		{time.Minute, 2 * time.Second, 2000 * time.Second},
	} {
		if got := Wait(c.every, c.took); got != c.want {
			t.Errorf("Wait(%v, %v) = %v, want %v", c.every, c.took, got, c.want)
		}
	}
}
