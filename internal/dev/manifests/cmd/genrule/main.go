// Command genrule renders the monitoring mixin (deploy/mixin/) at its defaults
// into deploy/prometheus/alerts.yml, writes
// deploy/kubernetes/prometheusrule.yaml from it, the chart's rules and
// dashboard (the mixin with every setting a slot the chart fills), and
// the copies of the rules and the dashboard the chart and the mixin
// carry; run it from the repository root ("make manifests").
package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/neighwatch/neighwatch/internal/dev/manifests"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "genrule:", err)
		os.Exit(1)
	}
}

func run() error {
	dash, err := os.ReadFile(manifests.DashboardFile)
	if err != nil {
		return err
	}
	if err := os.WriteFile(manifests.MixinDashboard, dash, 0o644); err != nil {
		return err
	}
	// The mixin's files at its defaults, as the README's jsonnet command
	// writes them: the dashboard in jsonnet's layout, so the edited
	// dashboard comes back as its render, byte for byte.
	in, dash, err := manifests.RenderMixin(".", "")
	if err != nil {
		return err
	}
	if err := os.WriteFile(manifests.AlertsFile, in, 0o644); err != nil {
		return err
	}
	for _, f := range []string{manifests.DashboardFile, manifests.MixinDashboard} {
		if err := os.WriteFile(f, dash, 0o644); err != nil {
			return err
		}
	}
	version, err := manifests.Version(".")
	if err != nil {
		return err
	}
	out, err := manifests.PrometheusRule(in, version)
	if err != nil {
		return err
	}
	if err := os.WriteFile(manifests.RuleFile, out, 0o644); err != nil {
		return err
	}
	rules, dashboard, err := manifests.RenderChartMixin(".")
	if err != nil {
		return err
	}
	if err := os.WriteFile(manifests.ChartRules, rules, 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(manifests.ChartDashboard, dashboard, 0o644); err != nil {
		return err
	}
	for dst, src := range manifests.ChartCopies {
		b, err := os.ReadFile(src)
		if err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(dst, b, 0o644); err != nil {
			return err
		}
	}
	return nil
}
