package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	versioncollector "github.com/prometheus/client_golang/prometheus/collectors/version"
	"github.com/prometheus/common/version"
)

// Version and Revision are set at build time with -ldflags -X.
var (
	Version  = "dev"
	Revision = "unknown"
)

// NewRegistry returns a registry with the given collectors plus build
// info and the Go and process collectors. Nothing is registered globally.
func NewRegistry(cs ...prometheus.Collector) (*prometheus.Registry, error) {
	version.Version = Version
	version.Revision = Revision
	reg := prometheus.NewRegistry()
	cs = append(cs,
		versioncollector.NewCollector(namespace),
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return reg, nil
}
