package agent

import (
	"context"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/neighwatch/neighwatch/table"
)

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
	// The hit counters' map follows the others up to 65,536 slots, and
	// stops there: it holds the entries with bypass traffic lately.
	for _, tc := range []struct{ slots, want int }{{16384, 16384}, {65536, 65536}, {131072, 65536}, {2097152, 65536}} {
		if got := hitSlots(tc.slots); got != tc.want {
			t.Errorf("beside maps of %d slots the hit counters' map has %d, want %d", tc.slots, got, tc.want)
		}
	}
	// The memory plan assumes the maps a table of gc_thresh3 entries gets.
	if got := tracerMapSlots(TracerConfig{Mode: "auto"}, caps{^uint32(0), ^uint32(0)}, 1_000_000); got != 2097152 {
		t.Errorf("the plan for 1,000,000 entries: %d slots, want 2,097,152", got)
	}
	if got := tracerMapSlots(TracerConfig{Mode: "off"}, caps{^uint32(0), ^uint32(0)}, 1_000_000); got != 0 {
		t.Errorf("the plan without the tracer: %d slots, want 0", got)
	}
}

// TestTracerSizedAfterTheDump: where the kernel holds more entries than
// the smallest maps take, the tracer's maps are sized once the mirror's
// first dump is in the table, not from the table before it (empty at
// start: the maps would be too small, and loaded again at once). Where
// the kernel's count fits the smallest maps, the tracer does not wait.
func TestTracerSizedAfterTheDump(t *testing.T) {
	const entries = 50_000
	tb := table.New(time.Minute, nil)
	synced := make(chan struct{})
	asked := make(chan struct{})
	tp := &tracerPart{table: tb, synced: synced, nodeEntries: func() int { close(asked); return entries }}
	got := make(chan int, 1)
	go func() { got <- tp.loadSize(context.Background()) }()
	<-asked
	// The mirror's dump, then its end. A loadSize that did not wait has
	// read the table's length by now, or reads it part-way.
	for i := range entries {
		a := netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)})
		tb.Apply(table.CauseNetlink, table.Update{Family: table.FamilyOf(a), Ifindex: 1, State: table.StateStale, Addr: a, LLAddr: net.HardwareAddr{2, 0, 0, 0, 0, 1}})
	}
	close(synced)
	if n, want := <-got, loadSlots(entries, 0); n != want {
		t.Errorf("the maps sized for %d slots, want %d: for the %d entries of the first dump", n, want, entries)
	}
	// A node whose entries fit the smallest maps: no wait for the dump.
	small := &tracerPart{table: table.New(time.Minute, nil), synced: make(chan struct{}), nodeEntries: func() int { return 100 }}
	if n := small.loadSize(context.Background()); n != loadSlots(0, 0) {
		t.Errorf("a node of 100 entries: %d slots, want %d", n, loadSlots(0, 0))
	}
}
