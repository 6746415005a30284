package lab

import (
	"testing"
	"time"
)

func TestMaxInWindow(t *testing.T) {
	t0 := time.Unix(0, 0)
	at := func(ms ...int) []time.Time {
		var out []time.Time
		for _, m := range ms {
			out = append(out, t0.Add(time.Duration(m)*time.Millisecond))
		}
		return out
	}
	for _, tc := range []struct {
		times []time.Time
		want  int
	}{
		{nil, 0},
		{at(0), 1},
		{at(0, 999, 1000), 2},
		{at(0, 100, 200, 1500, 1600, 1700, 1800), 4},
	} {
		if got := MaxInWindow(tc.times, time.Second); got != tc.want {
			t.Errorf("MaxInWindow(%v) = %d, want %d", tc.times, got, tc.want)
		}
	}
}
