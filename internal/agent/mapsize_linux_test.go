package agent

import "testing"

// TestTracerMapSlots: the tracer's maps are sized for the entries there
// are (twice them, a power of two from 16,384), never for what
// gc_thresh3 allows alone; no more than the node can hold; and a table
// that fills four fifths of them outgrows them.
func TestTracerMapSlots(t *testing.T) {
	for _, tc := range []struct {
		name                     string
		entries, thresh3, maxMap int
		want                     int
	}{
		{"a nearly empty table on a node that may hold 4,000,000", 1000, 4_000_000, 0, 16384},
		{"100,000 entries: room for twice them", 100_000, 4_000_000, 0, 262144},
		{"no more than gc_thresh3 allows", 100_000, 120_000, 0, 131072},
		{"exempt entries past gc_thresh3: a quarter more", 100_000, 2048, 0, 131072},
		{"gc_thresh3 unreadable", 100_000, 0, 0, 131072},
		{"--tracer.max-map-entries caps it", 1_000_000, 4_000_000, 1 << 20, 1 << 20},
		{"empty", 0, 0, 0, 16384},
	} {
		if got := loadSlots(tc.entries, tc.thresh3, tc.maxMap); got != tc.want {
			t.Errorf("%s: %d slots, want %d", tc.name, got, tc.want)
		}
	}
	size := loadSlots(10_000, 4_000_000, 0) // 20,000 -> 32,768
	if size != 32768 {
		t.Fatalf("10,000 entries: %d slots, want 32,768", size)
	}
	if outgrown(26_000, size, 0) {
		t.Error("26,000 entries outgrew 32,768 slots: they fit with a quarter to spare")
	}
	if !outgrown(26_300, size, 0) {
		t.Error("26,300 entries did not outgrow 32,768 slots")
	}
	if outgrown(10_000_000, 1<<20, 1<<20) {
		t.Error("outgrown past --tracer.max-map-entries: a reload would not make the maps larger")
	}
	// The memory plan assumes the maps a table of gc_thresh3 entries gets.
	if got := tracerMapSlots(TracerConfig{Mode: "auto"}, caps{^uint32(0), ^uint32(0)}, 1_000_000); got != 2097152 {
		t.Errorf("the plan for 1,000,000 entries: %d slots, want 2,097,152", got)
	}
}
