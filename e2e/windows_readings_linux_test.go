package e2e

import (
	"testing"
	"time"
)

// TestAgentWindowsFromReadings: the gauge's readings make windows, a
// frame counts as inside one only a poll's width in from its ends, and
// only windows that opened after a time are listed as opened after it.
func TestAgentWindowsFromReadings(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	w := &agentWindows{}
	// Readings every 500 ms: on from 2,000 to 4,000, and from 9,000 to
	// 12,000.
	for ms := 0; ms <= 14_000; ms += 500 {
		w.note((ms >= 2000 && ms < 4000) || (ms >= 9000 && ms < 12_000), at(ms))
	}
	if n, reads := w.count(); n != 2 || reads != 29 {
		t.Fatalf("%d windows in %d readings, want 2 in 29", n, reads)
	}
	for _, c := range []struct {
		ms   int
		want bool
	}{{1000, false}, {2300, false}, {2600, true}, {3400, true}, {3700, false}, {6000, false}, {10_000, true}, {11_600, false}} {
		if got := w.within(at(c.ms)); got != c.want {
			t.Errorf("within(%d ms) = %v, want %v", c.ms, got, c.want)
		}
	}
	if got := w.openedAfter(at(3000)); len(got) != 1 || !got[0].Equal(at(9000)) {
		t.Errorf("opened after 3 s: %v, want [9 s]", got)
	}
	if got := w.openedAfter(at(0)); len(got) != 2 {
		t.Errorf("opened after 0 s: %v, want both", got)
	}
}
