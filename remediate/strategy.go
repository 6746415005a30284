package remediate

import (
	"context"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/neighwatch/neighwatch/internal/quote"
	"github.com/neighwatch/neighwatch/table"
)

// Strategy names one way to repair an entry (or, manage, to keep it
// from needing a repair).
type Strategy string

// A strategy is one way to act on an entry, in its own file
// (strategy_*.go): what it is, as data (strategyInfo), and what it does,
// two methods (strategy). The registry lists each once. The Engine keeps
// what all share: the queue, the rate limits, the back-off, the dry-run
// and the record of each action. A strategy acts and verifies what it did
// against the table with what the engine hands it (kit), never the
// engine itself.
type strategy interface {
	// applicable says whether it can act on the entry now; count says
	// whether a refusal (the manage cap's) is counted, not when only
	// asked what would happen.
	applicable(kt *kit, en *table.Entry, count bool) bool
	// act acts on the entry and verifies the outcome. The outcome ""
	// means it turned the entry down at the last moment: nothing done,
	// nothing recorded, the next strategy's turn.
	act(ctx context.Context, kt *kit, en *table.Entry, a *attempt) (Outcome, error)
}

// strategyInfo is what a strategy is.
type strategyInfo struct {
	name Strategy
	note string // said of it in the flag's help ("" for nothing)
	// rank is its place in the default order, 0 first (where what it
	// needs is there).
	rank int
	// needs is what it cannot act without: the kernel's managed
	// neighbours, or a datapath that may swap.
	needs need
	// prevents says it keeps entries from getting stuck rather than
	// repairing them: a policy with such a strategy acts on at-risk
	// entries, and only the preventing strategies act on them.
	prevents bool
	// repairsMove says whether it repairs an entry neighwatch manages
	// whose host moved: one that is REACHABLE at the old MAC.
	repairsMove bool
	strategy
}

// need is what a strategy cannot act without.
type need int

const (
	needNothing need = iota
	needManaged      // a kernel that keeps managed neighbours (Linux 5.16+): the kernel's feature "managed"
	needSwap         // a datapath that may swap (the agent's --datapath.mode=auto)
)

// ranked returns its place in the default order, and false when it is
// not a default where the kernel keeps managed neighbours (or not) and
// the datapath can swap (or not).
func (s *strategyInfo) ranked(manageSupported, swapPossible bool) (int, bool) {
	switch s.needs {
	case needManaged:
		return s.rank, manageSupported
	case needSwap:
		return s.rank, swapPossible
	}
	return s.rank, true
}

// inert says why it can never act under c ("" when it can); kernel is
// set when the kernel, not the configuration, is why (one configuration
// serves a fleet of kernels: only a warning).
func (s *strategyInfo) inert(c *Config, swapPossible bool) (why string, kernel bool) {
	switch {
	case s.needs == needManaged && !c.Manage.Supported:
		return "this kernel keeps no managed neighbours (Linux 5.16+)", true
	case s.needs == needSwap && !swapPossible:
		return "it needs a datapath that may swap (the agent's auto datapath mode)", false
	}
	return "", false
}

// repairs says whether it repairs a stuck entry: every strategy that
// does not prevent, a swap only where the datapath can swap.
func (s *strategyInfo) repairs(swapPossible bool) bool {
	return !s.prevents && (s.needs != needSwap || swapPossible)
}

// feature names the kernel feature it needs on every watched interface,
// with whether the kernel has it and why not ("" for none): the agent's
// detection reports it.
func (s *strategyInfo) feature(c *Config) (name string, ok bool, why string) {
	if s.needs == needManaged {
		return "managed", c.Manage.Supported, "the kernel keeps no managed neighbours (NTF_EXT_MANAGED needs Linux 5.16)"
	}
	return "", false, ""
}

// registry lists every strategy once, in the order of the counters and
// of Strategies.
var registry = []*strategyInfo{&manageInfo, &probeInfo, &kickInfo, &swapInfo, &flushInfo}

// prevents says whether a strategy in c that can act prevents: then
// at-risk entries are candidates for prevention.
func prevents(c *Config) bool {
	for _, name := range c.Strategies {
		if s := lookup(name); s != nil && s.prevents {
			if why, _ := s.inert(c, false); why == "" {
				return true
			}
		}
	}
	return false
}

// Feature is a kernel feature a configured strategy needs on every
// watched interface, and whether this kernel has it.
type Feature struct {
	Name string
	OK   bool
	Why  string // why not, when not OK
}

// Features lists the kernel features the strategies of c need; none
// when remediation is off.
func Features(c Config) []Feature {
	if c.Mode == ModeOff {
		return nil
	}
	var out []Feature
	for _, name := range c.Strategies {
		if s := lookup(name); s != nil {
			if n, ok, why := s.feature(&c); n != "" {
				out = append(out, Feature{Name: n, OK: ok, Why: why})
			}
		}
	}
	return out
}

// Strategies lists every strategy.
func Strategies() []Strategy {
	out := make([]Strategy, len(registry))
	for i, s := range registry {
		out[i] = s.name
	}
	return out
}

// lookup returns the strategy named s, or nil.
func lookup(s Strategy) *strategyInfo {
	for _, x := range registry {
		if x.name == s {
			return x
		}
	}
	return nil
}

// StrategiesHelp describes the strategies for the flag's help: each
// name, with what is to be said of it.
func StrategiesHelp() string {
	var names, notes []string
	for _, s := range registry {
		names = append(names, string(s.name))
		if s.note != "" {
			notes = append(notes, string(s.name)+" "+s.note)
		}
	}
	return "strategies in order, from " + strings.Join(names, ", ") + "; " + strings.Join(notes, "; ")
}

// ParseStrategies parses a comma-separated list.
func ParseStrategies(s string) ([]Strategy, error) {
	var out []Strategy
	seen := map[Strategy]bool{}
	for _, p := range strings.Split(s, ",") {
		st := Strategy(strings.TrimSpace(p))
		switch {
		case st == "":
			continue
		case lookup(st) == nil:
			return nil, fmt.Errorf("remediation strategy %s: want %s", quote.Input(string(st)), orList(Strategies()))
		case seen[st]:
			return nil, fmt.Errorf("remediation strategy %s listed twice", quote.Input(string(st)))
		}
		seen[st] = true
		out = append(out, st)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no remediation strategy in %s", quote.Input(s))
	}
	return out, nil
}

// orList writes "a, b or c".
func orList(ss []Strategy) string {
	s := JoinStrategies(ss[:len(ss)-1])
	return strings.ReplaceAll(s, ",", ", ") + " or " + string(ss[len(ss)-1])
}

// JoinStrategies writes a list as --remediation.strategies takes it:
// "manage,probe".
func JoinStrategies(ss []Strategy) string {
	var s []string
	for _, x := range ss {
		s = append(s, string(x))
	}
	return strings.Join(s, ",")
}

// attempt is what every strategy's act starts from: the entry's events
// while it acts, its MAC before, and what the evidence claims.
type attempt struct {
	ch     <-chan table.Event
	oldMAC string
	// claim is a MAC that recent evidence says claims the entry's IP
	// instead of, or as well as, the entry's MAC (nil: none).
	claim net.HardwareAddr
	// needMove: only a new MAC repairs the entry. An entry that was
	// valid and not STALE (one neighwatch manages, REACHABLE at the old
	// MAC) proves nothing by being REACHABLE; nor does an entry whose
	// host was seen at another MAC, unless its own MAC answers the probe
	// (judged apart): the kernel may confirm it at the old MAC from the
	// moved host's own traffic (TCP's acknowledgements confirm the
	// neighbour of their route).
	needMove bool
}

// act runs one strategy on an entry and verifies its outcome against
// the table.
func (e *Engine) act(ctx context.Context, en *table.Entry, s *strategyInfo) (Outcome, error) {
	defer e.acting.mark(en.Key, func() { e.table.Lookup(en.Key) })()
	kt := e.kit()
	ch, stop := kt.watch(en.Key)
	defer stop()
	a := &attempt{ch: ch, oldMAC: en.LLAddr, claim: disputer(en, time.Now())}
	a.needMove = en.State != table.StateStale || a.claim != nil
	return s.act(ctx, kt, en, a)
}
