package metrics

import (
	"fmt"
	"runtime/debug"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	versioncollector "github.com/prometheus/client_golang/prometheus/collectors/version"
	"github.com/prometheus/common/version"
)

// The build's version, revision, branch, user and date live in
// prometheus/common/version, set at build time with -ldflags -X as promu
// sets them (make build does), so neighwatch_build_info carries them all.

// Version is the version the binary was built as, "dev" when the linker
// set none.
func Version() string {
	if version.Version == "" {
		return "dev"
	}
	return version.Version
}

// BuildRevision is the commit the binary was built from: the revision
// the linker set, else the vcs.revision `go build` records in a git work
// tree (cut to 7 characters, as git rev-parse --short, and marked -dirty
// when the tree had changes), else "unknown".
func BuildRevision() string {
	if version.Revision != "" && version.Revision != "unknown" {
		return version.Revision
	}
	return vcsRevision(debug.ReadBuildInfo())
}

// VersionString is what `neighwatch version` prints.
func VersionString() string {
	s := fmt.Sprintf("neighwatch %s (revision %s", Version(), BuildRevision())
	if version.Branch != "" {
		s += ", branch " + version.Branch
	}
	if version.BuildDate != "" {
		s += ", built " + version.BuildDate
		if version.BuildUser != "" {
			s += " by " + version.BuildUser
		}
	}
	return s + ", " + version.GoVersion + " " + version.GoOS + "/" + version.GoArch + ")"
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
	version.Version = Version()
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
