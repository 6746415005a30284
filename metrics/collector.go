package metrics

import (
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/neighwatch/neighwatch/internal/count"
	"github.com/prometheus/client_golang/prometheus"
)

const namespace = "neighwatch"

// subsystem is one collector. Its descriptors are declared once, through
// gauge, counter and histogram, which both build them and record them for
// Describe; update sends the metrics and says whether what it fetched at
// scrape time could be fetched.
type subsystem struct {
	name              string
	descs             []*prometheus.Desc
	success, duration *prometheus.Desc
	update            func(ch chan<- prometheus.Metric) error
	log               *slog.Logger
	failing           atomic.Bool
}

func newSubsystem(name string, log *slog.Logger) *subsystem {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	labels := prometheus.Labels{"collector": name}
	return &subsystem{
		name: name,
		log:  log,
		success: prometheus.NewDesc(namespace+"_scrape_collector_success",
			"1 if the collector fetched everything it reads at scrape time, else 0.", nil, labels),
		duration: prometheus.NewDesc(namespace+"_scrape_collector_duration_seconds",
			"How long the collector took at the last scrape.", nil, labels),
	}
}

// metric is a descriptor with its value type.
type metric struct {
	desc *prometheus.Desc
	typ  prometheus.ValueType
}

func (m metric) with(v float64, labels ...string) prometheus.Metric {
	return prometheus.MustNewConstMetric(m.desc, m.typ, v, labels...)
}

func (s *subsystem) declare(name, help string, labels []string) *prometheus.Desc {
	d := prometheus.NewDesc(namespace+"_"+name, help, labels, nil)
	s.descs = append(s.descs, d)
	return d
}

func (s *subsystem) gauge(name, help string, labels ...string) metric {
	return metric{s.declare(name, help, labels), prometheus.GaugeValue}
}

func (s *subsystem) counter(name, help string, labels ...string) metric {
	return metric{s.declare(name, help, labels), prometheus.CounterValue}
}

func (s *subsystem) histogram(name, help string, labels ...string) *prometheus.Desc {
	return s.declare(name, help, labels)
}

// Describe implements prometheus.Collector.
func (s *subsystem) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range s.descs {
		ch <- d
	}
	ch <- s.success
	ch <- s.duration
}

// Collect implements prometheus.Collector. A failed fetch is logged when
// the collector starts failing and when it recovers, not at every scrape.
func (s *subsystem) Collect(ch chan<- prometheus.Metric) {
	start := time.Now()
	err := s.update(ch)
	ok := 1.0
	if err != nil {
		ok = 0
		if !s.failing.Swap(true) {
			s.log.Warn("metrics collector failed; its metrics are missing from scrapes until it recovers", "collector", s.name, "err", err)
		}
	} else if s.failing.Swap(false) {
		s.log.Info("metrics collector recovered", "collector", s.name)
	}
	ch <- prometheus.MustNewConstMetric(s.success, prometheus.GaugeValue, ok)
	ch <- prometheus.MustNewConstMetric(s.duration, prometheus.GaugeValue, time.Since(start).Seconds())
}

func bool01(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// counted declares in s the families a part's counter table (its
// CounterInfo) names, each once, and returns what sends a snapshot of
// those counters (values, by the same index) as their metrics; a counter
// of no family is left out.
func (s *subsystem) counted(infos []count.Export) func(ch chan<- prometheus.Metric, values []uint64) {
	families := map[*count.Family]metric{}
	for _, e := range infos {
		if f := e.Family; f != nil && families[f].desc == nil {
			if f.Label == "" {
				families[f] = s.counter(f.Name, f.Help)
			} else {
				families[f] = s.counter(f.Name, f.Help, f.Label)
			}
		}
	}
	return func(ch chan<- prometheus.Metric, values []uint64) {
		for i, e := range infos {
			switch {
			case e.Family == nil:
			case e.Family.Label == "":
				ch <- families[e.Family].with(float64(values[i]))
			default:
				ch <- families[e.Family].with(float64(values[i]), e.Value)
			}
		}
	}
}
