package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	versioncollector "github.com/prometheus/client_golang/prometheus/collectors/version"
	"github.com/prometheus/common/version"
)

// NewRegistry returns a registry with the neighbour collector, build info,
// and the Go and process collectors. Nothing is registered globally.
func NewRegistry(c *Collector, extra ...prometheus.Collector) (*prometheus.Registry, error) {
	version.Version = Version
	version.Revision = Revision
	reg := prometheus.NewRegistry()
	cs := []prometheus.Collector{
		c,
		versioncollector.NewCollector("neighwatch"),
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	}
	for _, x := range append(cs, extra...) {
		if err := reg.Register(x); err != nil {
			return nil, err
		}
	}
	return reg, nil
}

// Version and Revision are set at build time with -ldflags -X.
var (
	Version  = "dev"
	Revision = "unknown"
)
