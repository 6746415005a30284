// What an operator may change. Override in your own jsonnet:
//   (import 'neighwatch-mixin/mixin.libsonnet') + { _config+:: { clusterLabel: 'k8s_cluster' } }
{
  _config+:: {
    // The selector of the agents' series in every rule.
    jobSelector: 'job="neighwatch"',
    // The label that names a cluster, kept in every aggregation, and the
    // dashboard's cluster variable.
    clusterLabel: 'cluster',
    // Each alert's runbook is this page's section named after it.
    runbookURL: 'https://github.com/neighwatch/neighwatch/blob/main/docs/runbook.md',
    // Thresholds beyond the agent's own (its --stale-threshold decides
    // what is stuck): a table this share of gc_thresh3 full, and the
    // resyncs per second that make a storm (numbers as PromQL writes them).
    tableNearThreshold: '0.9',
    resyncStormRate: '0.1',
    // How long a move check may wait before its interface is called
    // flooded (seconds): at the default rates a full queue drains in
    // about 200 s.
    moveCheckWait: '60',
    // How long NeighbourHostStuckOnNodes keeps firing once its count has
    // moved to another step (nodes_at_least): longer than its `for`, so
    // the host's group never resolves between two steps.
    fleetKeepFiringFor: '3m',
    // Each alert's `for` ('' fires at once) and severity.
    alerts: {
      NeighbourEntryStuck: { 'for': '2m', severity: 'warning' },
      NeighbourHostStuckOnNodes: { 'for': '1m', severity: 'warning' },
      NeighbourAddressConflict: { 'for': '5m', severity: 'warning' },
      NeighbourReValidationBypassed: { 'for': '15m', severity: 'info' },
      NeighbourStuckEntriesUnnamed: { 'for': '5m', severity: 'warning' },
      NeighbourBypassTrafficToStuckEntry: { 'for': '5m', severity: 'critical' },
      NeighwatchRemediationFailing: { 'for': '30m', severity: 'warning' },
      NeighwatchManageCapReached: { 'for': '15m', severity: 'warning' },
      NeighbourManagedHostGone: { 'for': '', severity: 'info' },
      NeighwatchDetectionBlind: { 'for': '5m', severity: 'warning' },
      NeighwatchTracerOff: { 'for': '1h', severity: 'info' },
      NeighbourTableOverflow: { 'for': '', severity: 'critical' },
      NeighbourTableNearThreshold: { 'for': '10m', severity: 'warning' },
      NeighwatchResyncStorm: { 'for': '10m', severity: 'info' },
      NeighwatchConfigReloadFailed: { 'for': '10m', severity: 'warning' },
      NeighbourMoveFlood: { 'for': '1m', severity: 'warning' },
      NeighwatchDown: { 'for': '5m', severity: 'warning' },
    },
  },
}
