package neightbl

import "github.com/neighwatch/neighwatch/table"

// Params are one kernel neighbour table's GC thresholds and statistics.
// The thresholds are host-wide: they live in the initial namespace and
// apply to every namespace.
type Params struct {
	Family              table.Family
	Name                string // "arp_cache", "ndisc_cache"
	Thresh1, Thresh2    uint32
	Thresh3             uint32
	Entries             uint32 // ndtc_entries: all entries of the table, every namespace
	Allocs, Destroys    uint64
	ForcedGCRuns        uint64
	TableFulls          uint64
	ResFailed           uint64
	PeriodicGCRuns      uint64
	HasConfig, HasStats bool
	HasThresholds       bool
	GCInterval          uint64 // milliseconds
}
