// neighwatch's alerts. Every selector is _config.jobSelector, every
// aggregation keeps _config.clusterLabel, and each alert's `for` and
// severity come from _config.alerts; summaries are fixed sentences,
// descriptions are templated, and each alert links its runbook section.
{
  prometheusAlerts+:: {
    // tableNearThreshold as a percentage, for the sentences; a _config
    // that sets it (the chart's render, whose thresholds are slots) wins.
    local c = { tableNearThresholdPercent: std.toString(std.round(std.parseJson($._config.tableNearThreshold) * 100)) } + $._config,
    local rule(name, expr, summary, description, labels={}, keepFiringFor='') = {
      alert: name,
      expr: expr % c,
      [if c.alerts[name]['for'] != '' then 'for']: c.alerts[name]['for'],
      [if keepFiringFor != '' then 'keep_firing_for']: keepFiringFor,
      labels: { severity: c.alerts[name].severity } + labels,
      annotations: {
        runbook_url: c.runbookURL + '#' + std.asciiLower(name),
        summary: summary % c,
        description: std.strReplace(description % c, '$labels.cluster', '$labels.' + c.clusterLabel),
      },
    },
    // The fleet alert's step: the largest power of two at most the nodes'
    // count, 2 to 1024 (Prometheus templates a rule's labels).
    local steps = [1024, 512, 256, 128, 64, 32, 16, 8, 4],
    local nodesAtLeast = '{{ if ' + std.join('{{ else if ', ['ge $value %d.0 }}%d' % [n, n] for n in steps]) + '{{ else }}2{{ end }}',
    groups+: [
      {
        name: 'neighwatch',
        rules: [
          // A STALE entry past the threshold whose host is not at the entry's
          // MAC: seen elsewhere (ARP/NDP, its own packets) while the entry's
          // MAC stayed silent, proven by a unicast probe to it that went
          // unanswered or by silence for the threshold. Replies to that host
          // are black-holed. A host that sends from a second MAC and answers
          // at its own never fires this; two MACs answering for one IP is
          // NeighbourAddressConflict; traffic bypassing the entry alone is
          // NeighbourReValidationBypassed. One host stuck on many nodes is
          // NeighbourHostStuckOnNodes, which inhibits this one in Alertmanager
          // (docs/deploying.md, Alerts).
          rule(
            'NeighbourEntryStuck',
            'max by (%(clusterLabel)s, instance, interface, family, segment, ip, lladdr, seen_lladdr) (neighwatch_stuck_neighbour_info{%(jobSelector)s}) == 1',
            'A neighbour entry points at a MAC where its host does not answer.',
            '{{ $labels.instance }} sends to {{ $labels.ip }} on {{ $labels.interface }} at {{ $labels.lladdr }}, where nothing answers{{ if $labels.seen_lladdr }}; the host was seen at {{ $labels.seen_lladdr }}{{ end }}. eBPF datapaths that use bpf_redirect() never re-validate STALE entries: run `neighwatch status` on the node, and enable remediation or probe the host (arping -I {{ $labels.interface }} {{ $labels.ip }}).',
          ),
          // One host, stuck on more than one node at once: a host that many
          // nodes talk to moved, and every node still sends to its old MAC.
          // One alert for the host across the fleet; Alertmanager inhibits
          // NeighbourEntryStuck for it (equal: cluster, family, segment, ip,
          // lladdr). A host is its segment (the subnet its nodes reach it
          // through), its address and the old MAC the nodes hold: two hosts
          // that share an address in different segments stay apart, by their
          // MACs (two routers' fe80::1) or, where they share the MAC too (a
          // VRRP router's virtual MAC in two VLANs), by the segment.
          // Shorter than NeighbourEntryStuck's: nodes that find the move
          // within a minute of each other page once.
          // The count reaches the pager each time it doubles: nodes_at_least
          // (2, 4, 8, ... 1024) is a label, so a new step is a new alert in
          // the host's Alertmanager group, which notifies it (a changed
          // annotation would not). The step left behind keeps firing for
          // fleetKeepFiringFor, past the new step's `for`, so the group is
          // never all resolved while the host is stuck; the page resolves
          // that long after the last node is repaired.
          rule(
            'NeighbourHostStuckOnNodes',
            'count by (%(clusterLabel)s, family, segment, ip, lladdr) (max by (%(clusterLabel)s, instance, family, segment, ip, lladdr) (neighwatch_stuck_neighbour_info{%(jobSelector)s}) == 1) > 1',
            'A neighbour is stuck on several nodes.',
            '{{ $labels.ip }} is stuck on {{ $value }} nodes{{ with $labels.cluster }} of {{ . }}{{ end }}: the host moved or is gone, and those nodes still send to its old MAC {{ $labels.lladdr }}. `neighwatch status` on any of them names both MACs.',
            labels={ nodes_at_least: nodesAtLeast },
            keepFiringFor=c.fleetKeepFiringFor,
          ),
          // Two MACs answer for one IP in turn, the entry's one of them: a
          // duplicate address or a spoofer (or a host with two NICs on one
          // subnet answering ARP on both). Not a black hole, since whoever
          // holds the entry's MAC answers; remediation leaves it alone.
          rule(
            'NeighbourAddressConflict',
            'max by (%(clusterLabel)s, instance, interface, family) (neighwatch_neighbours_conflict{%(jobSelector)s}) > 0',
            'Two MACs answer for one neighbour\'s IP.',
            '{{ $value }} {{ $labels.family }} neighbours on {{ $labels.instance }}/{{ $labels.interface }} are answered for by two MACs in turn: a duplicate address or a spoofer. `neighwatch status --class conflict` on the node names them and both MACs.',
          ),
          // Entries STALE past the threshold that traffic reaches only through
          // a bypassing datapath: the kernel will never re-validate them, so a
          // host that moves will be black-holed. Nothing says any host is gone.
          // Counts per interface only, no per-IP series.
          rule(
            'NeighbourReValidationBypassed',
            'max by (%(clusterLabel)s, instance, interface) (neighwatch_neighbours_at_risk{%(jobSelector)s}) > 0',
            'A datapath bypasses the kernel\'s neighbour re-validation.',
            '{{ $value }} STALE entries on {{ $labels.instance }}/{{ $labels.interface }} get traffic only through bpf_redirect(), which never re-validates them; their hosts are reachable for now. Move the datapath to bpf_redirect_neigh(), or run neighwatch with --remediation=on --remediation.scope=at-risk.',
          ),
          // The info series are capped; this fires on counts alone.
          rule(
            'NeighbourStuckEntriesUnnamed',
            'sum by (%(clusterLabel)s, instance) (neighwatch_stuck_neighbour_info_dropped{%(jobSelector)s}) > 0',
            'More neighbours are stuck than neighwatch names in its metrics.',
            '{{ $value }} stuck neighbours on {{ $labels.instance }} are in no neighwatch_stuck_neighbour_info series. Raise --metrics.stuck-info-limit, or run `neighwatch status --json` on the node.',
          ),
          // Packets keep leaving towards a stuck entry without the neighbour
          // subsystem (bpf_redirect datapath): they go to a MAC that may be gone.
          rule(
            'NeighbourBypassTrafficToStuckEntry',
            |||
              sum by (%(clusterLabel)s, instance, interface, family) (increase(neighwatch_neighbour_bypass_packets_total{%(jobSelector)s}[5m])) > 0
              and on (%(clusterLabel)s, instance, interface, family) neighwatch_neighbours_stuck{%(jobSelector)s} > 0
            |||,
            'Traffic keeps going to stuck neighbours.',
            'An eBPF datapath on {{ $labels.instance }}/{{ $labels.interface }} forwards with bpf_redirect() to {{ $labels.family }} entries whose hosts are not at their MACs. Enable remediation (neighwatch remediation on) or move the datapath to bpf_redirect_neigh().',
          ),
          rule(
            'NeighwatchRemediationFailing',
            |||
              sum by (%(clusterLabel)s, instance) (increase(neighwatch_remediation_actions_total{%(jobSelector)s,outcome=~"failed|no-change"}[30m])) > 0
              unless on (%(clusterLabel)s, instance) sum by (%(clusterLabel)s, instance) (increase(neighwatch_remediation_actions_total{%(jobSelector)s,outcome=~"fixed|moved|flushed"}[30m])) > 0
            |||,
            'neighwatch acts on stuck neighbours but repairs none.',
            'Remediation on {{ $labels.instance }} failed or changed nothing {{ $value }} times in 30 minutes and repaired nothing. Check `neighwatch remediation status` and the agent\'s log: the hosts may be gone, or probes filtered.',
          ),
          // The manage strategy keeps as many entries managed as --manage.max
          // allows: more at-risk entries are not kept fresh by the kernel.
          rule(
            'NeighwatchManageCapReached',
            'sum by (%(clusterLabel)s, instance) (increase(neighwatch_manage_refused_total{%(jobSelector)s}[15m])) > 0',
            'neighwatch manages as many neighbours as --manage.max allows.',
            '{{ $labels.instance }} turned {{ $value }} at-risk entries away from the manage strategy in 15 minutes: they go to the next strategy instead of being kept fresh by the kernel. Raise --manage.max if the kernel can afford the probes, or find why so many entries are at risk.',
          ),
          // A managed entry stayed FAILED past --manage.failed-timeout and was
          // released: its host is gone, not moved.
          rule(
            'NeighbourManagedHostGone',
            'sum by (%(clusterLabel)s, instance) (increase(neighwatch_manage_releases_total{%(jobSelector)s,reason="failed"}[30m])) > 0',
            'Managed neighbours failed and were released.',
            '{{ $value }} managed neighbours on {{ $labels.instance }} stayed FAILED and were released: their hosts are gone. The agent\'s log names them (released managed entry ... reason=failed).',
          ),
          // A detection feature the configuration asks for does not work on an
          // interface: the kernel refused its program (verifier, lockdown, a
          // missing hook), it could not attach there, or its map is full. A host
          // that moves there may be black-holed without NeighbourEntryStuck.
          rule(
            'NeighwatchDetectionBlind',
            'min by (%(clusterLabel)s, instance, interface, feature) (neighwatch_detection_working{%(jobSelector)s}) == 0',
            'neighwatch is blind to a kind of evidence on an interface.',
            'neighwatch on {{ $labels.instance }} is blind to {{ $labels.feature }} on {{ $labels.interface }}. `neighwatch tracer` on the node names the refused program and why; the runbook gives each feature\'s kernel limit and the way out (another tracer mode, --remediation.scope, a newer kernel).',
          ),
          // --tracer=off: the operator's choice. A tracer that fails to load is
          // NeighwatchDetectionBlind instead.
          rule(
            'NeighwatchTracerOff',
            'neighwatch_tracer_mode{%(jobSelector)s,mode="off"} == 1 unless on (%(clusterLabel)s, instance) neighwatch_tracer_program_loaded{%(jobSelector)s} == 1',
            'neighwatch runs without its tracer.',
            'neighwatch on {{ $labels.instance }} runs with --tracer=off: bypass traffic is not counted and its hosts\' own packets are not watched, so stuck needs ARP or NDP evidence.',
          ),
          rule(
            'NeighbourTableOverflow',
            'sum by (%(clusterLabel)s, instance, family) (increase(neighwatch_neighbour_table_fulls_total{%(jobSelector)s}[10m])) > 0',
            'A neighbour table is full.',
            'The kernel on {{ $labels.instance }} logged \'neighbor table overflow\' for {{ $labels.family }} {{ $value }} times in 10 minutes: new neighbours cannot be resolved. Raise gc_thresh3.',
          ),
          rule(
            'NeighbourTableNearThreshold',
            |||
              max by (%(clusterLabel)s, instance, family) (neighwatch_neighbour_table_entries{%(jobSelector)s})
              > on (%(clusterLabel)s, instance, family) %(tableNearThreshold)s * max by (%(clusterLabel)s, instance, family) (neighwatch_neighbour_table_gc_threshold{%(jobSelector)s,threshold="3"})
            |||,
            'A neighbour table is above %(tableNearThresholdPercent)s%% of gc_thresh3.',
            'The {{ $labels.family }} neighbour table on {{ $labels.instance }} holds {{ $value }} entries, above %(tableNearThresholdPercent)s%% of gc_thresh3: past it the kernel garbage-collects at every new entry, then refuses new ones.',
          ),
          rule(
            'NeighwatchResyncStorm',
            'sum by (%(clusterLabel)s, instance) (rate(neighwatch_netlink_resyncs_total{%(jobSelector)s,reason="enobufs"}[5m])) > %(resyncStormRate)s',
            'neighwatch keeps overflowing its netlink socket.',
            'neighwatch on {{ $labels.instance }} resyncs {{ $value }} times a second after its netlink socket overflowed. Raise --netlink.receive-buffer; each overflow costs a full dump.',
          ),
          // Moves on one interface arrive faster than the move checks
          // (rate-limited probes of the old MACs) can be made: checks are
          // dropped or wait. A flood of gratuitous replies can hide a
          // hijack among its moves; this pages for the flood itself.
          rule(
            'NeighbourMoveFlood',
            'sum by (%(clusterLabel)s, instance, interface) (increase(neighwatch_remediation_move_checks_dropped_total{%(jobSelector)s}[5m])) > 0 or max by (%(clusterLabel)s, instance, interface) (neighwatch_remediation_move_check_wait_seconds{%(jobSelector)s}) > %(moveCheckWait)s',
            'Entries on an interface move to other MACs faster than neighwatch can check them.',
            'On {{ $labels.instance }}, entries on {{ $labels.interface }} move to other MACs faster than neighwatch asks their old MACs whether they still hold the address: checks were dropped, or one waited past %(moveCheckWait)s s. Something on that segment claims addresses (gratuitous ARP replies or Neighbor Advertisements): a hijack among the moves may go unfound. `neighwatch events` on the node names the moves and their new MACs.',
          ),
          rule(
            'NeighwatchConfigReloadFailed',
            'max by (%(clusterLabel)s, instance) (neighwatch_config_last_reload_successful{%(jobSelector)s}) == 0',
            'neighwatch refused its configuration file and runs the previous one.',
            'neighwatch on {{ $labels.instance }} refused the last change of its configuration file (a ConfigMap edit) and keeps running what it ran before. Its log names the setting; fix the file, or the chart\'s values and upgrade.',
          ),
          rule(
            'NeighwatchDown',
            'max by (%(clusterLabel)s, instance) (up{%(jobSelector)s}) == 0 or min by (%(clusterLabel)s, instance) (neighwatch_ready{%(jobSelector)s}) == 0',
            'neighwatch is down or not ready.',
            'neighwatch on {{ $labels.instance }} is not scraped or not ready: its neighbours are not watched. `kubectl describe` its pod, or `journalctl -u neighwatch` on the node.',
          ),
        ],
      },
    ],
  },
}
