package agent

import (
	"flag"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/neighwatch/neighwatch/internal/options"
)

// TestEveryOptionRange holds every numeric option to the range the option
// table declares (and the README and the chart show), as the agent reads
// its configuration: each end is taken, a value a step past either end is
// refused with the line that names the flag and its range, and 0 is
// taken only where it turns the option off. TestOptionRanges tries a few
// values by hand and TestFlagRanges (e2e) runs the
// binary on a few of these; this one runs every option, ends included.
func TestEveryOptionRange(t *testing.T) {
	_, table := declare(flag.NewFlagSet("agent", flag.ContinueOnError))
	tried := 0
	for _, o := range table.Options() {
		var fmtv func(float64) string
		var step func(v, dir float64) float64
		switch o.Kind {
		case options.KindDuration:
			fmtv = func(s float64) string { return time.Duration(math.Round(s * 1e9)).String() }
			step = func(v, dir float64) float64 { return v + dir*1e-9 }
		case options.KindInt:
			fmtv = func(v float64) string { return strconv.FormatInt(int64(v), 10) }
			step = func(v, dir float64) float64 { return v + dir }
		case options.KindFloat:
			fmtv = func(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
			step = func(v, dir float64) float64 { return math.Nextafter(v, dir*math.Inf(1)) }
		default:
			continue
		}
		if o.Lo > o.Hi {
			t.Errorf("--%s: range %v to %v is empty", o.Name, o.Lo, o.Hi)
			continue
		}
		tried++
		// The period must be no shorter than the window: its low end is
		// tried with the window at its own.
		var with []string
		if o.Name == "tracer.period" {
			w := table.Lookup("tracer.window")
			with = []string{"--tracer.window", fmtv(w.Lo)}
		}
		refusal := func(v string) string {
			err := CheckConfig(append([]string{"--" + o.Name, v}, with...))
			if err == nil {
				return ""
			}
			return err.Error()
		}
		outOfRange := "--" + o.Name + " "
		for _, v := range []float64{o.Lo, o.Hi} {
			if msg := refusal(fmtv(v)); strings.HasPrefix(msg, outOfRange) && strings.Contains(msg, "out of range") {
				t.Errorf("--%s %s, an end of its range %s, refused: %s", o.Name, fmtv(v), o.Range, msg)
			}
		}
		for _, v := range []float64{step(o.Lo, -1), step(o.Hi, 1)} {
			if v == 0 && o.ZeroOff {
				continue
			}
			msg := refusal(fmtv(v))
			// Refused by its range, or (the period below its window's
			// least) by the rule that binds it to another flag.
			named := strings.HasPrefix(msg, "--"+o.Name+" ") && !strings.Contains(msg, "\n")
			if !named || (strings.Contains(msg, "out of range") && !strings.Contains(msg, "out of range: want "+o.Range) && !strings.Contains(msg, "out of range: want a number from "+o.Range)) {
				t.Errorf("--%s %s, past its range %s: %q, want refused naming the flag and its range", o.Name, fmtv(v), o.Range, msg)
			}
		}
		if o.Lo > 0 {
			msg := refusal(fmtv(0))
			if o.ZeroOff && strings.Contains(msg, "out of range") {
				t.Errorf("--%s 0, which turns it off: refused: %s", o.Name, msg)
			}
			if !o.ZeroOff && !strings.HasPrefix(msg, "--"+o.Name+" ") {
				t.Errorf("--%s 0: %q, want refused (0 is not in %s)", o.Name, msg, o.Range)
			}
		}
	}
	if tried < 10 {
		t.Fatalf("only %d numeric options tried: the table was not read", tried)
	}
}
