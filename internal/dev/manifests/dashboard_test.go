package manifests

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestDashboardUnits: a query of seconds is drawn in seconds, and a panel
// that mixes it with counts gives it a unit (and an axis) of its own; a
// count and a p50 in seconds on one axis of unit short read as the same
// thing.
func TestDashboardUnits(t *testing.T) {
	var d struct {
		Panels []struct {
			ID          int    `json:"id"`
			Title       string `json:"title"`
			FieldConfig struct {
				Defaults struct {
					Unit string `json:"unit"`
				} `json:"defaults"`
				Overrides []struct {
					Matcher struct {
						ID      string `json:"id"`
						Options string `json:"options"`
					} `json:"matcher"`
					Properties []struct {
						ID    string `json:"id"`
						Value any    `json:"value"`
					} `json:"properties"`
				} `json:"overrides"`
			} `json:"fieldConfig"`
			Targets []struct {
				Expr  string `json:"expr"`
				RefID string `json:"refId"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(read(t, "deploy/grafana/neighwatch.json"), &d); err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			unit := p.FieldConfig.Defaults.Unit
			for _, o := range p.FieldConfig.Overrides {
				if o.Matcher.ID == "byFrameRefID" && o.Matcher.Options == tg.RefID {
					for _, pr := range o.Properties {
						if pr.ID == "unit" {
							unit, _ = pr.Value.(string)
						}
					}
				}
			}
			// A quantile or an age of a _seconds metric is seconds; a
			// rate or increase of one is not.
			seconds := strings.Contains(tg.Expr, "_seconds") && !strings.Contains(tg.Expr, "increase(") &&
				(strings.Contains(tg.Expr, "histogram_quantile") || !strings.Contains(tg.Expr, "rate("))
			if !seconds {
				continue
			}
			checked++
			if unit != "s" {
				t.Errorf("panel %d %q: query %s is seconds, drawn in unit %q", p.ID, p.Title, tg.RefID, unit)
			}
		}
	}
	if checked == 0 {
		t.Fatal("no query of seconds found: the test reads nothing")
	}
}
