// The neighwatch monitoring mixin: prometheusAlerts and grafanaDashboards,
// configured by _config (config.libsonnet). make manifests renders it at
// its defaults into deploy/prometheus/alerts.yml and the dashboard the
// chart and deploy/grafana ship.
(import 'config.libsonnet') +
(import 'alerts.libsonnet') +
(import 'dashboards.libsonnet')
