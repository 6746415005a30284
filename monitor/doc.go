// Package monitor groups the sources that write the kernel's neighbour
// state into the table (internal/table): mirror follows the kernel's
// neighbour tables over netlink, evidence listens to ARP and NDP for where
// hosts really are, and neightbl reads the tables' GC thresholds and
// statistics. The tracer feed, the third source, lives in internal/feed
// beside the eBPF loaders it drives.
package monitor
