package remediate

import (
	"fmt"
	"net/netip"
	"regexp"
	"strings"

	"github.com/neighwatch/neighwatch/internal/quote"
	"github.com/neighwatch/neighwatch/table"
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
	return "", fmt.Errorf("remediation mode %s: want off, dry-run or on", quote.Input(s))
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
	return "", fmt.Errorf("remediation scope %s: want stuck, at-risk or all-stale", quote.Input(s))
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

// Filter limits remediation to interfaces and prefixes.
type Filter struct {
	Interfaces, ExcludeInterfaces []*regexp.Regexp
	AllowCIDRs, DenyCIDRs         []netip.Prefix
}

// SkipReason says why the policy leaves an entry alone.
type SkipReason uint8

// Skip reasons.
const (
	NotSkipped      SkipReason = iota // the policy acts
	SkipModeOff                       // remediation is off
	SkipPermanent                     // PERMANENT: the administrator's
	SkipNoARP                         // NOARP: the kernel's
	SkipManaged                       // managed by the kernel or another agent, or by neighwatch with its host in place
	SkipExternLearn                   // extern_learn: another agent's
	SkipNotStale                      // not STALE
	SkipNoLinkLayer                   // no link-layer address
	SkipSpecialAddr                   // not a unicast address (loopback, multicast, unspecified)
	SkipInterface                     // the interface filters leave it out
	SkipCIDR                          // the prefix filters leave it out
	SkipNotLong                       // STALE, not yet stale-long
	SkipAtRisk                        // at-risk, the scope is stuck
	SkipNoEvidence                    // stale-long, nothing else known; the scope is stuck or at-risk
	// SkipConflict: two MACs answer for the IP, the entry's one of them
	// (a duplicate address or a spoofer): no strategy can tell which is
	// right, and a flush or a repoint might hand the IP to a spoofer.
	SkipConflict
	numSkipReasons
)

var skipNames = [numSkipReasons]string{"", "mode-off", "permanent", "noarp", "managed", "extern-learn", "not-stale", "no-lladdr",
	"special-address", "interface-filtered", "cidr-filtered", "not-stale-long", "at-risk", "no-evidence", "conflict"}

// String returns the reason's label ("not-stale-long").
func (r SkipReason) String() string {
	if r < numSkipReasons {
		return skipNames[r]
	}
	return "unknown"
}

// SkipReasons lists every reason to skip.
func SkipReasons() []SkipReason {
	out := make([]SkipReason, 0, numSkipReasons-1)
	for r := SkipModeOff; r < numSkipReasons; r++ {
		out = append(out, r)
	}
	return out
}

// Decision is the policy's verdict on one entry.
type Decision struct {
	Act bool
	// Skip says why not, when it does not act; Evidence why it does.
	Skip     SkipReason
	Evidence string
	// Prevent: an at-risk entry outside the repair scope, a candidate for
	// prevention (the manage strategy) only.
	Prevent bool
	// Moved: an entry neighwatch manages whose host was seen at another
	// MAC; the kernel would follow only after its reachable time, so a
	// repair strategy (probe, kick, flush) acts at once.
	Moved bool
}

// Reason is the evidence an action rests on, or the reason to skip.
func (d Decision) Reason() string {
	if d.Act {
		return d.Evidence
	}
	return d.Skip.String()
}

// Policy is what Decide weighs an entry against.
type Policy struct {
	Mode  Mode
	Scope Scope
	// Prevent: the manage strategy can act, so at-risk entries the scope
	// leaves out are candidates for prevention. Prevention does not
	// depend on the repair scope.
	Prevent bool
	Filter  *Filter
}

// Decide is the pure policy: an entry and its interface name in, act or
// skip with a reason out. Entries the kernel or another agent owns
// (PERMANENT, NOARP, managed by others, extern_learn) are never touched,
// whatever the scope; entries neighwatch manages only when their host
// was seen at another MAC.
func Decide(en *table.Entry, ifname string, p Policy) Decision {
	moved := false
	switch {
	case p.Mode == ModeOff:
		return Decision{Skip: SkipModeOff}
	case en.State == table.StatePermanent:
		return Decision{Skip: SkipPermanent}
	case en.State == table.StateNoARP:
		return Decision{Skip: SkipNoARP}
	case en.FlagsExt&table.FlagExtManaged != 0:
		if en.Owner() != table.OwnerNeighwatch || !en.State.Valid() || en.DisputingMAC() == "" {
			return Decision{Skip: SkipManaged}
		}
		moved = true
	case en.Flags&table.FlagExtLearned != 0:
		return Decision{Skip: SkipExternLearn}
	case en.State != table.StateStale:
		return Decision{Skip: SkipNotStale}
	}
	switch {
	case en.LLAddr == "":
		return Decision{Skip: SkipNoLinkLayer}
	case !en.Addr.IsGlobalUnicast() && !en.Addr.IsLinkLocalUnicast():
		return Decision{Skip: SkipSpecialAddr}
	}
	if f := p.Filter; f != nil {
		if !(table.Selector{Include: f.Interfaces, Exclude: f.ExcludeInterfaces}).Match(ifname) {
			return Decision{Skip: SkipInterface}
		}
		if !cidrAllowed(en.Addr, f.AllowCIDRs, f.DenyCIDRs) {
			return Decision{Skip: SkipCIDR}
		}
	}
	if moved {
		return Decision{Act: true, Moved: true, Evidence: "managed-moved:" + evidenceList(en)}
	}
	c := en.Class()
	switch {
	case c == table.ClassOK:
		return Decision{Skip: SkipNotLong}
	case c == table.ClassConflict:
		return Decision{Skip: SkipConflict}
	case c >= p.Scope.MinClass():
		return Decision{Act: true, Evidence: reason(en)}
	case c == table.ClassAtRisk && p.Prevent:
		return Decision{Act: true, Prevent: true, Evidence: reason(en)}
	case c == table.ClassAtRisk:
		return Decision{Skip: SkipAtRisk}
	}
	return Decision{Skip: SkipNoEvidence}
}

// Confirmable says whether a suspect entry (its host seen at another MAC
// since its MAC was last heard) may get a confirmation: unicast probes to
// the entry's own MAC, as the kernel sends for a STALE entry in use. That
// is a STALE entry, young or not, or one neighwatch manages, that
// remediation may touch (not off, not another's, not filtered out).
func Confirmable(en *table.Entry, ifname string, p Policy) bool {
	switch {
	case p.Mode == ModeOff || !en.Suspect() || en.Class() == table.ClassStuck:
		return false // nothing to confirm, or already proven
	case en.State == table.StateStale && !en.Managed():
	case en.Owner() == table.OwnerNeighwatch && en.State.Valid():
	default:
		return false
	}
	return probeable(en, ifname, p)
}

// MoveCheckable reports whether an entry the kernel just pointed at
// another MAC may have its old MAC asked whether it still holds the IP
// (movecheck.go): in dry-run and on, for a unicast address of a dynamic
// entry the filter lets remediation act on.
func MoveCheckable(en *table.Entry, ifname string, p Policy) bool {
	if p.Mode == ModeOff || en.State == table.StatePermanent || en.State == table.StateNoARP {
		return false // off, or set by hand, not by the network
	}
	return probeable(en, ifname, p)
}

// probeable reports whether the agent may send unicast probes about en (a
// confirmation, a move check): it has a MAC, its address is unicast, and
// the filter lets remediation act on it.
func probeable(en *table.Entry, ifname string, p Policy) bool {
	if en.LLAddr == "" || (!en.Addr.IsGlobalUnicast() && !en.Addr.IsLinkLocalUnicast()) {
		return false
	}
	if f := p.Filter; f != nil {
		if !(table.Selector{Include: f.Interfaces, Exclude: f.ExcludeInterfaces}).Match(ifname) || !cidrAllowed(en.Addr, f.AllowCIDRs, f.DenyCIDRs) {
			return false
		}
	}
	return true
}

// MinClass is the least harmful class a policy acts on.
func (p Policy) MinClass() table.Class {
	if p.Prevent && table.ClassAtRisk < p.Scope.MinClass() {
		return table.ClassAtRisk
	}
	return p.Scope.MinClass()
}

// reason names the class and its evidence: "stuck:source-mac+bypass".
func reason(en *table.Entry) string {
	if why := evidenceList(en); why != "" {
		return en.Class().String() + ":" + why
	}
	return en.Class().String()
}

func evidenceList(en *table.Entry) string {
	var why []string
	for _, ev := range en.Evidence() {
		why = append(why, string(ev.Signal))
	}
	return strings.Join(why, "+")
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

// Inert names what in a configuration of strategies can never act (the
// caller names the option that set them): a strategy the
// agent or the kernel cannot use, or a class of entries no strategy can
// repair. fatal is set when remediation as configured can never act at
// all for a reason the configuration alone decides (the kernel's lack of
// managed neighbours only warns: one configuration serves a fleet of
// kernels).
func Inert(c Config, swapPossible bool) (warnings []string, fatal error) {
	if c.Mode == ModeOff {
		return nil, nil
	}
	usable, repair, kernel := 0, false, false
	for _, name := range c.Strategies {
		s := lookup(name)
		if s == nil {
			continue
		}
		if why, k := s.inert(&c, swapPossible); why != "" {
			warnings = append(warnings, string(name)+" never acts: "+why)
			kernel = kernel || k
			continue
		}
		usable++
		repair = repair || s.repairs(swapPossible)
	}
	if usable == 0 {
		if !kernel {
			return nil, fmt.Errorf("%s can never act: %s", JoinStrategies(c.Strategies), strings.Join(warnings, "; "))
		}
		return warnings, nil
	}
	if !repair {
		warnings = append(warnings, JoinStrategies(c.Strategies)+": stuck entries are never repaired (manage only keeps at-risk entries fresh); add probe")
	}
	return warnings, nil
}
