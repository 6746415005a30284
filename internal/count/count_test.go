package count

import (
	"sync"
	"testing"
)

type counter int

const (
	first counter = iota
	second
	numCounters
)

// TestSetCounts: each counter counts apart, under concurrent adds, and a
// snapshot reads them all.
func TestSetCounts(t *testing.T) {
	s := NewSet(numCounters)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 1000 {
				s.Add(first, 1)
				s.Add(second, 2)
			}
		}()
	}
	wg.Wait()
	var got [numCounters]uint64
	s.Snapshot(got[:])
	if got != [numCounters]uint64{8000, 16000} {
		t.Errorf("snapshot %v, want [8000 16000]", got)
	}
}

// TestSetOf: a counter handed out by Of is the set's own, counted in its
// snapshot.
func TestSetOf(t *testing.T) {
	s := NewSet(numCounters)
	s.Of(second).Add(3)
	s.Add(second, 1)
	var got [numCounters]uint64
	s.Snapshot(got[:])
	if got != [numCounters]uint64{0, 4} {
		t.Errorf("snapshot %v, want [0 4]", got)
	}
}
