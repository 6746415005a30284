package evidence

import (
	"testing"
	"time"
)

// TestMoveOrConflict: one change of MAC is a move; two MACs answering in
// turn within the window are a conflict, and keep being one while both
// answer; after the window, a change is a move again.
func TestMoveOrConflict(t *testing.T) {
	const window = int64(5 * time.Second)
	s := int64(time.Second)
	type step struct {
		mac  string
		at   int64
		want Verdict
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"first sighting", []step{{"A", 0, Same}}},
		{"same MAC again", []step{{"A", 0, Same}, {"A", 1 * s, Same}, {"A", 60 * s, Same}}},
		{"moved once (gratuitous ARP from the new MAC)", []step{{"A", 0, Same}, {"B", 1 * s, Move}, {"B", 2 * s, Same}, {"B", 9 * s, Same}}},
		{"moved back within the window: flip flop", []step{{"A", 0, Same}, {"B", 1 * s, Move}, {"A", 2 * s, Conflict}}},
		{"both keep answering", []step{{"A", 0, Same}, {"B", 1 * s, Move}, {"A", 2 * s, Conflict}, {"B", 3 * s, Conflict}, {"A", 4 * s, Conflict}}},
		{"moved back after the window: two moves", []step{{"A", 0, Same}, {"B", 1 * s, Move}, {"A", 7 * s, Move}}},
		{"moved twice to new MACs", []step{{"A", 0, Same}, {"B", 1 * s, Move}, {"C", 2 * s, Move}}},
		{"moved, then a third MAC, then back to the second", []step{{"A", 0, Same}, {"B", 1 * s, Move}, {"C", 2 * s, Move}, {"B", 3 * s, Conflict}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var h host
			for i, st := range tt.steps {
				if got := h.observe(st.mac, st.at, window); got != st.want {
					t.Fatalf("step %d (%s at %ds): %v, want %v", i, st.mac, st.at/s, got, st.want)
				}
			}
		})
	}
}
