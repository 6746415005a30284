package mirror

import "github.com/neighwatch/neighwatch/table"

// Table is the table as the mirror calls it, which a *table.Table is:
// what it writes (Sink) and the two reads it needs (Entries).
type Table interface {
	Sink
	Entries
}

// Sink takes what the kernel's neighbour tables hold: changes, dumps and
// interfaces (table.Kernel's).
type Sink interface {
	Apply(cause table.Cause, us ...table.Update)
	BeginSync(initial bool)
	EndSync() int
	DeleteLink(ifindex int32, cause table.Cause) int
	SetLinkName(ifindex int32, name string)
}

// Entries tells a known entry from a new one, and counts them for the
// logs (table.Reader's).
type Entries interface {
	Len() int
	Lookup(k table.Key) (table.Entry, bool)
}
