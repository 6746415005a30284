// Package neightbl reads the kernel neighbour tables' own parameters and
// statistics (RTM_GETNEIGHTBL): the host-wide GC thresholds, the number of
// entries in every namespace, forced GC runs and "table full" events.
package neightbl
