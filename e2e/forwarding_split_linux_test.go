package e2e

import (
	"math"
	"testing"
	"time"
)

// TestSplitChunksByWindows: BenchmarkForwardingWithAgent's split counts a
// chunk inside a window only when it is wholly inside (a poll's width in
// from the ends), beside one only when it is wholly outside and within a
// second, and the attached share over the log's time.
func TestSplitChunksByWindows(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	// 10 ms chunks from 0 to 10 s; chunks of the window run at half the
	// rate (20 ms busy for the same frames).
	var log []chunk
	win := span{on: at(4000), off: at(5000)}
	for ms := 0; ms < 10_000; ms += 10 {
		busy := 10 * time.Millisecond
		if ms >= 4000 && ms < 5000 {
			busy = 20 * time.Millisecond
		}
		log = append(log, chunk{from: at(ms), to: at(ms + 10), busy: busy, frames: chunkFrames})
	}
	in, near, duty, ok := split(log, []span{win})
	if !ok {
		t.Fatal("split found no chunk on a side")
	}
	if got := in / near; math.Abs(got-0.5) > 1e-9 {
		t.Errorf("in/near = %v, want 0.5: chunks were put on the wrong side", got)
	}
	if math.Abs(duty-0.1) > 1e-9 {
		t.Errorf("attached share %v, want 0.1", duty)
	}
	// The chunk far from the window (at 0 s, 4 s before it) must not
	// count beside it: make it slow, and the ratio must not move.
	log[0].busy = time.Second
	if in2, near2, _, _ := split(log, []span{win}); in2/near2 != in/near {
		t.Errorf("a chunk 4 s from the window counted beside it: %v, was %v", in2/near2, in/near)
	}
	// A chunk that straddles the window's start counts on neither side.
	log[400] = chunk{from: at(3995), to: at(4005), busy: time.Second, frames: chunkFrames}
	if in3, near3, _, _ := split(log, []span{win}); in3/near3 != in/near {
		t.Errorf("a chunk across the window's edge counted: %v, was %v", in3/near3, in/near)
	}
	if _, _, _, ok := split(log, nil); ok {
		t.Error("with no window, split said it had chunks inside one")
	}
}
