package remediate

import (
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/neighwatch/neighwatch/internal/dev/lab"
	"github.com/neighwatch/neighwatch/table"
)

// The tests in this file pin remediation's rules at their edges: each
// kills a mutant that the scenario tests let live (make mutation,
// docs/mutants.md).

// TestDefaultsMatchREADME: the engine's defaults are the ones the README's
// flag table promises.
func TestDefaultsMatchREADME(t *testing.T) {
	doc, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	// The default column of a flag's row.
	def := func(flag string) string {
		for _, l := range strings.Split(string(doc), "\n") {
			if strings.HasPrefix(l, "| `"+flag+"` |") {
				return strings.Trim(strings.TrimSpace(strings.Split(l, "|")[2]), "`")
			}
		}
		t.Fatalf("README has no row for %s", flag)
		return ""
	}
	d := Defaults()
	for flag, got := range map[string]any{
		"--remediation.rate": d.Rate, "--remediation.interface-rate": d.PerInterfaceRate, "--remediation.concurrency": d.MaxConcurrent,
		"--remediation.queue": d.QueueSize, "--remediation.verify-timeout": d.VerifyTimeout, "--remediation.kernel-timeout": d.KernelTimeout,
		"--manage.max": d.Manage.Max, "--manage.idle": d.Manage.Idle, "--manage.failed-timeout": d.Manage.FailedTimeout,
		"--manage.release-on-exit": d.Manage.ReleaseOnExit,
	} {
		want := def(flag)
		var same bool
		switch g := got.(type) {
		case float64:
			w, err := strconv.ParseFloat(want, 64)
			same = err == nil && w == g
		case int:
			w, err := strconv.Atoi(strings.ReplaceAll(want, ",", ""))
			same = err == nil && w == g
		case time.Duration:
			w, err := time.ParseDuration(want)
			same = err == nil && w == g
		case bool:
			same = strconv.FormatBool(g) == want
		}
		if !same {
			t.Errorf("%s: Defaults() has %v, the README %q", flag, got, want)
		}
	}
	// The ones the README does not list: burst one action, a probe gap
	// and a sweep under the verify timeout, back-off from 30 s to 10 m.
	if d.Burst != 1 || d.ProbeGap != 300*time.Millisecond || d.SweepInterval != time.Second || d.BackoffMin != 30*time.Second ||
		d.BackoffMax != 10*time.Minute || d.Manage.Interval != time.Second {
		t.Errorf("Defaults() = %+v", d)
	}
}

// TestConfirmationListensAThirdEach: a confirmation's probes each listen
// a third of the verify timeout, so the three fit in it.
func TestConfirmationListensAThirdEach(t *testing.T) {
	tb := suspectTable(1)
	fa := &fakeActor{t: tb, answerAt: -1}
	cfg := fastConfig(ModeDryRun, StrategyProbe)
	cfg.VerifyTimeout = 300 * time.Millisecond
	e := New(cfg, tb, fa, nil)
	stop := runEngine(t, e)
	lab.WaitFor(t, 5*time.Second, "an unanswered confirmation", func() bool { return e.Stats().Confirmations[ConfirmUnanswered] == 1 })
	stop()
	fa.mu.Lock()
	defer fa.mu.Unlock()
	if len(fa.listens) != ConfirmProbes {
		t.Fatalf("%d probes, want %d", len(fa.listens), ConfirmProbes)
	}
	for _, l := range fa.listens {
		if l != 100*time.Millisecond {
			t.Errorf("a probe listened %v, want a third of 300 ms", l)
		}
	}
}

// youngSuspect is a table with one STALE entry younger than the
// threshold whose host was seen at another MAC: an unanswered
// confirmation leaves it a suspect, not stuck.
func youngSuspect(t *testing.T) (*table.Table, table.Key) {
	tb := table.New(time.Hour, nil)
	tb.SetLinkName(3, "eth0")
	k := table.Key{Ifindex: 3, Addr: netip.MustParseAddr("10.0.0.1")}
	tb.Apply(table.CauseNetlink, table.Update{Ifindex: 3, Family: table.FamilyInet, Addr: k.Addr, State: table.StateStale, LLAddr: macOld})
	tb.ObserveSourceMAC(k, macNew, 1, time.Now())
	return tb, k
}

// TestOneConfirmationPerSuspicion: a suspect that stays one after its
// confirmation (young, so not stuck) is not confirmed again, sweep after
// sweep.
func TestOneConfirmationPerSuspicion(t *testing.T) {
	tb, k := youngSuspect(t)
	fa := &fakeActor{t: tb, answerAt: -1}
	e := New(fastConfig(ModeDryRun, StrategyProbe), tb, fa, nil)
	stop := runEngine(t, e)
	defer stop()
	lab.WaitFor(t, 5*time.Second, "the confirmation", func() bool { return e.Stats().Confirmations[ConfirmUnanswered] == 1 })
	time.Sleep(200 * time.Millisecond) // about 20 sweeps
	if en, _ := tb.Lookup(k); !en.Suspect() || en.Class() == table.ClassStuck {
		t.Fatalf("the entry is no longer a young suspect: %v", en.Class())
	}
	if n := e.Stats().Confirmations[ConfirmUnanswered]; n != 1 {
		t.Errorf("%d confirmations of one suspicion, want 1", n)
	}
}

// TestConfirmationAgainForANewSuspicion: once a confirmation is done, a
// new suspicion of the same entry gets its own.
func TestConfirmationAgainForANewSuspicion(t *testing.T) {
	tb, k := youngSuspect(t)
	fa := &fakeActor{t: tb, answerAt: -1, spoofer: macOld, unicastOnly: true} // the entry's MAC answers
	e := New(fastConfig(ModeDryRun, StrategyProbe), tb, fa, nil)
	stop := runEngine(t, e)
	defer stop()
	lab.WaitFor(t, 5*time.Second, "the first confirmation", func() bool { return e.Stats().Confirmations[ConfirmAnswered] == 1 })
	// The kernel lets the answered entry go STALE again; the host is then
	// seen at a third MAC.
	lab.WaitFor(t, 5*time.Second, "the answer applied", func() bool { en, _ := tb.Lookup(k); return en.State == table.StateReachable })
	tb.Apply(table.CauseNetlink, table.Update{Ifindex: 3, Family: table.FamilyInet, Addr: k.Addr, State: table.StateStale, LLAddr: macOld})
	tb.ObserveSourceMAC(k, net.HardwareAddr{2, 0, 0, 0, 0, 0xcc}, 1, time.Now().Add(time.Hour)) // past the recheck
	lab.WaitFor(t, 5*time.Second, "the second confirmation", func() bool { return e.Stats().Confirmations[ConfirmAnswered] == 2 })
}
