// Package agent wires neighwatch's parts into the long-running agent:
// sources (netlink mirror, ARP/NDP evidence, tracer feed) write the table,
// readers (metrics, remediation, the control API) read it, and each part
// runs as a task with its own readiness under one errgroup.
package agent
