package e2e

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/neighwatch/neighwatch/internal/dev/lab"
)

// TestTracerMapsFollowTheTable: on a node whose gc_thresh3 allows
// 100,000 entries a family, an agent on a small table loads the tracer's
// maps at their smallest (16,384 slots: the kernel sets aside a bucket
// for every slot, used or not), not for what gc_thresh3 allows
// (262,144). When the table grows past four fifths of the slots, the
// agent loads the tracer again with larger maps, and every entry is
// mirrored.
func TestTracerMapsFollowTheTable(t *testing.T) {
	lab.Require(t)
	lab.RaiseGCThresh(t, 100000) // also above gc_thresh1: the STALE entries below stay
	l := lab.New(t, "tmg")
	a := startAgent(t, l.Node, sockPath(t), "--tracer.interval", "1s")
	capacity := func() int {
		v, _ := strconv.Atoi(metricValue(a.metrics(t), `neighwatch_tracer_map_capacity{map="mirror"}`))
		return v
	}
	if c := capacity(); c != 16384 {
		t.Fatalf("mirror capacity %d on a table of a few entries, want 16384 (not sized for gc_thresh3)", c)
	}
	const n = 14000 // 17,500 with a quarter to spare: more than 16,384
	lines := make([]string, n)
	for i := range lines {
		lines[i] = fmt.Sprintf("neigh add %s lladdr %s dev %s nud stale", lab.HostIP(60, i), lab.HostMAC(i, 9), lab.NodeClientIf)
	}
	if err := l.Node.Batch(lines); err != nil {
		t.Fatal(err)
	}
	lab.WaitFor(t, 2*time.Minute, "the tracer loaded again with larger maps", func() bool { return capacity() == 32768 })
	a.waitPart(t, "tracer")
	lab.WaitFor(t, 2*time.Minute, "every STALE entry counted by the tracer", func() bool {
		v, _ := strconv.Atoi(metricValue(a.metrics(t), "neighwatch_tracer_stale_counted"))
		return v >= n
	})
	body := a.metrics(t)
	for _, l := range strings.Split(body, "\n") {
		if strings.HasPrefix(l, "neighwatch_tracer_unmirrored_entries{") && !strings.HasSuffix(l, " 0") {
			t.Errorf("%s: an entry did not fit", l)
		}
	}
	if v := metricValue(body, `neighwatch_tracer_dropped_total{kind="mirror"}`); v != "0" {
		t.Errorf("mirror updates lost: %q", v)
	}
	if !strings.Contains(a.logs(), "the table outgrew the tracer's maps") {
		t.Errorf("no log line says why the tracer was loaded again")
	}
}
