package remediate

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/neighwatch/neighwatch/internal/dev/lab"
	"github.com/neighwatch/neighwatch/table"
)

func manageConfig(max int) Config {
	cfg := fastConfig(ModeOn, StrategyManage, StrategyProbe)
	cfg.Scope = ScopeAllStale
	cfg.Manage = ManageConfig{Supported: true, Max: max, FailedTimeout: time.Hour, Interval: 10 * time.Millisecond}
	return cfg
}

func owners(tb *table.Table) map[table.Owner]int {
	entries, _ := tb.Snapshot()
	out := map[table.Owner]int{}
	for _, e := range entries {
		out[e.Owner()]++
	}
	return out
}

// TestManageFirstAndCapped: manage comes first; past the cap the next
// strategy acts and the refusal is counted.
func TestManageFirstAndCapped(t *testing.T) {
	tb := staleTable(3)
	fa := &fakeActor{t: tb, answerAt: -1}
	e := New(manageConfig(2), tb, fa, nil)
	stop := runEngine(t, e)
	defer stop()
	// The refusal is counted before the next strategy acts: wait for its
	// probe too (under qemu-aarch64 a read fell between them).
	probed := func() bool {
		return slices.ContainsFunc(fa.Calls(), func(c string) bool { return len(c) > 5 && c[:5] == "probe" })
	}
	lab.WaitFor(t, 5*time.Second, "two managed entries, a refusal, and the refused entry probed", func() bool {
		st := e.Stats()
		return st.Actions[StrategyManage][OutcomeManaged] == 2 && st.Counts[ManageRefused] > 0 && probed()
	})
	if n := owners(tb)[table.OwnerNeighwatch]; n != 2 {
		t.Fatalf("%d entries managed by neighwatch, want 2 (the cap)", n)
	}
	if e.managed.Len() != 2 {
		t.Errorf("Managed() = %d", e.managed.Len())
	}
}

// TestManageDefaultOrder: manage leads the default order only where the
// kernel supports it, after swap only where the datapath can swap; each
// strategy ranks itself (rank), so the order is checked whole.
func TestManageDefaultOrder(t *testing.T) {
	if got := DefaultStrategies(true, false); got[0] != StrategyManage {
		t.Errorf("supported: %v", got)
	}
	if got := DefaultStrategies(false, false); slices.Contains(got, StrategyManage) {
		t.Errorf("unsupported: %v", got)
	}
	if got := DefaultStrategies(true, true); got[0] != StrategySwap || got[1] != StrategyManage {
		t.Errorf("supported, with swap: %v, want swap then manage first", got)
	}
	cfg := manageConfig(1)
	cfg.Manage.Supported = false
	tb := staleTable(1)
	fa := &fakeActor{t: tb, answerAt: -1}
	e := New(cfg, tb, fa, nil)
	stop := runEngine(t, e)
	defer stop()
	lab.WaitFor(t, 5*time.Second, "a probe", func() bool { return len(fa.Calls()) > 0 })
	if slices.ContainsFunc(fa.Calls(), func(c string) bool { return c[:6] == "manage" }) {
		t.Errorf("managed on a kernel without support: %v", fa.Calls())
	}
}

// TestManageReleases: idle entries, failed ones past the timeout, and
// everything on remediation off are released, each counted by reason.
func TestManageReleases(t *testing.T) {
	for _, reason := range []ReleaseReason{ReleaseIdle, ReleaseFailed, ReleaseOff} {
		t.Run(string(reason), func(t *testing.T) {
			tb := staleTable(1)
			fa := &fakeActor{t: tb, answerAt: -1}
			cfg := manageConfig(10)
			cfg.Manage.ReleaseOnExit = true
			if reason == ReleaseIdle {
				cfg.Manage.Idle = 200 * time.Millisecond
			}
			if reason == ReleaseFailed {
				cfg.Manage.FailedTimeout = 200 * time.Millisecond
			}
			e := New(cfg, tb, fa, nil)
			stop := runEngine(t, e)
			defer stop()
			lab.WaitFor(t, 5*time.Second, "a managed entry", func() bool { return e.managed.Len() == 1 })
			// Do not manage it again once released.
			e.SetMode(ModeDryRun)
			k := table.Key{Ifindex: 3, Addr: netip.MustParseAddr("10.0.0.0")}
			switch reason {
			case ReleaseFailed:
				cur, _ := tb.Lookup(k)
				tb.Apply(table.CauseNetlink, table.Update{Ifindex: 3, Family: table.FamilyInet, Addr: k.Addr, State: table.StateFailed,
					FlagsExt: cur.FlagsExt, Protocol: cur.Protocol})
			case ReleaseOff:
				e.SetMode(ModeOff)
			}
			lab.WaitFor(t, 5*time.Second, "a release for "+string(reason), func() bool { return e.Stats().Releases[reason] == 1 })
			if n := owners(tb)[table.OwnerNeighwatch]; n != 0 {
				t.Errorf("%d entries still managed after the release", n)
			}
		})
	}
}

// TestManageAdoptsOnlyItsOwn: at start the engine takes over the entries
// marked with its protocol, never those another owner made managed, and
// a clean shutdown releases only its own.
func TestManageAdoptsOnlyItsOwn(t *testing.T) {
	tb := table.New(time.Hour, nil) // nothing stale-long: no candidates
	tb.SetLinkName(3, "eth0")
	mine := netip.MustParseAddr("10.0.0.1")
	theirs := netip.MustParseAddr("10.0.0.2")
	tb.Apply(table.CauseNetlink, table.Update{Ifindex: 3, Family: table.FamilyInet, Addr: mine, State: table.StateReachable, LLAddr: macOld,
		FlagsExt: table.FlagExtManaged, Protocol: table.ProtocolNeighwatch})
	tb.Apply(table.CauseNetlink, table.Update{Ifindex: 3, Family: table.FamilyInet, Addr: theirs, State: table.StateReachable, LLAddr: macOld,
		FlagsExt: table.FlagExtManaged, Flags: table.FlagExtLearned, Protocol: 99})
	fa := &fakeActor{t: tb, answerAt: -1}
	cfg := manageConfig(10)
	cfg.Manage.ReleaseOnExit = true
	e := New(cfg, tb, fa, nil)
	stop := runEngine(t, e)
	lab.WaitFor(t, 5*time.Second, "the adoption", func() bool { return e.managed.Len() == 1 })
	stop()
	if got := fa.Calls(); len(got) != 1 || got[0] != "release 10.0.0.1" {
		t.Fatalf("calls = %v, want only the release of its own entry", got)
	}
	if cur, _ := tb.Lookup(table.Key{Ifindex: 3, Addr: theirs}); cur.Owner() != table.OwnerOther {
		t.Errorf("the other owner's entry changed: %+v", cur)
	}
}

// TestManageNotForStuck: an entry with evidence that its host moved is
// probed, not managed: the probe finds the host in one round trip.
func TestManageNotForStuck(t *testing.T) {
	tb := stuckTable(1)
	fa := &fakeActor{t: tb, answerAt: 1, moveTo: macNew}
	cfg := manageConfig(10)
	cfg.Scope = ScopeStuck
	e := New(cfg, tb, fa, nil)
	stop := runEngine(t, e)
	defer stop()
	lab.WaitFor(t, 5*time.Second, "a moved outcome", func() bool { return e.Stats().Actions[StrategyProbe][OutcomeMoved] == 1 })
	if slices.ContainsFunc(fa.Calls(), func(c string) bool { return c[:6] == "manage" }) {
		t.Errorf("a stuck entry was managed: %v", fa.Calls())
	}
}

// TestManagedMoveConfirmedAtOldMAC: a managed host moved and its own
// packets came from the new MAC; only the new MAC answers the broadcast
// probe, while the kernel confirms the entry at the old one (a DELAY
// entry confirmed shortly before the move turns REACHABLE without a
// probe). That is a move to repoint, not a spoofer: the old rule judged
// REACHABLE at the old MAC a conflict and left the entry where it was.
func TestManagedMoveConfirmedAtOldMAC(t *testing.T) {
	tb := table.New(time.Nanosecond, nil)
	tb.SetLinkName(3, "eth0")
	ip := netip.MustParseAddr("10.0.0.7")
	k := table.Key{Ifindex: 3, Addr: ip}
	tb.Apply(table.CauseNetlink, table.Update{Ifindex: 3, Family: table.FamilyInet, Addr: ip, State: table.StateStale, LLAddr: macOld,
		FlagsExt: table.FlagExtManaged, Protocol: table.ProtocolNeighwatch})
	tb.ObserveSourceMAC(k, macNew, 3, time.Now())
	fa := &fakeActor{t: tb, answerAt: 1, moveTo: macNew, confirmOld: true}
	cfg := manageConfig(10)
	cfg.VerifyTimeout = 10 * time.Second // the wait for the repoint to show, not an expectation
	e := New(cfg, tb, fa, nil)
	stop := runEngine(t, e)
	defer stop()
	lab.WaitFor(t, 5*time.Second, "the probe's outcome", func() bool {
		st := e.Stats().Actions[StrategyProbe]
		return st[OutcomeMoved]+st[OutcomeConflict] > 0
	})
	if n := e.Stats().Actions[StrategyProbe][OutcomeConflict]; n != 0 {
		t.Errorf("%d conflicts: the old MAC never answered; calls %v", n, fa.Calls())
	}
	if !slices.Contains(fa.Calls(), "repoint 10.0.0.7 "+macNew.String()) {
		t.Errorf("not repointed to the MAC that answered: %v", fa.Calls())
	}
	lab.WaitFor(t, 5*time.Second, "the entry at the new MAC", func() bool {
		en, _ := tb.Lookup(k)
		return en.LLAddr == string(macNew)
	})
}

// TestPreventionNeedsAManagingKernel: a policy prevents only when a
// preventing strategy is listed and can act; manage listed on a kernel
// without managed neighbours prevents nothing, and the detection names
// the missing feature.
func TestPreventionNeedsAManagingKernel(t *testing.T) {
	for _, tc := range []struct {
		name      string
		supported bool
		list      []Strategy
		want      bool
		features  string
	}{
		{"manage on a 5.16 kernel", true, []Strategy{StrategyManage, StrategyProbe}, true, "managed:true"},
		{"manage on an older kernel", false, []Strategy{StrategyManage, StrategyProbe}, false, "managed:false"},
		{"no manage", true, []Strategy{StrategyProbe, StrategyFlush}, false, ""},
	} {
		cfg := manageConfig(1)
		cfg.Strategies, cfg.Manage.Supported = tc.list, tc.supported
		if got := prevents(&cfg); got != tc.want {
			t.Errorf("%s: prevents %v, want %v", tc.name, got, tc.want)
		}
		var fs []string
		for _, f := range Features(cfg) {
			fs = append(fs, fmt.Sprintf("%s:%v", f.Name, f.OK))
		}
		if got := strings.Join(fs, ","); got != tc.features {
			t.Errorf("%s: features %q, want %q", tc.name, got, tc.features)
		}
		cfg.Mode = ModeOff
		if fs := Features(cfg); len(fs) != 0 {
			t.Errorf("%s, remediation off: features %v, want none", tc.name, fs)
		}
	}
}
