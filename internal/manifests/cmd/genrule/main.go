// Command genrule writes deploy/kubernetes/prometheusrule.yaml from
// deploy/prometheus/alerts.yml; run it from the repository root
// ("make manifests").
package main

import (
	"fmt"
	"os"

	"github.com/neighwatch/neighwatch/internal/manifests"
)

func main() {
	in, err := os.ReadFile(manifests.AlertsFile)
	if err == nil {
		var out []byte
		if out, err = manifests.PrometheusRule(in); err == nil {
			err = os.WriteFile(manifests.RuleFile, out, 0o644)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "genrule:", err)
		os.Exit(1)
	}
}
