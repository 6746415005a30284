package agent

import (
	"log/slog"
	"runtime"
	"runtime/debug"
	"sync"
	"time"
)

// releaseEvery is the shortest time between two releases of memory.
const releaseEvery = 10 * time.Second

// memReleaser returns memory that a burst used to the OS once the burst
// is over: a flood of connections once it has gone, the first dump of a
// large table once the agent is ready. The Go runtime would collect it at
// its next cycle, which an idle agent reaches only after two minutes, and
// return it slowly after that: an attack would leave the agent's RSS
// doubled for minutes, and 100,000 entries would keep their load's
// garbage. It releases at most once per releaseEvery, and a request
// inside that time is kept until the time is up, so the last drain of a
// flood is always followed by a release.
type memReleaser struct {
	mu      sync.Mutex
	last    time.Time
	pending bool
	why     string // what the pending release follows, for the log
	log     *slog.Logger
	free    func()        // debug.FreeOSMemory; tests replace it
	every   time.Duration // releaseEvery; tests shorten it
}

func (r *memReleaser) release(why string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.why = why
	if r.pending {
		return
	}
	r.pending = true
	every := r.every
	if every == 0 {
		every = releaseEvery
	}
	time.AfterFunc(time.Until(r.last.Add(every)), func() {
		r.mu.Lock()
		r.last, r.pending = time.Now(), false
		why := r.why
		r.mu.Unlock()
		if r.free != nil {
			r.free()
			return
		}
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		// Two cycles: the first moves the pooled buffers of the gone
		// connections (net/http keeps them in sync.Pools) to the pools'
		// victim caches, the second frees them; FreeOSMemory then returns
		// the free pages.
		runtime.GC()
		debug.FreeOSMemory()
		runtime.ReadMemStats(&after)
		if r.log != nil {
			r.log.Info(why+": returned its memory to the OS",
				"heap_in_use_before", before.HeapInuse, "heap_in_use", after.HeapInuse,
				"held_from_os", after.HeapSys-after.HeapReleased+after.StackSys)
		}
	})
}
