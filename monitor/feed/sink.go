package feed

import (
	"net"
	"net/netip"
	"time"

	"github.com/neighwatch/neighwatch/table"
)

// Table is the table as the feed calls it: the five small interfaces
// below, one for each part of the feed, which a *table.Table has.
type Table interface {
	Transitions
	Evidence
	Candidates
	Demand
	Entries
}

// Transitions takes the transitions netlink never reports (table.Kernel's).
type Transitions interface {
	ApplyTracepoint(k table.Key, from, to table.State, when time.Time) bool
}

// Evidence takes what the programs counted and saw: bypass packets, a
// host's packets from another MAC, and from its own (table.Sightings').
type Evidence interface {
	AddBypass(k table.Key, packets uint64, when time.Time) bool
	ObserveSourceMAC(k table.Key, mac net.HardwareAddr, packets uint64, when time.Time) bool
	Heard(k table.Key, mac net.HardwareAddr, when time.Time) bool
}

// Candidates is what the candidate loop walks, and where routed bypass
// traffic finds its gateway (table.CandidateSet's).
type Candidates interface {
	Candidates(from uint32, max int, fn func(k table.Key, lladdr string)) uint32
	CandidateChanges(fn func(k table.Key, lladdr string)) bool
	IsCandidate(k table.Key) bool
	StaleWithMAC(ifindex int32, f table.Family, mac string) (netip.Addr, bool)
}

// Demand says whether the per-packet hooks are needed: entries
// stale-long, or managed by neighwatch (table.Classifier's).
type Demand interface {
	CountClass(min table.Class) int
	CountOwned() int
}

// Entries is what seeding walks and a counter is checked against
// (table.Reader's).
type Entries interface {
	Range(from uint32, max int, fn func(e *table.Entry)) uint32
	Lookup(k table.Key) (table.Entry, bool)
}
