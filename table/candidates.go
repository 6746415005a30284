package table

// Candidates calls fn, under the table's lock, for every STALE entry and
// every entry neighwatch manages, with its lladdr (raw bytes), and from
// then on keeps the changes to that set for CandidateChanges. fn must not
// call the table.
func (t CandidateSet) Candidates(fn func(k Key, lladdr string)) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, e := range t.entries {
		if e.candidate() {
			fn(e.Key, e.LLAddr)
		}
	}
	t.candDirty = make(map[Key]struct{}) // a fresh map: a cleared one keeps its size
	t.candLost = false
}

// CandidateChanges calls fn, under the table's lock, once for each entry
// whose candidacy or lladdr changed since the last call (or Candidates):
// with its lladdr if it is a candidate now, with "" if it is not or is
// gone. It costs what changed, not the table's size. It returns false,
// calling fn for nothing, when the changes outgrew what the table keeps
// (a reader that stalled through a storm): the reader must call
// Candidates again. fn must not call the table.
func (t CandidateSet) CandidateChanges(fn func(k Key, lladdr string)) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.candDirty == nil || t.candLost {
		return false
	}
	for k := range t.candDirty {
		if e := t.entries[k]; e != nil && e.candidate() {
			fn(k, e.LLAddr)
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

// candChanged records a change of the candidate k. The caller holds t.mu.
func (t *core) candChanged(k Key) {
	if t.candDirty == nil || t.candLost {
		return
	}
	if len(t.candDirty) >= max(minCandDirty, len(t.entries)) {
		t.candLost = true
		clear(t.candDirty)
		return
	}
	t.candDirty[k] = struct{}{}
}
