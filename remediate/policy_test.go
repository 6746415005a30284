package remediate

import (
	"net"
	"net/netip"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/neighwatch/neighwatch/table"
)

var (
	macOld = net.HardwareAddr{2, 0, 0, 0, 0, 1}
	macNew = net.HardwareAddr{2, 0, 0, 0, 0, 2}
)

// entry builds a classified entry through a real table (pure logic) with a
// threshold of 1ns: any STALE entry is stale-long at once.
type entrySpec struct {
	ip       string
	state    table.State
	flags    uint8
	flagsExt uint32
	suspect  bool   // ARP saw the IP at another MAC
	moved    bool   // and a probe to the entry's MAC went unanswered
	conflict bool   // two MACs answered for the IP, the entry's one of them
	bypass   uint64 // tracer hits
	noLL     bool
	proto    uint8 // NDA_PROTOCOL
}

func entry(t *testing.T, s entrySpec) table.Entry {
	t.Helper()
	tb := table.New(time.Nanosecond, nil)
	ip := netip.MustParseAddr(s.ip)
	u := table.Update{Ifindex: 3, Family: table.FamilyOf(ip), Addr: ip, State: s.state, Flags: s.flags, FlagsExt: s.flagsExt, LLAddr: macOld, Protocol: s.proto}
	if s.noLL {
		u.LLAddr = nil
	}
	tb.Apply(table.CauseNetlink, u)
	time.Sleep(time.Millisecond)
	k := table.Key{Ifindex: 3, Addr: ip}
	if s.suspect || s.moved {
		tb.ObserveMAC(3, ip, macNew, time.Now())
	}
	if s.moved {
		tb.ProbeUnanswered(k, string(macOld), time.Now())
	}
	if s.conflict {
		tb.ObserveConflict(k, macOld, macNew, time.Now())
	}
	tb.AddBypass(k, s.bypass, time.Now())
	e, ok := tb.Lookup(k)
	if !ok {
		t.Fatal("entry missing")
	}
	return e
}

func TestDecide(t *testing.T) {
	only := func(res ...string) []*regexp.Regexp {
		var out []*regexp.Regexp
		for _, r := range res {
			out = append(out, regexp.MustCompile(r))
		}
		return out
	}
	tests := []struct {
		name    string
		e       entrySpec
		ifname  string
		mode    Mode
		scope   Scope
		filter  *Filter
		act     bool
		reason  any  // the evidence (a string) when it acts, the SkipReason when not
		prevent bool // the manage strategy is available
	}{
		{"stuck by mismatch acts", entrySpec{ip: "10.0.0.1", state: table.StateStale, moved: true}, "eth0", ModeOn, ScopeStuck, nil, true, "stuck:arp+probe-unanswered", false},
		{"stuck with bypass acts", entrySpec{ip: "10.0.0.1", state: table.StateStale, moved: true, bypass: 3}, "eth0", ModeOn, ScopeStuck, nil, true, "stuck:bypass+arp+probe-unanswered", false},
		{"at-risk, scope stuck: skipped", entrySpec{ip: "10.0.0.1", state: table.StateStale, bypass: 3}, "eth0", ModeOn, ScopeStuck, nil, false, SkipAtRisk, false},
		{"at-risk, scope at-risk: acts", entrySpec{ip: "10.0.0.1", state: table.StateStale, bypass: 3}, "eth0", ModeOn, ScopeAtRisk, nil, true, "at-risk:bypass", false},
		{"stuck, scope at-risk: acts", entrySpec{ip: "10.0.0.1", state: table.StateStale, moved: true}, "eth0", ModeOn, ScopeAtRisk, nil, true, "stuck:arp+probe-unanswered", false},
		{"stale-long, scope at-risk: skipped", entrySpec{ip: "10.0.0.1", state: table.StateStale}, "eth0", ModeOn, ScopeAtRisk, nil, false, SkipNoEvidence, false},
		{"dry-run decides too", entrySpec{ip: "10.0.0.1", state: table.StateStale, bypass: 3}, "eth0", ModeDryRun, ScopeAtRisk, nil, true, "at-risk:bypass", false},
		{"off never acts", entrySpec{ip: "10.0.0.1", state: table.StateStale, bypass: 3}, "eth0", ModeOff, ScopeStuck, nil, false, SkipModeOff, false},
		{"stale-long without evidence, scope stuck", entrySpec{ip: "10.0.0.1", state: table.StateStale}, "eth0", ModeOn, ScopeStuck, nil, false, SkipNoEvidence, false},
		{"stale-long without evidence, scope all-stale", entrySpec{ip: "10.0.0.1", state: table.StateStale}, "eth0", ModeOn, ScopeAllStale, nil, true, "stale-long", false},
		{"reachable", entrySpec{ip: "10.0.0.1", state: table.StateReachable, moved: true}, "eth0", ModeOn, ScopeAllStale, nil, false, SkipNotStale, false},
		{"permanent, all-stale", entrySpec{ip: "10.0.0.1", state: table.StatePermanent, moved: true}, "eth0", ModeOn, ScopeAllStale, nil, false, SkipPermanent, false},
		{"noarp, all-stale", entrySpec{ip: "10.0.0.1", state: table.StateNoARP}, "eth0", ModeOn, ScopeAllStale, nil, false, SkipNoARP, false},
		{"managed stale, all-stale", entrySpec{ip: "10.0.0.1", state: table.StateStale, flagsExt: table.FlagExtManaged, moved: true}, "eth0", ModeOn, ScopeAllStale, nil, false, SkipManaged, false},
		{"extern_learn stale, all-stale", entrySpec{ip: "10.0.0.1", state: table.StateStale, flags: table.FlagExtLearned, bypass: 9}, "eth0", ModeOn, ScopeAllStale, nil, false, SkipExternLearn, false},
		{"interface excluded", entrySpec{ip: "10.0.0.1", state: table.StateStale, bypass: 3}, "lxc123", ModeOn, ScopeStuck, &Filter{ExcludeInterfaces: only("lxc.*")}, false, SkipInterface, false},
		{"interface not included", entrySpec{ip: "10.0.0.1", state: table.StateStale, bypass: 3}, "eth1", ModeOn, ScopeStuck, &Filter{Interfaces: only("eth0")}, false, SkipInterface, false},
		{"cidr denied", entrySpec{ip: "10.0.0.1", state: table.StateStale, bypass: 3}, "eth0", ModeOn, ScopeStuck, &Filter{DenyCIDRs: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/24")}}, false, SkipCIDR, false},
		{"cidr not allowed", entrySpec{ip: "10.0.0.1", state: table.StateStale, bypass: 3}, "eth0", ModeOn, ScopeStuck, &Filter{AllowCIDRs: []netip.Prefix{netip.MustParsePrefix("192.168.0.0/16")}}, false, SkipCIDR, false},
		{"cidr allowed", entrySpec{ip: "10.0.0.1", state: table.StateStale, moved: true}, "eth0", ModeOn, ScopeStuck, &Filter{AllowCIDRs: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}}, true, "stuck:arp+probe-unanswered", false},
		{"ipv6 stuck", entrySpec{ip: "fd00::2", state: table.StateStale, moved: true}, "eth0", ModeOn, ScopeStuck, nil, true, "stuck:arp+probe-unanswered", false},
		{"multicast never", entrySpec{ip: "ff02::1", state: table.StateStale, bypass: 1}, "eth0", ModeOn, ScopeAllStale, nil, false, SkipSpecialAddr, false},
		// Prevention does not depend on the repair scope.
		{"at-risk, scope stuck, manage available: prevention", entrySpec{ip: "10.0.0.1", state: table.StateStale, bypass: 3}, "eth0", ModeOn, ScopeStuck, nil, true, "at-risk:bypass", true},
		{"stale-long, manage available: nothing to prevent", entrySpec{ip: "10.0.0.1", state: table.StateStale}, "eth0", ModeOn, ScopeStuck, nil, false, SkipNoEvidence, true},
		{"stuck, manage available: repair", entrySpec{ip: "10.0.0.1", state: table.StateStale, moved: true}, "eth0", ModeOn, ScopeStuck, nil, true, "stuck:arp+probe-unanswered", true},
		// Entries neighwatch manages: repaired when their host moved.
		{"managed by neighwatch, host moved", entrySpec{ip: "10.0.0.1", state: table.StateReachable, flagsExt: table.FlagExtManaged, proto: table.ProtocolNeighwatch, suspect: true}, "eth0", ModeOn, ScopeStuck, nil, true, "managed-moved:arp", true},
		// A suspicion is not a black hole: the host may have two MACs.
		{"seen at another MAC, its own not asked yet: stale-long", entrySpec{ip: "10.0.0.1", state: table.StateStale, suspect: true}, "eth0", ModeOn, ScopeStuck, nil, false, SkipNoEvidence, false},
		// Two MACs answering: a duplicate address or a spoofer; no
		// strategy can tell which is right.
		{"conflict, scope all-stale: left alone", entrySpec{ip: "10.0.0.1", state: table.StateStale, conflict: true}, "eth0", ModeOn, ScopeAllStale, nil, false, SkipConflict, false},
		{"managed by neighwatch, host in place", entrySpec{ip: "10.0.0.1", state: table.StateReachable, flagsExt: table.FlagExtManaged, proto: table.ProtocolNeighwatch}, "eth0", ModeOn, ScopeStuck, nil, false, SkipManaged, true},
		{"managed by neighwatch, moved, filtered", entrySpec{ip: "10.0.0.1", state: table.StateReachable, flagsExt: table.FlagExtManaged, proto: table.ProtocolNeighwatch, suspect: true}, "eth0", ModeOn, ScopeStuck, &Filter{DenyCIDRs: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/24")}}, false, SkipCIDR, true},
		{"managed by another, host moved", entrySpec{ip: "10.0.0.1", state: table.StateReachable, flagsExt: table.FlagExtManaged, proto: 99, suspect: true}, "eth0", ModeOn, ScopeStuck, nil, false, SkipManaged, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := entry(t, tt.e)
			d := Decide(&e, tt.ifname, Policy{Mode: tt.mode, Scope: tt.scope, Prevent: tt.prevent, Filter: tt.filter})
			got := any(d.Skip)
			if d.Act {
				got = d.Evidence
			}
			if d.Act != tt.act || got != tt.reason || d.Prevent != (tt.act && tt.prevent && e.Class() == table.ClassAtRisk && tt.scope == ScopeStuck) {
				t.Fatalf("Decide = %+v, want act=%v reason=%q (class %v)", d, tt.act, tt.reason, e.Class())
			}
		})
	}
}

func TestParse(t *testing.T) {
	if s, err := ParseStrategies("probe, kick,flush"); err != nil || len(s) != 3 || s[1] != StrategyKick {
		t.Fatalf("ParseStrategies = %v, %v", s, err)
	}
	for _, bad := range []string{"", "probe,probe", "probe,nuke"} {
		if _, err := ParseStrategies(bad); err == nil {
			t.Errorf("ParseStrategies(%q) accepted", bad)
		}
	}
	if _, err := ParseMode("maybe"); err == nil {
		t.Error("ParseMode accepted maybe")
	}
	if _, err := ParseScope("everything"); err == nil {
		t.Error("ParseScope accepted everything")
	}
}

// TestCounterSizes: every registered strategy and every outcome has a
// counter of its own.
func TestCounterSizes(t *testing.T) {
	if len(Outcomes()) != numOutcomes {
		t.Fatalf("%d outcomes; the counters hold %d", len(Outcomes()), numOutcomes)
	}
	e := New(Config{}, table.New(time.Second, nil), nil, nil)
	for _, s := range Strategies() {
		for _, o := range Outcomes() {
			e.c.action(s, o)
		}
	}
	for _, s := range Strategies() {
		for _, o := range Outcomes() {
			if n := e.Stats().Actions[s][o]; n != 1 {
				t.Errorf("strategy %s, outcome %s counted %d times, want 1", s, o, n)
			}
		}
	}
}

func TestInert(t *testing.T) {
	for _, tc := range []struct {
		name       string
		strategies []Strategy
		supported  bool
		swap       bool
		fatal      bool
		warnings   int
	}{
		{"defaults with managed entries", []Strategy{StrategyManage, StrategyProbe, StrategyKick, StrategyFlush}, true, false, false, 0},
		{"manage alone: stuck never repaired", []Strategy{StrategyManage}, true, false, false, 1},
		{"manage alone, old kernel", []Strategy{StrategyManage}, false, false, false, 1},
		{"swap without datapath auto, alone", []Strategy{StrategySwap}, true, false, true, 0},
		{"swap without datapath auto, then probe", []Strategy{StrategySwap, StrategyProbe}, true, false, false, 1},
		{"swap with datapath auto", []Strategy{StrategySwap}, true, true, false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			warns, fatal := Inert(Config{Mode: ModeOn, Strategies: tc.strategies, Manage: ManageConfig{Supported: tc.supported}}, tc.swap)
			if (fatal != nil) != tc.fatal || len(warns) != tc.warnings {
				t.Fatalf("fatal %v, warnings %q; want fatal %v and %d warnings", fatal, warns, tc.fatal, tc.warnings)
			}
		})
	}
	if w, f := Inert(Config{Mode: ModeOff, Strategies: []Strategy{StrategySwap}}, false); f != nil || w != nil {
		t.Errorf("remediation off: %v %v; nothing to say", f, w)
	}
}

// TestSkipReasonNames: every reason has its own label.
func TestSkipReasonNames(t *testing.T) {
	seen := map[string]bool{}
	for _, r := range SkipReasons() {
		if n := r.String(); n == "" || n == "unknown" || seen[n] {
			t.Errorf("reason %d: label %q empty, unknown or taken", r, n)
		}
		seen[r.String()] = true
	}
	if len(seen) != int(numSkipReasons)-1 {
		t.Errorf("%d labels for %d reasons", len(seen), numSkipReasons-1)
	}
}

// TestRegistry: every registered strategy parses, is named in the flag's
// help and is told apart from an unknown one, whose error lists them all.
func TestRegistry(t *testing.T) {
	help := StrategiesHelp()
	for _, s := range Strategies() {
		got, err := ParseStrategies(" " + string(s) + " ")
		if err != nil || len(got) != 1 || got[0] != s {
			t.Errorf("ParseStrategies(%q) = %v, %v", s, got, err)
		}
		if !strings.Contains(help, string(s)) {
			t.Errorf("the help %q does not name %s", help, s)
		}
	}
	_, err := ParseStrategies("probe,teleport")
	if err == nil || !strings.Contains(err.Error(), "want "+orList(Strategies())) {
		t.Errorf("ParseStrategies(probe,teleport) error = %v", err)
	}
	if _, err := ParseStrategies("probe,probe"); err == nil {
		t.Error("a strategy listed twice was accepted")
	}
}
