package metrics

import (
	"github.com/neighwatch/neighwatch/remediate"
	"github.com/prometheus/client_golang/prometheus"
)

// RemediationCollector exposes the remediation engine.
type RemediationCollector struct {
	e                                        *remediate.Engine
	mode, actions, fix, rateLimited, dropped *prometheus.Desc
	queue, skipped, swaps                    *prometheus.Desc
}

// NewRemediationCollector returns the collector.
func NewRemediationCollector(e *remediate.Engine) *RemediationCollector {
	return &RemediationCollector{
		e:           e,
		mode:        desc("remediation_mode", "The remediation mode in force (1 for the active one).", "mode"),
		actions:     desc("remediation_actions_total", "Remediation actions by strategy and verified outcome (dry-run: would have acted).", "strategy", "outcome"),
		fix:         desc("remediation_detection_to_fix_seconds", "Time from an entry becoming a candidate to its verified repair."),
		rateLimited: desc("remediation_rate_limited_total", "Actions that waited for the global or per-interface rate limit."),
		dropped:     desc("remediation_dropped_total", "Candidates not queued because the queue was full."),
		queue:       desc("remediation_queue_length", "Candidates waiting for a worker."),
		skipped:     desc("remediation_skipped", "Stale-long or stuck entries the last sweep left alone, by reason.", "reason"),
		swaps:       desc("datapath_swaps_total", "Datapath swaps from legacy to neigh made by remediation."),
	}
}

// Describe implements prometheus.Collector.
func (c *RemediationCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.mode, c.actions, c.fix, c.rateLimited, c.dropped, c.queue, c.skipped, c.swaps} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *RemediationCollector) Collect(ch chan<- prometheus.Metric) {
	cur := c.e.Mode()
	for _, m := range []remediate.Mode{remediate.ModeOff, remediate.ModeDryRun, remediate.ModeOn} {
		v := 0.0
		if m == cur {
			v = 1
		}
		ch <- gauge(c.mode, v, string(m))
	}
	k := &c.e.C
	for _, s := range remediate.Strategies() {
		for _, o := range remediate.Outcomes() {
			ch <- counter(c.actions, float64(k.Actions(s, o)), string(s), string(o))
		}
	}
	buckets, sum, n := k.FixHistogram()
	ch <- prometheus.MustNewConstHistogram(c.fix, n, sum, buckets)
	ch <- counter(c.rateLimited, float64(k.RateLimited.Load()))
	ch <- counter(c.dropped, float64(k.Dropped.Load()))
	ch <- gauge(c.queue, float64(c.e.QueueLen()))
	for reason, n := range k.Skipped() {
		ch <- gauge(c.skipped, float64(n), reason)
	}
	ch <- counter(c.swaps, float64(k.Swaps.Load()))
}
