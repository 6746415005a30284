package remediate

import (
	"net"
	"net/netip"
	"regexp"
	"testing"
	"time"

	"github.com/neighwatch/neighwatch/internal/table"
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
	moved    bool   // ARP saw the IP at another MAC
	bypass   uint64 // tracer hits
	noLL     bool
}

func entry(t *testing.T, s entrySpec) table.Entry {
	t.Helper()
	tb := table.New(time.Nanosecond, nil)
	ip := netip.MustParseAddr(s.ip)
	u := table.Update{Ifindex: 3, Family: table.FamilyOf(ip), Addr: ip, State: s.state, Flags: s.flags, FlagsExt: s.flagsExt, LLAddr: macOld}
	if s.noLL {
		u.LLAddr = nil
	}
	tb.Apply(table.CauseNetlink, u)
	time.Sleep(time.Millisecond)
	k := table.Key{Ifindex: 3, Addr: ip}
	if s.moved {
		tb.ObserveMAC(3, ip, macNew, time.Now())
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
		name   string
		e      entrySpec
		ifname string
		mode   Mode
		scope  Scope
		filter *Filter
		act    bool
		reason string
	}{
		{"stuck by mismatch acts", entrySpec{ip: "10.0.0.1", state: table.StateStale, moved: true}, "eth0", ModeOn, ScopeStuck, nil, true, "stuck:arp"},
		{"stuck with bypass acts", entrySpec{ip: "10.0.0.1", state: table.StateStale, moved: true, bypass: 3}, "eth0", ModeOn, ScopeStuck, nil, true, "stuck:bypass+arp"},
		{"at-risk, scope stuck: skipped", entrySpec{ip: "10.0.0.1", state: table.StateStale, bypass: 3}, "eth0", ModeOn, ScopeStuck, nil, false, SkipAtRisk},
		{"at-risk, scope at-risk: acts", entrySpec{ip: "10.0.0.1", state: table.StateStale, bypass: 3}, "eth0", ModeOn, ScopeAtRisk, nil, true, "at-risk:bypass"},
		{"stuck, scope at-risk: acts", entrySpec{ip: "10.0.0.1", state: table.StateStale, moved: true}, "eth0", ModeOn, ScopeAtRisk, nil, true, "stuck:arp"},
		{"stale-long, scope at-risk: skipped", entrySpec{ip: "10.0.0.1", state: table.StateStale}, "eth0", ModeOn, ScopeAtRisk, nil, false, SkipNoEvidence},
		{"dry-run decides too", entrySpec{ip: "10.0.0.1", state: table.StateStale, bypass: 3}, "eth0", ModeDryRun, ScopeAtRisk, nil, true, "at-risk:bypass"},
		{"off never acts", entrySpec{ip: "10.0.0.1", state: table.StateStale, bypass: 3}, "eth0", ModeOff, ScopeStuck, nil, false, SkipModeOff},
		{"stale-long without evidence, scope stuck", entrySpec{ip: "10.0.0.1", state: table.StateStale}, "eth0", ModeOn, ScopeStuck, nil, false, SkipNoEvidence},
		{"stale-long without evidence, scope all-stale", entrySpec{ip: "10.0.0.1", state: table.StateStale}, "eth0", ModeOn, ScopeAllStale, nil, true, "stale-long"},
		{"reachable", entrySpec{ip: "10.0.0.1", state: table.StateReachable, moved: true}, "eth0", ModeOn, ScopeAllStale, nil, false, SkipNotStale},
		{"permanent, all-stale", entrySpec{ip: "10.0.0.1", state: table.StatePermanent, moved: true}, "eth0", ModeOn, ScopeAllStale, nil, false, SkipPermanent},
		{"noarp, all-stale", entrySpec{ip: "10.0.0.1", state: table.StateNoARP}, "eth0", ModeOn, ScopeAllStale, nil, false, SkipNoARP},
		{"managed stale, all-stale", entrySpec{ip: "10.0.0.1", state: table.StateStale, flagsExt: table.FlagExtManaged, moved: true}, "eth0", ModeOn, ScopeAllStale, nil, false, SkipManaged},
		{"extern_learn stale, all-stale", entrySpec{ip: "10.0.0.1", state: table.StateStale, flags: table.FlagExtLearned, bypass: 9}, "eth0", ModeOn, ScopeAllStale, nil, false, SkipExternLearn},
		{"interface excluded", entrySpec{ip: "10.0.0.1", state: table.StateStale, bypass: 3}, "lxc123", ModeOn, ScopeStuck, &Filter{ExcludeInterfaces: only("lxc.*")}, false, SkipInterface},
		{"interface not included", entrySpec{ip: "10.0.0.1", state: table.StateStale, bypass: 3}, "eth1", ModeOn, ScopeStuck, &Filter{Interfaces: only("eth0")}, false, SkipInterface},
		{"cidr denied", entrySpec{ip: "10.0.0.1", state: table.StateStale, bypass: 3}, "eth0", ModeOn, ScopeStuck, &Filter{DenyCIDRs: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/24")}}, false, SkipCIDR},
		{"cidr not allowed", entrySpec{ip: "10.0.0.1", state: table.StateStale, bypass: 3}, "eth0", ModeOn, ScopeStuck, &Filter{AllowCIDRs: []netip.Prefix{netip.MustParsePrefix("192.168.0.0/16")}}, false, SkipCIDR},
		{"cidr allowed", entrySpec{ip: "10.0.0.1", state: table.StateStale, moved: true}, "eth0", ModeOn, ScopeStuck, &Filter{AllowCIDRs: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}}, true, "stuck:arp"},
		{"ipv6 stuck", entrySpec{ip: "fd00::2", state: table.StateStale, moved: true}, "eth0", ModeOn, ScopeStuck, nil, true, "stuck:arp"},
		{"multicast never", entrySpec{ip: "ff02::1", state: table.StateStale, bypass: 1}, "eth0", ModeOn, ScopeAllStale, nil, false, SkipLoopbackAddr},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := entry(t, tt.e)
			d := Decide(&e, tt.ifname, tt.mode, tt.scope, tt.filter)
			if d.Act != tt.act || d.Reason != tt.reason {
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

func TestCounterSizes(t *testing.T) {
	if len(Strategies()) != numStrategies || len(Outcomes()) != numOutcomes {
		t.Fatalf("%d strategies, %d outcomes; the counters hold %d and %d", len(Strategies()), len(Outcomes()), numStrategies, numOutcomes)
	}
}
