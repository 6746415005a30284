// Package manifests reads what deploy/ ships: it turns the Prometheus rule
// file into the prometheus-operator PrometheusRule and decodes the
// Kubernetes manifests strictly, so that tests catch a field the API
// server would reject and a rule that drifted from its one source.
package manifests
