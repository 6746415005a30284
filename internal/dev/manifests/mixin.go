package manifests

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"

	"github.com/google/go-jsonnet"
	yaml3 "go.yaml.in/yaml/v3"
)

// MixinDir holds the monitoring mixin (jsonnet), the source of the alert
// rules; MixinDashboard is its copy of the dashboard, kept by make
// manifests.
const (
	MixinDir       = "deploy/mixin"
	MixinDashboard = MixinDir + "/dashboards/neighwatch.json"
)

// alertsHeader starts the rendered rule file.
const alertsHeader = `# Rendered from the monitoring mixin (deploy/mixin/, jsonnet) at its defaults by
# "make manifests"; do not edit: change deploy/mixin/ and regenerate (a test
# fails on drift). The mixin's _config sets the job selector, the cluster
# label, the thresholds and each alert's for and severity; the rules'
# reasons are comments there.
`

// A ruleFile is a Prometheus rule file, its fields in the order people
// write them.
type ruleFile struct {
	Groups []struct {
		Name  string `json:"name" yaml:"name"`
		Rules []struct {
			Alert       string            `json:"alert" yaml:"alert"`
			Expr        string            `json:"expr" yaml:"expr"`
			For         string            `json:"for,omitempty" yaml:"for,omitempty"`
			Labels      map[string]string `json:"labels,omitempty" yaml:"labels,omitempty"`
			Annotations struct {
				RunbookURL  string `json:"runbook_url" yaml:"runbook_url"`
				Summary     string `json:"summary" yaml:"summary"`
				Description string `json:"description" yaml:"description"`
			} `json:"annotations" yaml:"annotations"`
		} `json:"rules" yaml:"rules"`
	} `json:"groups" yaml:"groups"`
}

// RenderMixin evaluates the mixin under root with config (jsonnet merged
// into _config, "" for the defaults) and returns the rule file in YAML and
// the dashboard in JSON.
func RenderMixin(root, config string) (rules, dashboard []byte, err error) {
	vm := jsonnet.MakeVM()
	vm.Importer(&jsonnet.FileImporter{JPaths: []string{filepath.Join(root, MixinDir)}})
	if config == "" {
		config = "{}"
	}
	src := fmt.Sprintf("local m = (import 'mixin.libsonnet') + { _config+:: %s };\n{ alerts: m.prometheusAlerts, dashboard: m.grafanaDashboards['neighwatch.json'] }", config)
	out, err := vm.EvaluateAnonymousSnippet("render.jsonnet", src)
	if err != nil {
		return nil, nil, err
	}
	var r struct {
		Alerts    json.RawMessage `json:"alerts" yaml:"alerts"`
		Dashboard json.RawMessage `json:"dashboard" yaml:"dashboard"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		return nil, nil, err
	}
	var rf ruleFile
	if err := strict(r.Alerts, &rf); err != nil {
		return nil, nil, fmt.Errorf("the mixin's prometheusAlerts: %w", err)
	}
	var buf bytes.Buffer
	enc := yaml3.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(rf); err != nil {
		return nil, nil, err
	}
	y := buf.Bytes()
	var d any
	if err := json.Unmarshal(r.Dashboard, &d); err != nil {
		return nil, nil, err
	}
	dash, err := json.MarshalIndent(d, "", "  ")
	if err != nil {
		return nil, nil, err
	}
	return append([]byte(alertsHeader), y...), append(dash, '\n'), nil
}
