package metrics

import (
	"log/slog"

	"github.com/neighwatch/neighwatch/metrics/connlimit"
	"github.com/prometheus/client_golang/prometheus"
)

// ConnSource is a bounded listener.
type ConnSource interface {
	Stats() connlimit.Stats
}

// NewHTTPCollector exposes the agent's HTTP listeners (metrics, control):
// open connections and those refused past the bounds.
func NewHTTPCollector(srcs map[string]ConnSource, log *slog.Logger) prometheus.Collector {
	s := newSubsystem("http", log)
	var (
		open    = s.gauge("http_connections", "Connections open on an HTTP listener of the agent.", "listener")
		refused = s.counter("http_connections_refused_total", "Connections closed at accept because the listener was full in all or for the client's address.", "listener", "reason")
		evicted = s.counter("http_connections_evicted_total", "Connections closed on a full listener to make room for a client holding fewer: the oldest of the address holding the most.", "listener")
	)
	s.update = func(ch chan<- prometheus.Metric) error {
		for name, src := range srcs {
			st := src.Stats()
			ch <- open.with(float64(st.Open), name)
			ch <- refused.with(float64(st.RefusedTotal), name, "total")
			ch <- refused.with(float64(st.RefusedAddr), name, "per-address")
			ch <- evicted.with(float64(st.Evicted), name)
		}
		return nil
	}
	return s
}
