// Command genrule renders the monitoring mixin (deploy/mixin/) at its defaults
// into deploy/prometheus/alerts.yml, writes
// deploy/kubernetes/prometheusrule.yaml from it, and the copies of the
// rules and the dashboard the chart and the mixin carry; run it from the
// repository root ("make manifests").
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
	in, _, err := manifests.RenderMixin(".", "")
	if err != nil {
		return err
	}
	if err := os.WriteFile(manifests.AlertsFile, in, 0o644); err != nil {
		return err
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
