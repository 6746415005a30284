package agent

import "testing"

// TestTracerMapSlots: the tracer's maps are sized for the entries there
// are (with a quarter to spare, a power of two from 16,384), never for
// what gc_thresh3 allows; a table that fills four fifths of them outgrows
// them, and the next maps are at least twice as large.
func TestTracerMapSlots(t *testing.T) {
	for _, tc := range []struct {
		name            string
		entries, maxMap int
		want            int
	}{
		{"empty", 0, 0, 16384},
		{"a nearly empty table", 1000, 0, 16384},
		{"100,000 entries: 125,000 with a quarter more", 100_000, 0, 131072},
		{"105,000 entries: 131,250 with a quarter more", 105_000, 0, 262144},
		{"1,000,000 entries", 1_000_000, 0, 2097152},
		{"--tracer.max-map-entries caps it", 1_000_000, 1 << 20, 1 << 20},
	} {
		if got := loadSlots(tc.entries, tc.maxMap); got != tc.want {
			t.Errorf("%s: %d slots, want %d", tc.name, got, tc.want)
		}
	}
	if outgrown(104_000, 131072, 0) {
		t.Error("104,000 entries outgrew 131,072 slots: they fit with a quarter to spare")
	}
	if !outgrown(105_000, 131072, 0) {
		t.Error("105,000 entries did not outgrow 131,072 slots")
	}
	if outgrown(10_000_000, 1<<20, 1<<20) {
		t.Error("outgrown past --tracer.max-map-entries: a reload would not make the maps larger")
	}
	// The memory plan assumes the maps a table of gc_thresh3 entries gets.
	if got := tracerMapSlots(TracerConfig{Mode: "auto"}, caps{^uint32(0), ^uint32(0)}, 1_000_000); got != 2097152 {
		t.Errorf("the plan for 1,000,000 entries: %d slots, want 2,097,152", got)
	}
	if got := tracerMapSlots(TracerConfig{Mode: "off"}, caps{^uint32(0), ^uint32(0)}, 1_000_000); got != 0 {
		t.Errorf("the plan without the tracer: %d slots, want 0", got)
	}
}
