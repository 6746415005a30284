package table

import (
	"slices"
	"time"
)

// Advance promotes STALE entries that crossed the threshold to stale-long
// (or stuck) and publishes their class change. Cost: O(interfaces) plus
// O(log n) per promoted entry. It returns how many were promoted since
// the last call: by it, or by a reader (a scrape, a lookup, a walk) that
// advanced the table first, so a caller that acts on a burst sees it
// whoever promoted it.
func (t Classifier) Advance() int {
	now := t.now().UnixNano()
	t.mu.Lock()
	defer t.mu.Unlock()
	t.advance(now)
	n := t.promoted
	t.promoted = 0
	return n
}

// SetThreshold changes the stale-long threshold and reclassifies every
// STALE entry under it (one pass over the table: for configuration
// reloads, not for the hot path).
func (t Classifier) SetThreshold(d time.Duration) {
	now := t.now().UnixNano()
	t.mu.Lock()
	defer t.mu.Unlock()
	if int64(d) == t.threshold {
		return
	}
	t.setThreshold(d)
	for slot := range t.suspects {
		t.st.observe(t.st.ent(slot)).silent = false // judged again against the new window
	}
	t.suspectDue = now
	t.st.each(func(slot uint32, r *rec) bool {
		if r.state == StateStale {
			t.reattach(ent{slot, r}, now, CauseClassify)
		}
		return true
	})
	t.advance(now)
}

// setThreshold sets the threshold and the times derived from it. The
// caller holds t.mu (or owns t).
func (t *core) setThreshold(d time.Duration) {
	t.threshold = int64(d)
	t.recheck = int64(d / 2)
	t.silence = int64(max(d, MinSilence))
}

// Walk calls fn, under the table's lock, for each entry of class min or
// worse, classified as of now: min ClassStuck walks the stuck entries,
// ClassAtRisk the at-risk and stuck ones, ClassStaleLong every stale-long
// entry, and ClassOK every STALE entry, young ones too. fn must not call
// the table, nor keep e or its strings: e is a view of the table's own
// record, valid during the call. Walk returns copies of the entries fn
// picked (returned true for), so a caller can look at 100,000 entries and
// copy a few.
func (t Classifier) Walk(min Class, fn func(e *Entry, ifname string) bool) []Entry {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.advance(t.now().UnixNano())
	var out []Entry
	var v Entry
	visit := func(slot uint32, name string) {
		r := t.st.at(slot)
		t.st.view(&v, slot, r)
		if fn(&v, name) {
			out = append(out, t.st.entry(slot, r))
		}
	}
	if min >= ClassAtRisk {
		for slot := range t.stuck {
			visit(slot, t.iface(t.st.at(slot).ifindex).name)
		}
		if min == ClassAtRisk {
			for slot := range t.atRisk {
				visit(slot, t.iface(t.st.at(slot).ifindex).name)
			}
		}
		return out
	}
	for _, s := range t.ifaces {
		for f := range s.long {
			for _, slot := range s.long[f] {
				visit(slot, s.name)
			}
			if min == ClassOK {
				for _, slot := range s.pending[f] {
					visit(slot, s.name)
				}
			}
		}
	}
	return out
}

// CountClass returns how many entries are of class min or worse, in
// O(interfaces).
func (t Classifier) CountClass(min Class) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.advance(t.now().UnixNano())
	n := 0
	for _, s := range t.ifaces {
		for f := range 2 {
			switch {
			case min <= ClassStaleLong:
				n += s.staleLong[f]
			case min == ClassAtRisk:
				n += s.atRisk[f] + s.stuck[f]
			default:
				n += s.stuck[f]
			}
		}
	}
	return n
}

// Owned returns copies of the entries neighwatch manages, in any state;
// it reads an index, not the table.
func (t Classifier) Owned() []Entry {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]Entry, 0, len(t.owned))
	for slot := range t.owned {
		out = append(out, t.st.entry(slot, t.st.at(slot)))
	}
	return out
}

// CountOwned returns how many entries neighwatch manages.
func (t Classifier) CountOwned() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.owned)
}

// Events returns the broadcaster the table publishes to.
func (t Classifier) Events() *Broadcaster { return t.events }

// Publish sends an event to the table's subscribers (other parts of the
// agent report through the same stream).
func (t Classifier) Publish(ev Event) {
	if ev.Interface == "" {
		ev.Interface = Reader(t).LinkName(ev.Ifindex)
	}
	t.events.Publish(ev)
}

// reattach recomputes an entry's aggregates after its evidence or age
// changed, publishing a class event when its class changed.
func (t *core) reattach(le ent, now int64, cause Cause) {
	old := le.class()
	t.detach(le)
	if le.observed() {
		o := t.st.observed(le)
		o.Mismatch, o.SourceMismatch = t.mismatch(le)
	}
	t.attach(le, now)
	if le.class() != old && t.publishing() {
		ev := t.event(le, KindClass, cause, now)
		ev.Detail = classChanges[old][le.class()]
		t.events.Publish(ev)
	}
}

// pastThreshold reports whether r's state began at least the stale
// threshold before now: a STALE entry then is stale-long.
func (t *core) pastThreshold(r *rec, now int64) bool {
	return now-t.st.clk.csNS(r.since) >= t.threshold
}

// promotionStorm is how many entries crossing the threshold in one
// advance make it a storm, for which the long heap grows at once. The
// rest of a storm leave the young heap in one pass (staleHeap.split)
// once those taken one at a time are an eighth of what is left: the
// pass reads the whole heap, so it pays only when much of it crosses.
// A table seeded over a few seconds crosses over as many, a few
// thousand an advance, and a pass of a million for each of those cost
// the agent 14 % of a core for its first minute at 1,000,000 entries
// (BenchmarkGradualCrossing).
const promotionStorm = 1024

// advance promotes the entries past the threshold and adds them to
// t.promoted.
func (t *core) advance(now int64) {
	if t.suspectDue != 0 && now >= t.suspectDue {
		t.suspectDue = 0
		for slot := range t.suspects {
			le := t.st.ent(slot)
			o := t.st.observe(le)
			switch due := o.SuspectAt + t.silence; {
			case o.silent:
			case now >= due:
				o.silent = true
				t.reattach(le, now, CauseClassify)
			case t.suspectDue == 0 || due < t.suspectDue:
				t.suspectDue = due
			}
		}
	}
	for slot := range t.conflicts {
		le := t.st.ent(slot)
		if o := t.st.observe(le); now-o.ConflictAt >= int64(ConflictHold) {
			delete(t.conflicts, slot)
			o.ConflictMACs, o.ConflictAt = [2]string{}, 0
			t.reattach(le, now, CauseClassify)
		}
	}
	for _, s := range t.ifaces {
		for f := range s.pending {
			for n := 0; ; n++ {
				slot, ok := s.pending[f].min()
				if !ok {
					break
				}
				le := t.st.ent(slot)
				if !t.pastThreshold(le.rec, now) {
					break
				}
				if n == promotionStorm {
					// Many cross together (a table filled at once): room
					// for all that may follow, in one allocation. Pushed
					// one at a time, they grow the heap by append's
					// quarter steps: 100,000 allocated about five times
					// the heap's final 0.4 MB (TestPromotionStormGrowsOnce).
					s.long[f] = slices.Grow(s.long[f], len(s.pending[f]))
				}
				if n >= promotionStorm && 8*n >= len(s.pending[f]) {
					// And when much of the heap crosses, the rest leave
					// it in one pass, not one sift each
					// (BenchmarkPromotionStorm).
					crossed := s.pending[f].split(t.st, func(r *rec) bool { return t.pastThreshold(r, now) })
					for _, slot := range crossed {
						t.reattach(t.st.ent(slot), now, CauseClassify)
						t.promoted++
					}
					s.pending[f].shrink()
					break
				}
				t.reattach(le, now, CauseClassify)
				t.promoted++
			}
		}
	}
}

// classChanges names each class change ("ok -> stale-long") once, not
// once per event.
var classChanges = func() (n [ClassStuck + 1][ClassStuck + 1]string) { // ClassStuck is the last
	for _, a := range Classes() {
		for _, b := range Classes() {
			n[a][b] = a.String() + " -> " + b.String()
		}
	}
	return n
}()
