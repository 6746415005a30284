package mirror

import (
	"sync/atomic"

	"github.com/neighwatch/neighwatch/internal/count"
)

// Counter is one thing the mirror counts. Each is declared once, in
// CounterInfo: the metric it is exported as and the label value that
// tells it from its family's others. The metrics collector and the
// docs/metrics.md's test read that table; the mirror counts where it happens
// (m.c.add). A new counter is its line below, its line in CounterInfo
// and its count: one file and the one that counts.
type Counter int

// The mirror's counters.
const (
	Messages        Counter = iota // neighbour messages applied to the table
	Ignored                        // messages for unwatched interfaces, other families or proxies
	Dumps                          // full dumps completed
	ResyncENOBUFS                  // resyncs after the socket overflowed
	ResyncInterrupt                // dumps redone because the kernel flagged them inconsistent
	ResyncLink                     // resyncs after an interface came into scope
	ResyncError                    // resyncs after another socket error
	ResyncPeriodic                 // scheduled reconciliations
	ResyncHooks                    // once the tracer's neigh_create hook is attached
	ErrENOBUFS                     // the neighbour socket overflowed
	ErrDecode                      // a message that did not decode
	ErrSocket                      // another receive error
	LinkResubscribe                // link subscriptions that failed and were renewed
	LinkENOBUFS                    // link sockets that overflowed, after which the links were listed again
	Lookups                        // entries added by Lookup: created without a notification

	NumCounters
)

// The families.
var (
	FamilyMessages = count.Family{Name: "netlink_messages_total", Help: "Neighbour messages applied to the table."}
	FamilyResyncs  = count.Family{Name: "netlink_resyncs_total", Help: "Full dumps that reconciled the table, by reason.", Label: "reason"}
	FamilyErrors   = count.Family{Name: "netlink_errors_total", Help: "Netlink receive and decode errors, by kind.", Label: "kind"}
	FamilyLookups  = count.Family{Name: "netlink_lookups_total", Help: "Entries added by a single-entry lookup: the kernel created them without a notification."}
)

// CounterInfo says how each counter is exported: its family (nil for
// one only the tests read) and its label value there.
var CounterInfo = [NumCounters]count.Export{
	Messages:        {Family: &FamilyMessages},
	Ignored:         {},
	Dumps:           {},
	ResyncENOBUFS:   {Family: &FamilyResyncs, Value: "enobufs"},
	ResyncInterrupt: {Family: &FamilyResyncs, Value: "dump_interrupted"},
	ResyncLink:      {Family: &FamilyResyncs, Value: "link"},
	ResyncError:     {Family: &FamilyResyncs, Value: "error"},
	ResyncPeriodic:  {Family: &FamilyResyncs, Value: "periodic"},
	ResyncHooks:     {Family: &FamilyResyncs, Value: "hooks"},
	ErrENOBUFS:      {Family: &FamilyErrors, Value: "enobufs"},
	ErrDecode:       {Family: &FamilyErrors, Value: "decode"},
	ErrSocket:       {Family: &FamilyErrors, Value: "socket"},
	LinkResubscribe: {},
	LinkENOBUFS:     {},
	Lookups:         {Family: &FamilyLookups},
}

// Counters are the mirror's counters at one moment, by Counter.
type Counters [NumCounters]uint64

// counters is the live form of Counters.
type counters [NumCounters]atomic.Uint64

// add counts one of c.
func (c *counters) add(k Counter) { c[k].Add(1) }

func (c *counters) snapshot() Counters {
	var s Counters
	for i := range c {
		s[i] = c[i].Load()
	}
	return s
}
