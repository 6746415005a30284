// The dashboard, with its cluster variable and queries on
// _config.clusterLabel. dashboards/neighwatch.json is the dashboard at
// the defaults (a copy of deploy/grafana/neighwatch.json that make
// manifests keeps).
{
  grafanaDashboards+:: {
    local l = $._config.clusterLabel,
    local raw = importstr 'dashboards/neighwatch.json',
    local relabel(s) = std.foldl(
      function(acc, r) std.strReplace(acc, r[0], r[1]),
      [
        ['{cluster=~', '{' + l + '=~'],
        ['neighwatch_build_info, cluster)', 'neighwatch_build_info, ' + l + ')'],
        ['by (cluster, ', 'by (' + l + ', '],
      ],
      s,
    ),
    'neighwatch.json': std.parseJson(if l == 'cluster' then raw else relabel(raw)),
  },
}
