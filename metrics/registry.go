package metrics

import (
	"runtime/debug"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	versioncollector "github.com/prometheus/client_golang/prometheus/collectors/version"
	"github.com/prometheus/common/version"
)

// Version and Revision are set at build time with -ldflags -X (make
// build does); BuildRevision falls back to what the Go toolchain recorded.
var (
	Version  = "dev"
	Revision = "unknown"
)

// BuildRevision is the commit the binary was built from: Revision when
// the linker set it, else the vcs.revision `go build` records in a git
// work tree (cut to 7 characters, as git rev-parse --short, and marked
// -dirty when the tree had changes), else "unknown".
func BuildRevision() string {
	if Revision != "unknown" {
		return Revision
	}
	return vcsRevision(debug.ReadBuildInfo())
}

func vcsRevision(bi *debug.BuildInfo, ok bool) string {
	if !ok {
		return "unknown"
	}
	rev, dirty := "", false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if rev == "" {
		return "unknown"
	}
	if len(rev) > 7 {
		rev = rev[:7]
	}
	if dirty {
		rev += "-dirty"
	}
	return rev
}

// NewRegistry returns a registry with the given collectors plus build
// info and the Go and process collectors. Nothing is registered globally.
func NewRegistry(cs ...prometheus.Collector) (*prometheus.Registry, error) {
	version.Version = Version
	version.Revision = BuildRevision()
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
