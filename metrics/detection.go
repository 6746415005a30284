package metrics

import (
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"
)

// Detection says whether one detection feature works on one interface.
type Detection struct {
	Interface string
	// Feature: bypass (bypass packets counted), xdp-bypass (the same
	// behind an XDP program), source-mac (a host's own packets from
	// another MAC), created-entries (entries the kernel creates without
	// telling netlink, looked up at once), managed (managed neighbours).
	Feature string
	Working bool
	// Why it does not, in one line (for status, not for labels).
	Why string
}

// DetectionSource lists the features the configuration asks for, per
// interface; features it does not ask for (the tracer off, no manage
// strategy) are absent.
type DetectionSource interface {
	Detection() []Detection
}

// NewDetectionCollector exposes where detection is blind: the kernel
// refused a program, an attach failed, a map is full.
func NewDetectionCollector(src DetectionSource, log *slog.Logger) prometheus.Collector {
	s := newSubsystem("detection", log)
	working := s.gauge("detection_working", "1 where a detection feature the configuration asks for works on an interface, 0 where it is blind (the kernel refused its program, it could not attach, or its map is full): NeighwatchDetectionBlind fires on 0. Features: bypass, xdp-bypass, source-mac, created-entries, managed.", "interface", "feature")
	s.update = func(ch chan<- prometheus.Metric) error {
		for _, d := range src.Detection() {
			ch <- working.with(bool01(d.Working), d.Interface, d.Feature)
		}
		return nil
	}
	return s
}
