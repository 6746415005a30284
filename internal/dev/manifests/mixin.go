package manifests

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"

	"github.com/google/go-jsonnet"
)

// MixinDir holds the monitoring mixin (jsonnet), the source of the alert
// rules; MixinDashboard is its copy of the dashboard, kept by make
// manifests.
const (
	MixinDir       = "deploy/mixin"
	MixinDashboard = MixinDir + "/dashboards/neighwatch.json"
)

// A ruleFile is a Prometheus rule file, its fields in the order people
// write them.
type ruleFile struct {
	Groups []struct {
		Name  string `json:"name" yaml:"name"`
		Rules []struct {
			Alert         string            `json:"alert" yaml:"alert"`
			Expr          string            `json:"expr" yaml:"expr"`
			For           string            `json:"for,omitempty" yaml:"for,omitempty"`
			KeepFiringFor string            `json:"keep_firing_for,omitempty" yaml:"keep_firing_for,omitempty"`
			Labels        map[string]string `json:"labels,omitempty" yaml:"labels,omitempty"`
			Annotations   struct {
				RunbookURL  string `json:"runbook_url" yaml:"runbook_url"`
				Summary     string `json:"summary" yaml:"summary"`
				Description string `json:"description" yaml:"description"`
			} `json:"annotations" yaml:"annotations"`
		} `json:"rules" yaml:"rules"`
	} `json:"groups" yaml:"groups"`
}

// RenderMixin evaluates the mixin under root with config (jsonnet merged
// into _config, "" for the defaults) through its render.libsonnet, as
// "jsonnet -S -m" does (docs/deploying.md, Alerts): the rule file in YAML and the
// dashboard in JSON, each the text jsonnet writes. The rule file must
// decode strictly as one.
func RenderMixin(root, config string) (rules, dashboard []byte, err error) {
	rules, _, dashboard, err = renderMixin(root, config)
	return rules, dashboard, err
}

// renderMixin is RenderMixin, with the rule file decoded.
func renderMixin(root, config string) (rules []byte, rf ruleFile, dashboard []byte, err error) {
	vm := jsonnet.MakeVM()
	vm.Importer(&jsonnet.FileImporter{JPaths: []string{filepath.Join(root, MixinDir)}})
	if config == "" {
		config = "{}"
	}
	src := fmt.Sprintf("(import 'render.libsonnet')((import 'mixin.libsonnet') + { _config+:: %s })", config)
	files, err := vm.EvaluateAnonymousSnippetMulti("render.jsonnet", src)
	if err != nil {
		return nil, rf, nil, err
	}
	text := func(name string) ([]byte, error) {
		var s string
		if err := json.Unmarshal([]byte(files[name]), &s); err != nil {
			return nil, fmt.Errorf("the mixin's %s: %w", name, err)
		}
		// jsonnet -S -m ends each file with a line break.
		return []byte(s + "\n"), nil
	}
	if rules, err = text("alerts.yml"); err != nil {
		return nil, rf, nil, err
	}
	if dashboard, err = text("neighwatch.json"); err != nil {
		return nil, rf, nil, err
	}
	if err := strict(rules, &rf); err != nil {
		return nil, rf, nil, fmt.Errorf("the mixin's prometheusAlerts: %w", err)
	}
	return rules, rf, dashboard, nil
}

// ChartRules and ChartDashboard are the mixin rendered for the chart:
// every setting of _config is a slot ("@@jobSelector@@",
// "@@alerts.NeighbourEntryStuck.for@@") that the chart fills from its
// values (templates/prometheusrule.yaml, dashboards.yaml), in JSON, where
// a slot always stands inside a string. make manifests writes them.
const (
	ChartRules     = ChartDir + "/files/rules.json"
	ChartDashboard = ChartDir + "/files/dashboards/neighwatch.json"
)

// MixinDefaults returns the mixin's _config at its defaults.
func MixinDefaults(root string) (map[string]any, error) {
	vm := jsonnet.MakeVM()
	vm.Importer(&jsonnet.FileImporter{JPaths: []string{filepath.Join(root, MixinDir)}})
	out, err := vm.EvaluateAnonymousSnippet("defaults.jsonnet", "(import 'mixin.libsonnet')._config")
	if err != nil {
		return nil, err
	}
	var c map[string]any
	return c, json.Unmarshal([]byte(out), &c)
}

// slot names a setting in the chart's renders.
func slot(name string) string { return "@@" + name + "@@" }

// SlotConfig is the _config whose every setting is its slot: each
// scalar, the percentage the alerts derive from tableNearThreshold, and
// each alert's for and severity.
func SlotConfig(defaults map[string]any) (string, error) {
	c := map[string]any{"tableNearThresholdPercent": slot("tableNearThresholdPercent")}
	for k, v := range defaults {
		switch v := v.(type) {
		case string:
			c[k] = slot(k)
		case map[string]any:
			if k != "alerts" {
				return "", fmt.Errorf("_config.%s: a map the chart has no slots for", k)
			}
			alerts := map[string]any{}
			for name := range v {
				alerts[name] = map[string]string{"for": slot("alerts." + name + ".for"), "severity": slot("alerts." + name + ".severity")}
			}
			c[k] = alerts
		default:
			return "", fmt.Errorf("_config.%s: a %T the chart has no slot for", k, v)
		}
	}
	b, err := json.Marshal(c)
	return string(b), err
}

// RenderChartMixin renders the mixin with every setting a slot: the
// chart's rules (JSON, as the rule file's fields) and dashboard.
func RenderChartMixin(root string) (rules, dashboard []byte, err error) {
	defaults, err := MixinDefaults(root)
	if err != nil {
		return nil, nil, err
	}
	config, err := SlotConfig(defaults)
	if err != nil {
		return nil, nil, err
	}
	_, rf, dash, err := renderMixin(root, config)
	if err != nil {
		return nil, nil, err
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(rf); err != nil {
		return nil, nil, err
	}
	return buf.Bytes(), dash, nil
}
