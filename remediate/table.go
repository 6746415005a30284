package remediate

import (
	"net"
	"time"

	"github.com/neighwatch/neighwatch/table"
)

// Table is the table as remediation calls it, which a *table.Table is:
// the small interfaces of the parts below, each of the methods that part
// calls.
type Table interface {
	sweepTable
	confirmTable
	kitTable
	managerTable
	moveTable
}

// engineTable is what the engine itself calls: its sweep's and its
// confirmations'.
type engineTable interface {
	sweepTable
	confirmTable
}

// sweepTable is what the engine's sweep reads its work from (stuck,
// at-risk and managed entries) and publishes to (engine.go).
type sweepTable interface {
	Walk(min table.Class, fn func(en *table.Entry, ifname string) bool) []table.Entry
	Owned() []table.Entry
	Lookup(k table.Key) (table.Entry, bool)
	LinkName(ifindex int32) string
	Publish(ev table.Event)
	// OnSuspect sets the function called when a suspicion begins, so
	// the engine confirms it at once rather than at the next sweep.
	OnSuspect(fn func())
}

// probeTable is where a probe's answer goes, and what it is checked
// against: what a confirmation and an action's kit share.
type probeTable interface {
	Lookup(k table.Key) (table.Entry, bool)
	LinkName(ifindex int32) string
	Heard(k table.Key, mac net.HardwareAddr, when time.Time) bool
	ObserveConflict(k table.Key, a, b net.HardwareAddr, when time.Time) bool
	ProbeUnanswered(k table.Key, mac string, when time.Time) bool
}

// confirmTable is what a confirmation reads (suspects) and reports its
// probe's answer to (confirm.go).
type confirmTable interface {
	probeTable
	Suspects(fn func(en *table.Entry, ifname string) bool) []table.Entry
}

// kitTable is what an action's kit verifies against, by the entry's
// events, and reports its probes' answers to (kit.go, the strategies).
type kitTable interface {
	probeTable
	Events() *table.Broadcaster
}

// managerTable is what the Manager adopts, watches and releases
// managed entries by (manage.go).
type managerTable interface {
	Events() *table.Broadcaster
	Owned() []table.Entry
	Lookup(k table.Key) (table.Entry, bool)
	LinkName(ifindex int32) string
	Watched(ifindex int32) bool
}

// moveTable is what the move checks follow entries by, and report a
// conflict to (movecheck.go).
type moveTable interface {
	Events() *table.Broadcaster
	Lookup(k table.Key) (table.Entry, bool)
	LinkName(ifindex int32) string
	ReportConflict(k table.Key, old, now net.HardwareAddr, when time.Time, cause table.Cause, detail string) bool
}
