package table

import (
	"cmp"
	"slices"
	"time"
)

// FamilyStats are the aggregates of one interface and family.
type FamilyStats struct {
	Family        Family
	States        [numStates]int // by State.idx(); use Count
	StaleLong     int            // past the threshold, whatever the class
	AtRisk        int
	Conflict      int
	Stuck         int
	Mismatched    int
	MultiMAC      int // hosts known at other MACs than the entry's
	LLAddrChanges uint64
	Bypass        uint64
	OldestStale   time.Duration // age of the oldest STALE entry
	HasStale      bool
	// Managed counts managed entries by owner and state.
	Managed [numOwners][numStates]int
}

// CountManaged returns the number of managed entries of an owner in state s.
func (f *FamilyStats) CountManaged(o Owner, s State) int { return f.Managed[o][s.idx()] }

// Count returns the number of entries in state s.
func (f *FamilyStats) Count(s State) int { return f.States[s.idx()] }

// InterfaceStats are the aggregates of one interface.
type InterfaceStats struct {
	Ifindex  int32
	Name     string
	Families [2]FamilyStats
}

// Transition is a counted state change; From or To is "absent" for
// creations and deletions.
type Transition struct {
	Family   Family
	From, To string
	Count    uint64
}

// Stats is a consistent view of the table's aggregates.
type Stats struct {
	Interfaces  []InterfaceStats
	Transitions []Transition // only non-zero ones
	Entries     int
	Bytes       int     // what the entries take in memory (Table.Bytes)
	Stuck       []Entry // at most the requested cap
	StuckTotal  int
}

// Stats returns the aggregates, with at most stuckCap stuck entries. Its
// cost does not depend on the number of entries.
func (t Classifier) Stats(stuckCap int) Stats {
	now := t.now().UnixNano()
	t.mu.Lock()
	defer t.mu.Unlock()
	t.advance(now)
	st := Stats{Entries: t.st.n, StuckTotal: len(t.stuck), Bytes: t.st.bytes(),
		Interfaces: make([]InterfaceStats, 0, len(t.ifaces))}
	for idx, s := range t.ifaces {
		is := InterfaceStats{Ifindex: idx, Name: s.name}
		for f := range 2 {
			fs := &is.Families[f]
			fs.Family = FamilyInet
			if f == 1 {
				fs.Family = FamilyInet6
			}
			fs.States = s.counts[f]
			fs.StaleLong = s.staleLong[f]
			fs.AtRisk = s.atRisk[f]
			fs.Stuck = s.stuck[f]
			fs.Conflict = s.conflict[f]
			fs.MultiMAC = s.multiMAC[f]
			fs.Mismatched = s.mismatched[f]
			fs.LLAddrChanges = s.lladdrChanges[f]
			fs.Bypass = s.bypass[f]
			fs.Managed = s.managed[f]
			oldest, ok := s.long[f].min()
			if !ok {
				oldest, ok = s.pending[f].min()
			}
			if ok {
				fs.HasStale = true
				fs.OldestStale = time.Duration(now - t.st.clk.csNS(t.st.at(oldest).since))
			}
		}
		st.Interfaces = append(st.Interfaces, is)
	}
	slices.SortFunc(st.Interfaces, func(a, b InterfaceStats) int { return cmp.Compare(a.Ifindex, b.Ifindex) })
	for f := range 2 {
		fam := FamilyInet
		if f == 1 {
			fam = FamilyInet6
		}
		for from := range numStates + 1 {
			for to := range numStates + 1 {
				if n := t.trans[f][from][to]; n > 0 {
					st.Transitions = append(st.Transitions, Transition{Family: fam, From: stateNames[from], To: stateNames[to], Count: n})
				}
			}
		}
	}
	for slot := range t.stuck {
		if len(st.Stuck) >= stuckCap {
			break
		}
		st.Stuck = append(st.Stuck, t.st.entry(slot, t.st.at(slot)))
	}
	return st
}
