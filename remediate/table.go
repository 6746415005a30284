package remediate

import (
	"net"
	"time"

	"github.com/neighwatch/neighwatch/table"
)

// Table is what remediation reads its work from (stuck, at-risk,
// suspect and managed entries) and reports what probes found to.
// TableOf gives a table's.
type Table interface {
	Walk(min table.Class, fn func(en *table.Entry, ifname string) bool) []table.Entry
	Suspects(fn func(en *table.Entry, ifname string) bool) []table.Entry
	Owned() []table.Entry
	Lookup(k table.Key) (table.Entry, bool)
	LinkName(ifindex int32) string
	Watched(ifindex int32) bool
	Heard(k table.Key, mac net.HardwareAddr, when time.Time) bool
	ProbeUnanswered(k table.Key, mac string, when time.Time) bool
	ObserveConflict(k table.Key, a, b net.HardwareAddr, when time.Time) bool
	ReportConflict(k table.Key, old, now net.HardwareAddr, when time.Time, cause table.Cause, detail string) bool
	Events() *table.Broadcaster
	Publish(ev table.Event)
	// OnSuspect sets the function called when a suspicion begins, so
	// the engine confirms it at once rather than at the next sweep.
	OnSuspect(fn func())
}

// TableOf is tbl's Table: its Classifier, Sightings and Reader doors.
func TableOf(tbl *table.Table) Table {
	return struct {
		table.Classifier
		table.Sightings
		table.Reader
	}{tbl.Classifier(), tbl.Sightings(), tbl.Reader()}
}
