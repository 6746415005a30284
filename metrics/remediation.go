package metrics

import (
	"log/slog"

	"github.com/neighwatch/neighwatch/remediate"
	"github.com/prometheus/client_golang/prometheus"
)

// NewRemediationCollector exposes the remediation engine.
func NewRemediationCollector(eng *remediate.Engine, log *slog.Logger) prometheus.Collector {
	s := newSubsystem("remediation", log)
	var (
		mode         = s.gauge("remediation_mode", "The remediation mode in force (1 for the active one).", "mode")
		actions      = s.counter("remediation_actions_total", "Remediation actions by strategy and verified outcome (dry-run: would have acted).", "strategy", "outcome")
		fix          = s.histogram("remediation_detection_to_fix_seconds", "Time from an entry becoming a candidate to its verified repair.")
		queue        = s.gauge("remediation_queue_length", "Candidates waiting for a worker.")
		skipped      = s.gauge("remediation_skipped", "Stale-long or stuck entries the last sweep left alone, by reason.", "reason")
		supported    = s.gauge("manage_supported", "1 when the kernel keeps managed neighbours (Linux 5.16+) and the manage strategy can act.")
		owned        = s.gauge("manage_entries", "Entries the manage strategy keeps managed now (capped by --manage.max).")
		releases     = s.counter("manage_releases_total", "Managed entries given back to the kernel's normal life, by reason.", "reason")
		counted      = s.counted(remediate.CounterInfo[:])
		movesWaiting = s.gauge("remediation_move_checks_waiting", "Move checks waiting for a worker, at most 1,024, the most at stake first (an entry in use, an address not seen moving before).")
		movesDropped = s.counter("remediation_move_checks_dropped_total", "Move checks dropped for want of room, by interface (from 0 on each interface an entry moved on): entries there move faster than they can be checked (NeighbourMoveFlood).", "interface")
		moveWait     = s.gauge("remediation_move_check_wait_seconds", "How long the oldest move check of an interface has waited, 0 when none waits (NeighbourMoveFlood).", "interface")
		recovery     = s.histogram("manage_recovery_seconds", "Managed entries whose host moved: time from the first doubt about the old MAC (evidence of another, or the kernel re-validating) to REACHABLE at the new one.")
	)
	s.update = func(ch chan<- prometheus.Metric) error {
		cur := eng.Mode()
		for _, m := range []remediate.Mode{remediate.ModeOff, remediate.ModeDryRun, remediate.ModeOn} {
			ch <- mode.with(bool01(m == cur), string(m))
		}
		st := eng.Stats()
		for s, outs := range st.Actions {
			for o, n := range outs {
				ch <- actions.with(float64(n), string(s), string(o))
			}
		}
		ch <- prometheus.MustNewConstHistogram(fix, st.FixCount, st.FixSum, st.FixBuckets)
		ch <- queue.with(float64(st.Queue))
		for reason, n := range st.Skipped {
			ch <- skipped.with(float64(n), reason.String())
		}
		ch <- supported.with(bool01(eng.Config().Manage.Supported))
		ch <- owned.with(float64(st.Managed))
		ch <- prometheus.MustNewConstHistogram(recovery, st.RecoveryCount, st.RecoverySum, st.RecoveryBuckets)
		for reason, n := range st.Releases {
			ch <- releases.with(float64(n), string(reason))
		}
		counted(ch, st.Counts[:])
		ch <- movesWaiting.with(float64(st.MovesWaiting))
		for ifname, f := range st.Floods {
			ch <- movesDropped.with(float64(f.Dropped), ifname)
			ch <- moveWait.with(f.OldestWait.Seconds(), ifname)
		}
		return nil
	}
	return s
}
