package remediate

import (
	"context"
	"log/slog"
	"net"
	"slices"
	"time"

	"github.com/neighwatch/neighwatch/table"
)

// Outcome is what verification saw after an action.
type Outcome string

// Outcomes.
const (
	OutcomeFixed    Outcome = "fixed"   // REACHABLE at the same MAC
	OutcomeMoved    Outcome = "moved"   // REACHABLE (or updated) at a new MAC
	OutcomeFlushed  Outcome = "flushed" // deleted; the next lookup resolves afresh
	OutcomeFailed   Outcome = "failed"  // the action failed, or the entry went FAILED
	OutcomeNoChange Outcome = "no-change"
	OutcomeDryRun   Outcome = "dry-run" // would have acted
	// OutcomeConflict: the entry's MAC answered while another MAC also
	// claims the IP (answered the same probe, or was seen recently). The
	// engine does not take the answer as a repair; the entry stays stuck.
	OutcomeConflict Outcome = "conflict"
	// OutcomeManaged: the entry is managed by neighwatch now; the kernel
	// re-validates it from here on.
	OutcomeManaged Outcome = "managed"
	// OutcomeConfirmed: the entry's MAC answered a probe, and no other:
	// the host is there, and the MAC it was seen at is another of its
	// own (a bond, ARP flux, a router relaying it). Nothing to repair.
	OutcomeConfirmed Outcome = "confirmed"
)

// Outcomes lists them, for pre-created metric series.
func Outcomes() []Outcome {
	return []Outcome{OutcomeFixed, OutcomeMoved, OutcomeFlushed, OutcomeFailed, OutcomeNoChange, OutcomeDryRun, OutcomeConflict, OutcomeManaged, OutcomeConfirmed}
}

// Actor performs actions on the kernel; the real one is NetActor.
type Actor interface {
	// Probe sends one probe: phase 0 unicast to the entry's MAC, phase 1
	// broadcast (ARP) or solicited-node multicast (NDP). With listen > 0
	// it then reads answers for that long and returns each MAC that
	// answered for the entry's IP, once, in the order they came.
	Probe(ctx context.Context, en *table.Entry, phase int, listen time.Duration) ([]net.HardwareAddr, error)
	// Kick sends RTM_NEWNEIGH with NTF_USE.
	Kick(en *table.Entry) error
	// Flush deletes the entry.
	Flush(en *table.Entry) error
	// Manage makes the entry managed, marked as neighwatch's
	// (table.ProtocolNeighwatch), keeping its address and state.
	Manage(en *table.Entry) error
	// Release clears managed: a valid entry goes back to STALE and the
	// kernel's normal life, an invalid one (FAILED, INCOMPLETE) is
	// deleted. A missing entry or link is not an error.
	Release(k table.Key, valid bool) error
	// Repoint sets an entry neighwatch manages to mac, STALE, still
	// managed: its host moved there, a probe proved it, and a REACHABLE
	// managed entry takes no ARP answer within its locktime.
	Repoint(en *table.Entry, mac net.HardwareAddr) error
}

// Swapper swaps an interface's datapath to bpf_redirect_neigh; the agent
// provides it when --datapath.mode=auto.
type Swapper interface {
	// CanSwap reports whether the interface runs the legacy datapath in
	// auto mode.
	CanSwap(ifindex int32) bool
	Swap(ifindex int32) error
}

// Config configures the engine.
type Config struct {
	Mode       Mode
	Scope      Scope
	Strategies []Strategy
	Filter     Filter
	// Rate is the global action rate (per second), PerInterfaceRate the
	// rate on one interface. One action sends at most two probe packets.
	Rate, PerInterfaceRate float64
	Burst                  int
	MaxConcurrent          int
	QueueSize              int
	// VerifyTimeout bounds the wait for a probe's answer; KernelTimeout the
	// wait after kick and swap, which go through the kernel's DELAY and
	// PROBE timers.
	VerifyTimeout, KernelTimeout time.Duration
	// ProbeGap is the wait for an answer to the unicast probe before the
	// broadcast one.
	ProbeGap               time.Duration
	BackoffMin, BackoffMax time.Duration
	SweepInterval          time.Duration
	// NoConfirm turns off the confirmation of suspicions (confirm.go):
	// then only silence for the table's silence window makes a suspect
	// entry stuck.
	NoConfirm bool
	Manage    ManageConfig
	Logger    *slog.Logger
}

// Defaults are the engine's defaults, in one place: the agent's flags
// take theirs from here, and defaults fills a field left zero with it.
// Mode, Scope and Strategies are the flags' (strategies depend on the
// kernel: DefaultStrategies).
func Defaults() Config {
	return Config{
		Mode: ModeDryRun, Scope: ScopeStuck,
		Rate: 10, PerInterfaceRate: 5, Burst: 1, MaxConcurrent: 4, QueueSize: 1024,
		VerifyTimeout: 2 * time.Second, KernelTimeout: 10 * time.Second, ProbeGap: 300 * time.Millisecond,
		BackoffMin: 30 * time.Second, BackoffMax: 10 * time.Minute, SweepInterval: time.Second,
		Manage: ManageConfig{Max: 1024, Idle: 30 * time.Minute, FailedTimeout: 5 * time.Minute, ReleaseOnExit: true, Interval: time.Second},
	}
}

func (c *Config) defaults() {
	d := Defaults()
	fill := func(v *time.Duration, def time.Duration) {
		if *v <= 0 {
			*v = def
		}
	}
	if c.Rate <= 0 {
		c.Rate = d.Rate
	}
	if c.PerInterfaceRate <= 0 {
		c.PerInterfaceRate = d.PerInterfaceRate
	}
	if c.Burst <= 0 {
		c.Burst = d.Burst
	}
	if c.MaxConcurrent <= 0 {
		c.MaxConcurrent = d.MaxConcurrent
	}
	if c.QueueSize <= 0 {
		c.QueueSize = d.QueueSize
	}
	fill(&c.VerifyTimeout, d.VerifyTimeout)
	fill(&c.KernelTimeout, d.KernelTimeout)
	fill(&c.ProbeGap, d.ProbeGap)
	fill(&c.BackoffMin, d.BackoffMin)
	fill(&c.BackoffMax, d.BackoffMax)
	fill(&c.SweepInterval, d.SweepInterval)
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	c.Manage.defaults()
	if len(c.Strategies) == 0 {
		c.Strategies = DefaultStrategies(c.Manage.Supported, false)
	}
}

// DefaultStrategies is the default order, as each strategy ranks
// itself: swap first where the datapath can swap, then manage where the
// kernel keeps managed entries, then probe, kick and flush.
func DefaultStrategies(manageSupported, swapPossible bool) []Strategy {
	type ranked struct {
		s    Strategy
		rank int
	}
	var rs []ranked
	for _, s := range registry {
		if r, ok := s.ranked(manageSupported, swapPossible); ok {
			rs = append(rs, ranked{s.name, r})
		}
	}
	slices.SortStableFunc(rs, func(a, b ranked) int { return a.rank - b.rank })
	out := make([]Strategy, len(rs))
	for i, r := range rs {
		out[i] = r.s
	}
	return out
}
