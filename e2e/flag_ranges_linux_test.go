package e2e

import (
	"bytes"
	"os/exec"
	"strings"
	"testing"
)

// TestFlagRanges: every numeric flag refuses values outside its documented
// range (negative, zero where it means nothing, too large, NaN and Inf)
// with one line naming the flag and exit 2, before the agent starts
// anything.
func TestFlagRanges(t *testing.T) {
	t.Parallel()
	bad := map[string][]string{
		"stale-threshold":            {"-5s", "0", "500ms", "25h"},
		"metrics.stuck-info-limit":   {"-1", "10001"},
		"web.max-connections":        {"0", "-3", "70000"},
		"web.max-connections-per-ip": {"0", "70000"},
		"netlink.receive-buffer":     {"0", "1000", "99999999999", "-1"},
		"netlink.resync-interval":    {"-1s", "1s", "25h"},
		"arp.conflict-window":        {"-1s", "0", "2h"},
		"tracer.interval":            {"0", "-1s", "10ms", "2m"},
		"tracer.window":              {"0", "-1s", "2h"},
		"tracer.period":              {"0", "500ms", "25h"},
		"remediation.rate":           {"0", "-1", "NaN", "Inf", "-Inf", "10001"},
		"remediation.interface-rate": {"0", "NaN", "+Inf", "1e9"},
		"remediation.concurrency":    {"0", "-1", "100000000", "257"},
		"remediation.queue":          {"0", "2000000000", "1000001"},
		"remediation.verify-timeout": {"0", "-1s", "10m"},
		"remediation.kernel-timeout": {"0", "-1s", "500ms", "11m"},
	}
	for flag, values := range bad {
		for _, v := range values {
			cmd := exec.Command(binPath, "agent", "--"+flag, v, "--control.socket", "", "--metrics.listen", "127.0.0.1:0")
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			err := cmd.Run()
			code := 0
			if ee, ok := err.(*exec.ExitError); ok {
				code = ee.ExitCode()
			}
			msg := strings.TrimSpace(stderr.String())
			if code != 2 || !strings.Contains(msg, "--"+flag) || strings.Count(msg, "\n") > 0 {
				t.Errorf("--%s %s: exit %d, stderr %q; want exit 2 and one line naming the flag", flag, v, code, msg)
			}
		}
	}
}
