package e2e

import (
	"bufio"
	"errors"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/neighwatch/neighwatch/internal/dev/lab"
)

// buildDemo builds nwdemo for a test.
func buildDemo(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "nwdemo")
	if out, err := exec.Command("go", "build", "-o", bin, "../internal/dev/lab/cmd/nwdemo").CombinedOutput(); err != nil {
		t.Fatalf("build nwdemo: %v\n%s", err, out)
	}
	return bin
}

var demoNamespaces = regexp.MustCompile(`client (\S+) \(.*node (\S+), backend (\S+) \(`)

// namespacesGone checks that the namespaces the demo named are removed.
func namespacesGone(t *testing.T, out string) {
	t.Helper()
	m := demoNamespaces.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("the demo did not name its namespaces:\n%s", out)
	}
	list, err := exec.Command("ip", "netns", "list").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, ns := range m[1:] {
		if strings.Contains(string(list), ns) {
			t.Errorf("namespace %s is left behind", ns)
			_ = exec.Command("ip", "netns", "del", ns).Run()
		}
	}
}

// TestDemo runs make demo's program: it narrates traffic, the black
// hole, the stuck entry with the alert's series, and the repair, and
// leaves nothing behind.
func TestDemo(t *testing.T) {
	lab.Require(t)
	t.Parallel()
	out, err := exec.Command(buildDemo(t), "--neighwatch", binPath).CombinedOutput()
	s := string(out)
	t.Logf("demo output:\n%s", s)
	if err != nil {
		t.Fatalf("nwdemo: %v", err)
	}
	for _, want := range []string{"5 of 5 echo replies came back", "0 of 5 echo replies came back",
		`neighwatch_stuck_neighbour_info{family="inet",interface="n0",ip="10.0.1.2"`, "Traffic is back", "mode on"} {
		if !strings.Contains(s, want) {
			t.Errorf("the demo's output lacks %q", want)
		}
	}
	// The classes as neighwatch status printed them (the client's row),
	// not the narration around them: at-risk before the move, stuck
	// after it.
	atRisk, stuck, moved := -1, -1, strings.Index(s, "The client moves to a new MAC")
	at := 0
	for _, line := range strings.SplitAfter(s, "\n") {
		f := strings.Fields(line)
		if slices.Contains(f, "10.0.1.2") {
			switch {
			case slices.Contains(f, "at-risk") && atRisk < 0:
				atRisk = at
			case slices.Contains(f, "stuck") && stuck < 0:
				stuck = at
			}
		}
		at += len(line)
	}
	if atRisk < 0 || moved < 0 || atRisk > moved {
		t.Errorf("no status row of 10.0.1.2 at-risk before the move (row at %d, move at %d)", atRisk, moved)
	}
	if stuck < moved {
		t.Errorf("no status row of 10.0.1.2 stuck after the move (row at %d, move at %d)", stuck, moved)
	}
	if strings.LastIndex(s, "5 of 5 echo replies came back") < strings.Index(s, "Traffic is back") {
		t.Errorf("traffic is not shown flowing after the repair")
	}
	namespacesGone(t, s)
}

// TestDemoInterrupted: Ctrl-C in the middle removes everything too.
func TestDemoInterrupted(t *testing.T) {
	lab.Require(t)
	t.Parallel()
	cmd := exec.Command(buildDemo(t), "--neighwatch", binPath)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var b strings.Builder
	waiting := make(chan struct{})
	read := make(chan struct{}) // closed once stdout is read to its end
	go func() {
		defer close(read)
		sc := bufio.NewScanner(stdout)
		once := sync.Once{}
		for sc.Scan() {
			mu.Lock()
			b.WriteString(sc.Text() + "\n")
			mu.Unlock()
			// The demo waits at least --stale-threshold (5 s) after this
			// line, for the entry to stay STALE; after the move line it
			// may finish in a second (it did once, under a busy loop,
			// before the interrupt reached it: exit 0, no interruption).
			if strings.Contains(sc.Text(), "Waiting for the client's entry to stay STALE") {
				once.Do(func() { close(waiting) })
			}
		}
	}()
	select {
	case <-waiting:
	case <-time.After(lab.Patience(90 * time.Second)):
		_ = cmd.Process.Kill()
		t.Fatal("the demo never reached the wait for a STALE entry")
	}
	_ = cmd.Process.Signal(syscall.SIGINT)
	// Read the demo's last words before Wait, which closes the pipe:
	// its "interrupted" line was lost once under two busy loops.
	select {
	case <-read:
	case <-time.After(lab.Patience(60 * time.Second)):
		_ = cmd.Process.Kill()
		t.Error("the interrupted demo did not end, or something it started holds its output open")
	}
	err = cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 130 {
		t.Errorf("interrupted demo: %v, want exit 130", err)
	}
	mu.Lock()
	s := b.String()
	mu.Unlock()
	if !strings.Contains(s, "interrupted") {
		t.Errorf("no word of the interruption:\n%s", s)
	}
	namespacesGone(t, s)
	m := regexp.MustCompile(`--control.socket (\S+)`).FindStringSubmatch(s)
	if m == nil {
		t.Fatalf("the demo did not show the agent's command line:\n%s", s)
	}
	if out, _ := exec.Command("pgrep", "-f", regexp.QuoteMeta(m[1])).Output(); len(out) > 0 {
		t.Errorf("the demo's agent still runs: pid %s", out)
	}
}
