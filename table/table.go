package table

import (
	"runtime"
	"strconv"
	"sync"
	"time"
)

// Table is the in-memory mirror of the neighbour tables. Every aggregate
// that metrics need is kept up to date on each change, so reading them costs
// the same with ten entries or a hundred thousand.
//
// A Table is one core in five parts, one per kind of writer and
// reader, each a type in its own file; a Table has all their methods,
// and each source or reader declares the few it calls as its own
// interface, which a *Table satisfies as it is. All are safe for
// concurrent use.
type Table struct {
	Kernel
	Sightings
	CandidateSet
	Classifier
	Reader
}

// The parts: each a view of one core, under its one lock.
type (
	// Kernel is what the kernel says: the mirror's updates and the
	// tracepoints' transitions (kernel.go).
	Kernel struct{ *core }
	// Sightings is where the host was seen or heard: ARP/NDP, its
	// packets, probes (sightings.go).
	Sightings struct{ *core }
	// CandidateSet holds the STALE and managed entries the tracer
	// watches (candidates.go).
	CandidateSet struct{ *core }
	// Classifier holds classes, aggregates and the event stream: what
	// readers ask (classify.go).
	Classifier struct{ *core }
	// Reader reads entries by key, in slot order, or all, and links'
	// names (table.go).
	Reader struct{ *core }
)

// core is the state behind every part: the entries, their indexes and
// aggregates, and the lock that guards them all.
type core struct {
	mu        sync.Mutex
	threshold int64 // stale-long threshold, ns
	st        *store
	ifaces    map[int32]*ifaceState
	// Indexes of a few entries each, by slot: stuck, at-risk, managed by
	// neighwatch (NDA_PROTOCOL, any state), with a conflict (to clear
	// after ConflictHold), and suspects (the host seen at another MAC
	// since the entry's MAC was last heard). suspectDue is when the first
	// suspect not yet silent has been silent for the silence window.
	stuck, atRisk, owned, conflicts, suspects map[uint32]struct{}
	suspectDue                                int64
	// recheck: a sighting at one of the host's known MACs is a suspicion
	// again once the entry's MAC has not been heard for this long (half
	// the threshold). silence: how long the entry's MAC must stay silent
	// after a sighting for silence alone to make it stuck.
	recheck, silence int64
	// promoted counts the entries promoted past the threshold since the
	// last Classifier.Advance, by whichever reader advanced the table.
	promoted int
	trans    [2][numStates + 1][numStates + 1]uint64
	gen      uint16
	// candDirty holds the keys of changes to the set of STALE entries
	// and of entries neighwatch manages, or to their addresses (the
	// candidates of the tracer's source-MAC program), since the last
	// CandidateChanges, once Candidates has been called; candLost says it
	// outgrew its bound and the reader must walk Candidates again.
	candDirty map[Key]struct{}
	candLost  bool
	loading   bool // initial dump: no events, no transition counts
	dumping   bool // between BeginSync and EndSync
	// onSuspect, if set, is called (under the lock: it must not block)
	// when a suspicion begins.
	onSuspect func()
	events    *Broadcaster
	now       func() time.Time
}

// ifaceState holds the aggregates of one interface, indexed by family.
type ifaceState struct {
	name          string
	counts        [2][numStates]int
	staleLong     [2]int // all classes past the threshold
	atRisk        [2]int
	stuck         [2]int
	conflict      [2]int
	multiMAC      [2]int // hosts known at other MACs than the entry's
	mismatched    [2]int // seen at another MAC (ARP/NDP or source MAC), unexplained
	lladdrChanges [2]uint64
	bypass        [2]uint64
	managed       [2][numOwners][numStates]int
	pending       [2]staleHeap // STALE, not yet past the threshold, by slot
	long          [2]staleHeap // STALE past the threshold, by slot
}

// New returns an empty table that classifies entries STALE for at least
// threshold as stale-long and publishes changes to events (nil: a new
// broadcaster).
func New(threshold time.Duration, events *Broadcaster) *Table {
	if events == nil {
		events = NewBroadcaster()
	}
	t := &core{
		st:        newStore(),
		ifaces:    make(map[int32]*ifaceState),
		stuck:     make(map[uint32]struct{}),
		atRisk:    make(map[uint32]struct{}),
		owned:     make(map[uint32]struct{}),
		conflicts: make(map[uint32]struct{}),
		suspects:  make(map[uint32]struct{}),
		events:    events,
		now:       time.Now,
	}
	// The store's slabs live outside the Go heap: given back when the
	// table is collected.
	runtime.AddCleanup(t, func(st *store) { st.release() }, t.st)
	t.setThreshold(threshold)
	return &Table{Kernel{t}, Sightings{t}, CandidateSet{t}, Classifier{t}, Reader{t}}
}

// Len returns the number of entries.
func (t Reader) Len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.st.n
}

// Bytes returns the memory the entries take: the store's slabs and
// index, and the evidence of the entries that have some.
func (t Reader) Bytes() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.st.bytes()
}

// Lookup returns a copy of one entry.
func (t Reader) Lookup(k Key) (Entry, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.advance(t.now().UnixNano())
	slot, r, ok := t.st.get(k)
	if !ok {
		return Entry{}, false
	}
	return t.st.entry(slot, r), true
}

// Snapshot returns a copy of every entry, classified as of now, and the
// interface names.
func (t Reader) Snapshot() ([]Entry, map[int32]string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.advance(t.now().UnixNano())
	out := make([]Entry, 0, t.st.n)
	t.st.each(func(slot uint32, r *rec) bool {
		out = append(out, t.st.entry(slot, r))
		return true
	})
	names := make(map[int32]string, len(t.ifaces))
	for i, s := range t.ifaces {
		names[i] = s.name
	}
	return out, names
}

// LinkName returns the name the table knows for an interface.
func (t Reader) LinkName(ifindex int32) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if s := t.ifaces[ifindex]; s != nil {
		return s.name
	}
	return strconv.Itoa(int(ifindex))
}

// Watched reports whether the table knows the interface: it has entries
// there, or was given its name, and DeleteLink has not forgotten it.
func (t Reader) Watched(ifindex int32) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.ifaces[ifindex] != nil
}

// Range calls fn, under the table's lock, for up to max entries from
// the cursor from on (0: the start), and returns the cursor of the next
// call, 0 when it walked to the end. A large table is walked a batch at
// a time, so neither a copy of it nor the lock is held for long; entries
// added or removed between calls may be seen or not. fn must not call
// the table, nor keep e or its strings (a view of the table's own
// record, as Walk's); max must be positive.
func (t Reader) Range(from uint32, max int, fn func(e *Entry)) uint32 {
	t.mu.Lock()
	defer t.mu.Unlock()
	var e Entry
	return t.st.walk(from, func(slot uint32, r *rec) bool {
		if max == 0 {
			return false
		}
		max--
		t.st.view(&e, slot, r)
		fn(&e)
		return true
	})
}
