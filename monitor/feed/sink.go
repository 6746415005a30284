package feed

import (
	"net"
	"net/netip"
	"time"

	"github.com/neighwatch/neighwatch/table"
)

// Sink is what the feed writes the tracer's findings into (the
// transitions netlink never reports, bypass traffic, the hosts' source
// MACs) and reads its candidates from. SinkOf gives a table's.
type Sink interface {
	ApplyTracepoint(k table.Key, from, to table.State, when time.Time) bool
	AddBypass(k table.Key, packets uint64, when time.Time) bool
	ObserveSourceMAC(k table.Key, mac net.HardwareAddr, packets uint64, when time.Time) bool
	Heard(k table.Key, mac net.HardwareAddr, when time.Time) bool
	Candidates(from uint32, max int, fn func(k table.Key, lladdr string)) uint32
	CandidateChanges(fn func(k table.Key, lladdr string)) bool
	IsCandidate(k table.Key) bool
	StaleWithMAC(ifindex int32, f table.Family, mac string) (netip.Addr, bool)
	CountClass(min table.Class) int
	CountOwned() int
	Range(from uint32, max int, fn func(e *table.Entry)) uint32
	Len() int
	Lookup(k table.Key) (table.Entry, bool)
}

// SinkOf is tbl's Sink: the feed writes through its Kernel (transitions)
// and Sightings doors and reads its CandidateSet, Classifier and Reader.
func SinkOf(tbl *table.Table) Sink {
	return struct {
		table.Kernel
		table.Sightings
		table.CandidateSet
		table.Classifier
		table.Reader
	}{tbl.Kernel(), tbl.Sightings(), tbl.CandidateSet(), tbl.Classifier(), tbl.Reader()}
}
