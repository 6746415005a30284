// Package metrics exposes the neighbour table and the agent's own health to
// Prometheus through collectors that read aggregates at scrape time.
package metrics
