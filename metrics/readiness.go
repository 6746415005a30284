package metrics

import (
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"
)

// ReadinessSource is the agent's readiness.
type ReadinessSource interface {
	// AgentReady reports whether the parts /readyz waits for are ready.
	AgentReady() bool
	// PartsReady gives each part's readiness by name.
	PartsReady() map[string]bool
}

// NewReadinessCollector exposes the agent's readiness and each part's.
func NewReadinessCollector(src ReadinessSource, log *slog.Logger) prometheus.Collector {
	s := newSubsystem("readiness", log)
	var (
		ready     = s.gauge("ready", "1 once the table is loaded and the parts /readyz waits for are ready.")
		partReady = s.gauge("part_ready", "1 once a part of the agent is ready (the tracer once it is seeded and counting).", "part")
	)
	s.update = func(ch chan<- prometheus.Metric) error {
		ch <- ready.with(bool01(src.AgentReady()))
		for name, ok := range src.PartsReady() {
			ch <- partReady.with(bool01(ok), name)
		}
		return nil
	}
	return s
}
