// Package table is the neighbour table every part of neighwatch shares:
// the mirrored entries, their classification and the event stream. Sources
// (the netlink mirror, ARP/NDP evidence, the tracer feed) write to it;
// readers (metrics, remediation, the control API) read it. It imports no
// other package of the project and builds on any OS.
package table
