package metrics

import (
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// ConfigSource says how the last configuration reload went.
type ConfigSource interface {
	// LastReload: whether the last reload succeeded (the start counts),
	// and when the last successful one was.
	LastReload() (ok bool, at time.Time)
}

// NewConfigCollector exposes the configuration reload state, named as
// Prometheus names its own.
func NewConfigCollector(src ConfigSource, log *slog.Logger) prometheus.Collector {
	s := newSubsystem("config", log)
	var (
		okDesc = s.gauge("config_last_reload_successful", "Whether the last configuration reload succeeded (1) or kept the running configuration (0).")
		atDesc = s.gauge("config_last_reload_success_timestamp_seconds", "When the configuration was last loaded successfully (the start counts).")
	)
	s.update = func(ch chan<- prometheus.Metric) error {
		ok, at := src.LastReload()
		ch <- okDesc.with(bool01(ok))
		ch <- atDesc.with(float64(at.UnixNano()) / 1e9)
		return nil
	}
	return s
}
