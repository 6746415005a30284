package remediate

import (
	"sync/atomic"
	"testing"
)

// TestCounterInfoCoversOutcomes: every counter is exported, and every
// confirmation and move-check outcome has its counter, counted there and
// read back by Stats.
func TestCounterInfoCoversOutcomes(t *testing.T) {
	for k, e := range CounterInfo {
		if e.Family == nil {
			t.Errorf("counter %d has no family", k)
		}
	}
	c := counters{n: newCounterSet(), actions: make([][numOutcomes]atomic.Uint64, len(registry))}
	for _, o := range ConfirmOutcomes() {
		if _, ok := counterOf(&FamilyConfirmations, string(o)); !ok {
			t.Errorf("confirmation outcome %s has no counter", o)
		}
		c.confirmed(o)
	}
	for _, o := range MoveOutcomes() {
		if _, ok := counterOf(&FamilyMoveChecks, string(o)); !ok {
			t.Errorf("move check outcome %s has no counter", o)
		}
		c.moveChecked(o)
		c.moveChecked(o)
	}
	st := c.stats()
	for _, o := range ConfirmOutcomes() {
		if n := st.Confirmed(o); n != 1 {
			t.Errorf("confirmations %s: %d, want 1", o, n)
		}
	}
	for _, o := range MoveOutcomes() {
		if n := st.MoveChecked(o); n != 2 {
			t.Errorf("move checks %s: %d, want 2", o, n)
		}
	}
}
