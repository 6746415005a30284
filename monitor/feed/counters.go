package feed

import (
	"time"

	"github.com/neighwatch/neighwatch/internal/count"
)

// Counter is one thing the feed counts. Each is declared once: here, and
// in CounterInfo beside it, the metric it is exported as; the feed
// counts where it happens (f.c.Add), and the tracer collector exports
// every row of CounterInfo.
type Counter int

// The feed's counters.
const (
	TransitionsApplied   Counter = iota // silent transitions applied to the table
	TransitionsOvertaken                // silent transitions netlink had already overtaken
	TransitionsUndecoded                // ring buffer records that did not decode
	HitsUnattributed                    // bypass packets for entries the table does not hold
	SourcePackets                       // packets from a candidate's address at another MAC
	Created                             // creations seen by the tracepoints, looked up

	NumCounters
)

// The families the feed's counters are exported in.
var (
	FamilyTransitions = count.Family{Name: "tracer_transitions_total", Help: "Silent transitions from the tracepoints: applied to the table, already overtaken by netlink, or records of the ring buffer that did not decode.", Label: "result"}
	FamilyHits        = count.Family{Name: "tracer_hits_unattributed_total", Help: "Bypass packets counted for entries the table does not hold."}
	FamilySource      = count.Family{Name: "tracer_source_mac_packets_total", Help: "Packets from a stale-long entry's address that arrived from another MAC than the entry's."}
	FamilyCreated     = count.Family{Name: "tracer_created_lookups_total", Help: "Entries the neigh_create tracepoint saw created, looked up at once (netlink does not announce some)."}
)

// CounterInfo says how each counter is exported.
var CounterInfo = [NumCounters]count.Export{
	TransitionsApplied:   {Family: &FamilyTransitions, Value: "applied"},
	TransitionsOvertaken: {Family: &FamilyTransitions, Value: "overtaken"},
	TransitionsUndecoded: {Family: &FamilyTransitions, Value: "undecoded"},
	HitsUnattributed:     {Family: &FamilyHits},
	SourcePackets:        {Family: &FamilySource},
	Created:              {Family: &FamilyCreated},
}

// Counters are the feed's counters at one moment, by Counter.
type Counters [NumCounters]uint64

// HookState says how the per-packet hooks and the source-MAC candidates
// stand, at one moment.
type HookState struct {
	Candidates int // stale-long entries watched for source-MAC evidence
	// Attached says whether the per-packet hooks are attached now, and
	// AttachedTime for how long in all.
	Attached     bool
	AttachedTime time.Duration
}
