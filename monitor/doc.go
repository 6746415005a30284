// Package monitor groups the sources that write the kernel's neighbour
// state into the table (package table): mirror follows the kernel's
// neighbour tables over netlink, evidence listens to ARP and NDP for where
// hosts really are, and feed carries what the eBPF tracer (package bpf)
// counts: bypass packets, the hosts' own source MACs and the transitions
// netlink never reports. neightbl reads the tables' GC thresholds and
// statistics.
package monitor
