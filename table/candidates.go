package table

import "net/netip"

// Candidates calls fn, under the table's lock, for up to max of the
// STALE entries and entries neighwatch manages, with their lladdr (raw
// bytes), from the cursor from on, and returns the cursor of the next
// batch (0: none left), as Range does. A walk that starts at 0 starts
// keeping the changes to that set for CandidateChanges, so a reader that
// walks it all and then follows the changes misses none. fn must not call
// the table, nor keep lladdr (the table's own bytes, valid during the
// call); max must be positive.
func (t CandidateSet) Candidates(from uint32, max int, fn func(k Key, lladdr string)) uint32 {
	t.mu.Lock()
	defer t.mu.Unlock()
	if from == 0 {
		t.candDirty = make(map[Key]struct{}) // a fresh map: a cleared one keeps its size
		t.candLost = false
	}
	var v Entry
	return t.st.walk(from, func(slot uint32, r *rec) bool {
		switch {
		case !r.candidate():
		case max == 0:
			return false
		default:
			max--
			t.st.view(&v, slot, r)
			fn(v.Key, v.LLAddr)
		}
		return true
	})
}

// IsCandidate reports whether k is a STALE entry or one neighwatch
// manages.
func (t CandidateSet) IsCandidate(k Key) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	_, r, ok := t.st.get(k)
	return ok && r.candidate()
}

// CandidateChanges calls fn, under the table's lock, once for each entry
// whose candidacy or lladdr changed since the last call (or Candidates):
// with its lladdr if it is a candidate now, with "" if it is not or is
// gone. It costs what changed, not the table's size. It returns false,
// calling fn for nothing, when the changes outgrew what the table keeps
// (a reader that stalled through a storm): the reader must call
// Candidates again. fn must not call the table, nor keep lladdr.
func (t CandidateSet) CandidateChanges(fn func(k Key, lladdr string)) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.candDirty == nil || t.candLost {
		return false
	}
	var v Entry
	for k := range t.candDirty {
		if slot, r, ok := t.st.get(k); ok && r.candidate() {
			t.st.view(&v, slot, r)
			fn(k, v.LLAddr)
		} else {
			fn(k, "")
		}
	}
	if len(t.candDirty) > 1024 {
		t.candDirty = make(map[Key]struct{}) // let a storm's map go
	} else {
		clear(t.candDirty)
	}
	return true
}

// minCandDirty is the least number of changed candidates the table keeps
// for CandidateChanges; it keeps as many as it holds entries, if more.
const minCandDirty = 65536

// StaleWithMAC returns the address of a STALE entry of interface ifindex
// and family f whose lladdr is mac (raw bytes): the gateway that routed
// traffic to mac went through, which the tracer asks for by its MAC
// alone. It walks the interface's STALE entries of that family, under
// the table's lock; the tracer asks at most once an epoch for each MAC
// bypass traffic was routed to. ok is false when no STALE entry has it.
func (t CandidateSet) StaleWithMAC(ifindex int32, f Family, mac string) (addr netip.Addr, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.ifaces[ifindex]
	if s == nil {
		return netip.Addr{}, false
	}
	for _, h := range []staleHeap{s.long[f.idx()], s.pending[f.idx()]} {
		for _, slot := range h {
			if r := t.st.at(slot); r.live() && r.state == StateStale && t.st.lladdrView(slot, r) == mac {
				return r.ip(), true
			}
		}
	}
	return netip.Addr{}, false
}
