package remediate

import (
	"errors"
	"slices"
	"testing"

	"github.com/neighwatch/neighwatch/bpf"
)

// fakeDatapath is a datapath in memory: pure logic, the real one is
// tested in bpf and end to end.
type fakeDatapath struct {
	modes map[int]bpf.Mode
	feeds map[int][]int
}

func (f *fakeDatapath) FeedsInto(egress int) ([]int, error) {
	if fs, ok := f.feeds[egress]; ok {
		return fs, nil
	}
	return nil, errors.New("no record")
}
func (f *fakeDatapath) Attached() map[int]bpf.Mode { return f.modes }
func (f *fakeDatapath) Mode(i int) bpf.Mode        { return f.modes[i] }
func (f *fakeDatapath) SetMode(i int, m bpf.Mode) error {
	f.modes[i] = m
	return nil
}

// TestDatapathSwapper: the interfaces in legacy mode that fed the egress
// move to neigh, others stay; without a record every legacy interface
// moves; nothing left in legacy mode means nothing to swap.
func TestDatapathSwapper(t *testing.T) {
	dp := &fakeDatapath{
		modes: map[int]bpf.Mode{2: bpf.ModeLegacy, 3: bpf.ModeLegacy, 4: bpf.ModeNeigh},
		feeds: map[int][]int{10: {2, 4}},
	}
	s := NewDatapathSwapper(dp, func(int) string { return "x" }, nil)
	if !s.CanSwap(10) {
		t.Fatal("CanSwap(10) = false; interface 2 feeds it in legacy mode")
	}
	if err := s.Swap(10); err != nil {
		t.Fatal(err)
	}
	if dp.modes[2] != bpf.ModeNeigh || dp.modes[3] != bpf.ModeLegacy {
		t.Fatalf("after Swap(10): %v; want 2 neigh, 3 still legacy", dp.modes)
	}
	// No record for 11: every legacy interface (3) feeds it.
	if got := s.legacyFeeding(11); !slices.Equal(got, []int{3}) {
		t.Fatalf("legacyFeeding(11) = %v, want [3]", got)
	}
	if err := s.Swap(11); err != nil {
		t.Fatal(err)
	}
	if s.CanSwap(10) || s.CanSwap(11) {
		t.Fatalf("CanSwap after every interface swapped: %v", dp.modes)
	}
}
