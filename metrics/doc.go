// Package metrics exposes the table and each part of the agent to
// Prometheus: one collector per subsystem, computed at scrape time from
// aggregates the parts keep current, each reporting whether its scrape
// worked.
package metrics
