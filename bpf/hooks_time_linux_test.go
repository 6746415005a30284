package bpf

import (
	"testing"
	"time"

	"github.com/neighwatch/neighwatch/internal/dev/lab"
)

// TestHooksAttachedTimeCounted: the time the per-packet hooks were
// attached (neighwatch_tracer_hooks_attached_seconds_total) grows by at
// least each span they were attached, counted while attached too, and
// not while detached. Bounds from the test's own clock readings around
// the switches: no wall-clock limit a loaded machine could break.
func TestHooksAttachedTimeCounted(t *testing.T) {
	lab.Require(t)
	tr := loadEmpty(t, 1<<14)
	h := tr
	if on, d := h.PerPacket(); on || d != 0 {
		t.Fatalf("at load: attached %v for %v, want detached, 0", on, d)
	}
	var total time.Duration
	for round := range 2 {
		if err := h.SetHooks(true, true); err != nil {
			t.Fatal(err)
		}
		began := time.Now()
		time.Sleep(20 * time.Millisecond)
		if on, d := h.PerPacket(); !on || d < total+time.Since(began) {
			t.Fatalf("round %d, attached: %v for %v, want attached for at least %v", round, on, d, total+time.Since(began))
		}
		span := time.Since(began)
		if err := h.SetHooks(false, false); err != nil {
			t.Fatal(err)
		}
		on, d := h.PerPacket()
		if on || d < total+span {
			t.Fatalf("round %d, detached: %v for %v, want detached, at least %v", round, on, d, total+span)
		}
		total = d
		time.Sleep(5 * time.Millisecond)
		if _, again := h.PerPacket(); again != total {
			t.Fatalf("round %d: %v while detached, then %v: it grew", round, total, again)
		}
	}
}
