package remediate

import (
	"context"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/neighwatch/neighwatch/table"
)

// Strategy names one way to repair an entry (or, manage, to keep it
// from needing a repair).
type Strategy string

// strategy is one way to act on an entry: a type in its own file
// (strategy_*.go), listed once in registry. The Engine keeps what all
// share: the queue, the rate limits, the back-off, the dry-run and the
// record of each action; a strategy says when it can act, acts, and
// verifies what it did against the table.
type strategy interface {
	name() Strategy
	// note is said of it in the flag's help ("" for nothing).
	note() string
	// inert says why it can never act under c ("" when it can);
	// swapPossible says the datapath can swap.
	inert(c *Config, swapPossible bool) string
	// repairs says whether it repairs a stuck entry (manage only
	// prevents).
	repairs(swapPossible bool) bool
	// repairsMove says whether it repairs an entry neighwatch manages
	// whose host moved: one that is REACHABLE at the old MAC.
	repairsMove() bool
	// applicable says whether it can act on the entry now; count says
	// whether a refusal (the manage cap's) is counted, not when only
	// asked what would happen.
	applicable(e *Engine, en *table.Entry, count bool) bool
	// act acts on the entry and verifies the outcome. The outcome ""
	// means it turned the entry down at the last moment: nothing done,
	// nothing recorded, the next strategy's turn.
	act(ctx context.Context, e *Engine, en *table.Entry, a *attempt) (Outcome, error)
}

// registry lists every strategy once, in the order of the counters and
// of Strategies.
var registry = []strategy{manageStrategy{}, probeStrategy{}, kickStrategy{}, swapStrategy{}, flushStrategy{}}

// Strategies lists every strategy.
func Strategies() []Strategy {
	out := make([]Strategy, len(registry))
	for i, s := range registry {
		out[i] = s.name()
	}
	return out
}

// lookup returns the strategy named s, or nil.
func lookup(s Strategy) strategy {
	for _, x := range registry {
		if x.name() == s {
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
		names = append(names, string(s.name()))
		if n := s.note(); n != "" {
			notes = append(notes, string(s.name())+" "+n)
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
			return nil, fmt.Errorf("remediation strategy %q: want %s", st, orList(Strategies()))
		case seen[st]:
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

// orList writes "a, b or c".
func orList(ss []Strategy) string {
	s := joinStrategies(ss[:len(ss)-1])
	return strings.ReplaceAll(s, ",", ", ") + " or " + string(ss[len(ss)-1])
}

func joinStrategies(ss []Strategy) string {
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

// verify waits up to d for the table to show the entry repaired, and
// says what it shows then.
func (e *Engine) verify(ctx context.Context, en *table.Entry, a *attempt, d time.Duration) Outcome {
	o, _ := e.await(ctx, a.ch, en.Key, a.oldMAC, a.needMove, d, true)
	return o
}

// act runs one strategy on an entry and verifies its outcome against
// the table.
func (e *Engine) act(ctx context.Context, en *table.Entry, s strategy) (Outcome, error) {
	defer e.actOn(en.Key)()
	ch, stop := e.watch(en.Key)
	defer stop()
	a := &attempt{ch: ch, oldMAC: en.LLAddr, claim: disputer(en, time.Now())}
	a.needMove = en.State != table.StateStale || a.claim != nil
	return s.act(ctx, e, en, a)
}
