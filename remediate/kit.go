package remediate

import (
	"context"
	"log/slog"
	"net"
	"slices"
	"sync/atomic"
	"time"

	"github.com/neighwatch/neighwatch/table"
)

// kit is what a strategy acts with, and all it sees of the engine: the
// kernel (actor, swapper), the table, the entries neighwatch manages,
// the configuration in force when the action began, and the helpers
// that verify an action against the table. The engine makes one per
// action (Engine.kit); the engine's queue, candidates, back-off and
// records stay out of reach.
type kit struct {
	table   kitTable
	actor   Actor
	swapper Swapper // nil unless --datapath.mode=auto
	managed *Manager
	cfg     *Config
	log     *slog.Logger
	swaps   *atomic.Uint64 // swaps made
}

// verify waits up to d for the table to show the entry repaired, and
// says what it shows then.
func (kt *kit) verify(ctx context.Context, en *table.Entry, a *attempt, d time.Duration) Outcome {
	o, _ := kt.await(ctx, a.ch, en.Key, a.oldMAC, a.needMove, d, true)
	return o
}

// watch subscribes to the events of one entry while an action on it is
// verified; nobody subscribes between actions, so the table builds no
// events for the engine then. Call the returned func to stop.
func (kt *kit) watch(k table.Key) (<-chan table.Event, func()) {
	sub := kt.table.Events().SubscribeAs(table.SubscriberAction, 16, func(ev table.Event) bool {
		return ev.Ifindex == k.Ifindex && ev.IP == k.Addr
	})
	return sub.C(), sub.Close
}

// disputer returns a MAC that recent evidence (within table.ConflictHold)
// says claims the entry's IP instead of, or as well as, the entry's MAC:
// an ARP/NDP sighting, the source of the host's packets, or a conflict.
func disputer(en *table.Entry, now time.Time) net.HardwareAddr {
	for _, ev := range en.Evidence() {
		switch ev.Signal {
		case table.SignalARP, table.SignalSourceMAC, table.SignalConflict:
			if now.Sub(ev.At) < table.ConflictHold {
				return ev.MAC
			}
		}
	}
	return nil
}

// judgeAnswers reads the answers to a broadcast probe of a disputed entry:
// the entry's MAC and another answering is a conflict, and so are two
// other MACs; the entry's MAC alone is the host where the entry says,
// the MAC it was seen at another of its own (confirmed). ok is false
// when the table must tell: one other MAC answered (the kernel takes it:
// moved), or none did (recorded: nobody at the entry's MAC).
func (kt *kit) judgeAnswers(en *table.Entry, answered []net.HardwareAddr) (Outcome, bool) {
	now := time.Now()
	mine := en.HardwareAddr()
	var others []net.HardwareAddr
	fromMine := false
	for _, m := range answered {
		if string(m) == en.LLAddr {
			fromMine = true
		} else {
			others = append(others, m)
		}
	}
	switch {
	case fromMine && len(others) > 0:
		kt.table.Heard(en.Key, mine, now)
		kt.table.ObserveConflict(en.Key, mine, others[0], now)
		return OutcomeConflict, true
	case fromMine:
		// The claim did not answer: it sends from that MAC, it does not
		// answer for the IP there.
		kt.table.Heard(en.Key, mine, now)
		return OutcomeConfirmed, true
	case len(others) >= 2:
		kt.table.ObserveConflict(en.Key, others[0], others[1], now)
		return OutcomeConflict, true
	}
	if len(others) == 0 {
		kt.table.ProbeUnanswered(en.Key, en.LLAddr, now)
	}
	return "", false
}

// await waits for the entry to be repaired. done is false when the wait
// ran out and final is false (the caller has another step to try).
func (kt *kit) await(ctx context.Context, ch <-chan table.Event, k table.Key, oldMAC string, needMove bool, d time.Duration, final bool) (Outcome, bool) {
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		if o, ok := kt.judge(k, oldMAC, needMove); ok {
			return o, true
		}
		select {
		case <-ctx.Done():
			return OutcomeNoChange, true
		case <-ch:
		case <-t.C:
			if !final {
				return OutcomeNoChange, false
			}
			if o, ok := kt.judge(k, oldMAC, needMove); ok {
				return o, true
			}
			if cur, ok := kt.table.Lookup(k); ok && cur.State == table.StateFailed {
				return OutcomeFailed, true
			}
			return OutcomeNoChange, true
		}
	}
}

// repoint moves an entry neighwatch manages to mac, held pending
// meanwhile.
func (kt *kit) repoint(en *table.Entry, mac net.HardwareAddr) error {
	return kt.managed.holding(en.Key, func() error { return kt.actor.Repoint(en, mac) })
}

// awaitManaged waits until the table shows the entry managed by
// neighwatch.
func (kt *kit) awaitManaged(ctx context.Context, ch <-chan table.Event, k table.Key) Outcome {
	t := time.NewTimer(kt.cfg.KernelTimeout)
	defer t.Stop()
	for {
		if cur, ok := kt.table.Lookup(k); ok && cur.Owner() == table.OwnerNeighwatch {
			return OutcomeManaged
		}
		select {
		case <-ctx.Done():
			return OutcomeNoChange
		case <-ch:
		case <-t.C:
			return OutcomeFailed
		}
	}
}

// judge reads the entry's state: repaired, moved, gone, or not yet.
func (kt *kit) judge(k table.Key, oldMAC string, needMove bool) (Outcome, bool) {
	cur, ok := kt.table.Lookup(k)
	switch {
	case !ok:
		return OutcomeFlushed, true
	case cur.LLAddr != "" && cur.LLAddr != oldMAC && cur.State.Valid():
		return OutcomeMoved, true
	case needMove:
		return "", false
	case cur.State == table.StateReachable || cur.State == table.StatePermanent:
		return OutcomeFixed, true
	}
	return "", false
}

// askResult is how a round of unicast requests ended.
type askResult int

const (
	askSilent   askResult = iota // every request went unanswered
	askAnswered                  // an answer that counts came
	askFailed                    // a request could not be sent
	askStopped                   // ctx ended, or the entry changed meanwhile
)

// askUnicast sends up to ConfirmProbes unicast requests for probe's IP to
// probe's MAC, each listening a third of the verify timeout, until an
// answer counts or unchanged (given the entry as the table has it now)
// says the question no longer stands.
func (kt *kit) askUnicast(ctx context.Context, probe *table.Entry, counts func(net.HardwareAddr) bool,
	unchanged func(cur *table.Entry) bool) (askResult, []net.HardwareAddr, error) {
	listen := kt.cfg.VerifyTimeout / ConfirmProbes
	for range ConfirmProbes {
		answered, err := kt.actor.Probe(ctx, probe, 0, listen)
		if err != nil {
			return askFailed, nil, err
		}
		if ctx.Err() != nil {
			return askStopped, nil, nil
		}
		if slices.ContainsFunc(answered, counts) {
			return askAnswered, answered, nil
		}
		if cur, ok := kt.table.Lookup(probe.Key); !ok || !unchanged(&cur) {
			return askStopped, nil, nil
		}
	}
	return askSilent, nil, nil
}
