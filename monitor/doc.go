// Package monitor keeps an exact, live mirror of the kernel's neighbour
// tables (ARP and NDP) of one network namespace, classifies entries that stay
// STALE for too long, and collects ARP evidence that a neighbour has moved.
package monitor
