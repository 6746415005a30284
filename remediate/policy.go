package remediate

import (
	"fmt"
	"net/netip"
	"regexp"
	"strings"

	"github.com/neighwatch/neighwatch/internal/table"
)

// Mode is the auto-remediation switch.
type Mode string

// Modes.
const (
	ModeOff    Mode = "off"
	ModeDryRun Mode = "dry-run" // decide and report, touch nothing
	ModeOn     Mode = "on"
)

// ParseMode checks a --remediation value.
func ParseMode(s string) (Mode, error) {
	switch Mode(s) {
	case ModeOff, ModeDryRun, ModeOn:
		return Mode(s), nil
	}
	return "", fmt.Errorf("remediation mode %q: want off, dry-run or on", s)
}

// Scope says which entries are candidates.
type Scope string

// Scopes, from narrow to wide.
const (
	ScopeStuck    Scope = "stuck"     // evidence that the host is not at the entry's MAC
	ScopeAtRisk   Scope = "at-risk"   // and entries that bypassing traffic keeps the kernel from re-validating
	ScopeAllStale Scope = "all-stale" // every stale-long entry (hosts without the tracer)
)

// ParseScope checks a --remediation.scope value.
func ParseScope(s string) (Scope, error) {
	switch Scope(s) {
	case ScopeStuck, ScopeAtRisk, ScopeAllStale:
		return Scope(s), nil
	}
	return "", fmt.Errorf("remediation scope %q: want stuck, at-risk or all-stale", s)
}

// MinClass is the least harmful class the scope acts on.
func (s Scope) MinClass() table.Class {
	switch s {
	case ScopeAllStale:
		return table.ClassStaleLong
	case ScopeAtRisk:
		return table.ClassAtRisk
	}
	return table.ClassStuck
}

// Strategy is one way to repair an entry.
type Strategy string

// Strategies.
const (
	StrategyProbe Strategy = "probe" // ARP request / Neighbor Solicitation, unicast then multicast
	StrategyKick  Strategy = "kick"  // RTM_NEWNEIGH with NTF_USE: the kernel re-resolves
	StrategySwap  Strategy = "swap"  // datapath legacy -> neigh on the entry's interface
	StrategyFlush Strategy = "flush" // delete the entry
	// StrategyManage makes the entry managed (NTF_EXT_MANAGED, kernel
	// 5.16+), marked with table.ProtocolNeighwatch: the kernel keeps it
	// fresh itself, whatever path the traffic takes.
	StrategyManage Strategy = "manage"
)

// ParseStrategies parses a comma-separated list.
func ParseStrategies(s string) ([]Strategy, error) {
	var out []Strategy
	seen := map[Strategy]bool{}
	for _, p := range strings.Split(s, ",") {
		st := Strategy(strings.TrimSpace(p))
		switch st {
		case StrategyManage, StrategyProbe, StrategyKick, StrategySwap, StrategyFlush:
		case "":
			continue
		default:
			return nil, fmt.Errorf("remediation strategy %q: want manage, probe, kick, swap or flush", st)
		}
		if seen[st] {
			return nil, fmt.Errorf("remediation strategy %q listed twice", st)
		}
		seen[st] = true
		out = append(out, st)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no remediation strategy in %q", s)
	}
	return out, nil
}

// Filter limits remediation to interfaces and prefixes.
type Filter struct {
	Interfaces, ExcludeInterfaces []*regexp.Regexp
	AllowCIDRs, DenyCIDRs         []netip.Prefix
}

// Skip reasons: why an entry is not acted on.
const (
	SkipNotStale     = "not-stale"
	SkipNotLong      = "not-stale-long"
	SkipNoEvidence   = "no-evidence" // stale-long, nothing else known; scope stuck or at-risk
	SkipAtRisk       = "at-risk"     // at-risk, scope stuck
	SkipPermanent    = "permanent"
	SkipNoARP        = "noarp"
	SkipManaged      = "managed"
	SkipExternLearn  = "extern-learn"
	SkipInterface    = "interface-filtered"
	SkipCIDR         = "cidr-filtered"
	SkipModeOff      = "mode-off"
	SkipNoLinkLayer  = "no-lladdr"
	SkipLoopbackAddr = "special-address"
)

// Decision is the policy's verdict on one entry.
type Decision struct {
	Act    bool
	Reason string // why it acts (evidence) or why not (a Skip reason)
}

// Decide is the pure policy: entry, its interface name, mode, scope and
// filters in; act or skip with a reason out. Entries the kernel or another
// agent owns (PERMANENT, NOARP, managed, extern_learn) are never touched,
// whatever the scope.
func Decide(e *table.Entry, ifname string, mode Mode, scope Scope, f *Filter) Decision {
	switch {
	case mode == ModeOff:
		return Decision{Reason: SkipModeOff}
	case e.State == table.StatePermanent:
		return Decision{Reason: SkipPermanent}
	case e.State == table.StateNoARP:
		return Decision{Reason: SkipNoARP}
	case e.FlagsExt&table.FlagExtManaged != 0:
		return Decision{Reason: SkipManaged}
	case e.Flags&table.FlagExtLearned != 0:
		return Decision{Reason: SkipExternLearn}
	case e.State != table.StateStale:
		return Decision{Reason: SkipNotStale}
	case e.LLAddr == "":
		return Decision{Reason: SkipNoLinkLayer}
	case !e.Addr.IsGlobalUnicast() && !e.Addr.IsLinkLocalUnicast():
		return Decision{Reason: SkipLoopbackAddr}
	}
	if f != nil {
		if !(table.Selector{Include: f.Interfaces, Exclude: f.ExcludeInterfaces}).Match(ifname) {
			return Decision{Reason: SkipInterface}
		}
		if !cidrAllowed(e.Addr, f.AllowCIDRs, f.DenyCIDRs) {
			return Decision{Reason: SkipCIDR}
		}
	}
	c := e.Class()
	switch {
	case c == table.ClassOK:
		return Decision{Reason: SkipNotLong}
	case c >= scope.MinClass():
		return Decision{Act: true, Reason: reason(e)}
	case c == table.ClassAtRisk:
		return Decision{Reason: SkipAtRisk}
	}
	return Decision{Reason: SkipNoEvidence}
}

// reason names the class and its evidence: "stuck:source-mac+bypass".
func reason(e *table.Entry) string {
	var why []string
	for _, ev := range e.Evidence() {
		why = append(why, string(ev.Signal))
	}
	if len(why) == 0 {
		return e.Class().String()
	}
	return e.Class().String() + ":" + strings.Join(why, "+")
}

func cidrAllowed(a netip.Addr, allow, deny []netip.Prefix) bool {
	for _, p := range deny {
		if p.Contains(a) {
			return false
		}
	}
	if len(allow) == 0 {
		return true
	}
	for _, p := range allow {
		if p.Contains(a) {
			return true
		}
	}
	return false
}
