package mirror

import "github.com/neighwatch/neighwatch/table"

// Sink is what the mirror writes the kernel's neighbour tables into:
// table.Kernel's methods, and the two reads it needs to tell a known
// entry from a new one. SinkOf gives a table's.
type Sink interface {
	Apply(cause table.Cause, us ...table.Update)
	BeginSync(initial bool)
	EndSync() int
	DeleteLink(ifindex int32, cause table.Cause) int
	SetLinkName(ifindex int32, name string)
	Len() int
	Lookup(k table.Key) (table.Entry, bool)
}

// SinkOf is tbl's Sink: its Kernel door, and its Reader for the two reads.
func SinkOf(tbl *table.Table) Sink {
	return struct {
		table.Kernel
		table.Reader
	}{tbl.Kernel(), tbl.Reader()}
}
