// The files a mixin renders, each as its text: give it this mixin, with
// your _config, and run jsonnet with -S -m DIR, which writes each field to
// DIR/<field> (docs/deploying.md, Alerts). At the defaults (render.jsonnet) they are
// deploy/prometheus/alerts.yml and deploy/grafana/neighwatch.json, byte
// for byte: make manifests writes those with the same program.
local header = |||
  # Rendered from the neighwatch monitoring mixin (deploy/mixin/, jsonnet)
  # by its render.libsonnet; do not edit: change the mixin's _config and
  # render again. The rules' reasons are comments in the mixin.
|||;
function(mixin)
  { 'alerts.yml': header + std.manifestYamlDoc(mixin.prometheusAlerts, indent_array_in_object=true, quote_keys=false) } +
  { [name]: std.manifestJsonEx(mixin.grafanaDashboards[name], '  ') for name in std.objectFields(mixin.grafanaDashboards) }
