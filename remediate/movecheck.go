package remediate

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/neighwatch/neighwatch/table"
)

// A move check tells a hijack from a move. When the kernel points an
// entry at another MAC (an ARP reply, or a Neighbor Advertisement with
// the Override flag, past the entry's locktime), either the host moved
// and its old MAC is gone, or someone else claimed its address (a
// spoofer, or a duplicate address) and the old MAC still answers.
// Nothing else tells the two apart at the moment of change. The engine
// asks the old MAC, unicast, up to ConfirmProbes times, in dry-run and on
// (never in off, nor with Config.NoConfirm): an answer from it makes the
// entry a conflict, both MACs in its evidence; silence leaves it a move.
// A move between MACs the table knows as the host's own (a balance-tlb
// or -alb bond, ARP flux: seen with the host's address while the entry's
// MAC answered) is not checked, nor a move the kernel makes while one of
// the engine's strategies acts on the entry (its repair).

// MoveOutcome is what a move check found.
type MoveOutcome string

// Move check outcomes.
const (
	MoveAnswered   MoveOutcome = "answered"   // the old MAC still answers: two MACs claim the address, a conflict
	MoveUnanswered MoveOutcome = "unanswered" // the old MAC is silent: the host moved
	MoveFailed     MoveOutcome = "failed"     // the probe could not be sent
	MoveDropped    MoveOutcome = "dropped"    // the queue was full of checks of as much at stake or more: not checked (movequeue.go)
)

// MoveOutcomes lists them, for pre-created metric series.
func MoveOutcomes() []MoveOutcome {
	return []MoveOutcome{MoveAnswered, MoveUnanswered, MoveFailed, MoveDropped}
}

// moveCheck is the check of one entry's moves since its last check.
type moveCheck struct {
	key   table.Key
	old   string // raw MAC before the first of the moves: the one asked
	now   string // raw MAC after the last
	stake stake
	// queued is when the first of the moves was queued (Unix ns): a
	// check waits from then, whatever moves are folded into it.
	queued int64
}

// isMove reports whether ev is the kernel pointing a known entry at
// another MAC.
func isMove(ev table.Event) bool {
	return ev.Kind == table.KindTransition && !ev.Created && !ev.Deleted &&
		len(ev.OldLLAddr) > 0 && len(ev.LLAddr) > 0 && !bytes.Equal(ev.OldLLAddr, ev.LLAddr)
}

// moveChecks is the engine's checks of moves: the queue they wait in
// (movequeue.go), the watcher that fills it, and what a check uses,
// each named: it holds no engine.
type moveChecks struct {
	table  moveTable
	acting *acting // the keys a strategy acts on: their moves are not checked
	limits *limits // the probe rates every probe waits for
	c      *counters
	log    *slog.Logger
	// allowed is what a check may do under the mode and configuration
	// in force when it asks: the kit to probe with and the policy the
	// entry must meet; false when nothing may be sent (no actor,
	// confirmations off).
	allowed func() (*kit, Policy, bool)
	q       *moveQueue
	// watched is closed once Run subscribed to the table's moves.
	watched chan struct{}
}

// watch queues a check of every move the table announces until ctx
// ends, from a hook on the table's events: the check is queued as the
// table publishes the move, so none is missed, as a subscriber whose
// buffer is full would miss one.
func (m *moveChecks) watch(ctx context.Context) {
	// A move the engine's own strategy makes is not checked: it acted
	// because the old MAC was found silent (or for a move the evidence
	// showed), and it is still acting when the kernel's move is
	// published (it waits to see it).
	unhook := m.table.Events().Hook(func(ev table.Event) {
		if isMove(ev) && !m.acting.has(table.Key{Ifindex: ev.Ifindex, Addr: ev.IP}) {
			m.q.add(&ev)
		}
	})
	defer unhook()
	select {
	case <-m.watched:
	default:
		close(m.watched) // the first Run: tests wait for it
	}
	<-ctx.Done()
}

// next takes the waiting move check of the highest stake, and checks it.
func (m *moveChecks) next(ctx context.Context) {
	if mc, ok := m.q.take(); ok {
		m.check(ctx, mc)
	}
}

// checkable returns the moved entry as the table has it now, the kit
// to ask with under the configuration in force now, and whether its old
// MAC may be asked under that mode and configuration: it has not moved
// back to it.
func (m *moveChecks) checkable(mc moveCheck) (table.Entry, *kit, bool) {
	k, p, ok := m.allowed()
	if !ok {
		return table.Entry{}, nil, false
	}
	en, ok := m.table.Lookup(mc.key)
	return en, k, ok && en.LLAddr != mc.old && MoveCheckable(&en, m.table.LinkName(mc.key.Ifindex), p)
}

// check asks a moved entry's old MAC whether it still holds the IP.
func (m *moveChecks) check(ctx context.Context, mc moveCheck) {
	en, _, ok := m.checkable(mc)
	if !ok {
		return
	}
	for _, h := range en.OtherMACs() {
		if h.MAC == mc.old || h.MAC == mc.now {
			return // the host's own MACs: a bond or ARP flux moved it
		}
	}
	if err := m.limits.wait(ctx, mc.key.Ifindex); err != nil {
		return
	}
	// Asked again after the wait for a token: off sends nothing, even
	// for a check that was waiting when it was switched.
	var asker *kit
	if en, asker, ok = m.checkable(mc); !ok {
		return
	}
	ifname := m.table.LinkName(mc.key.Ifindex)
	old := net.HardwareAddr(mc.old)
	probe := en
	probe.LLAddr = mc.old
	// Only the old MAC's own answer counts: the new MAC (the host
	// announcing its move, or the spoofer claiming again) says nothing
	// about whether the old one still holds the IP.
	// A move on to a third MAC meanwhile changes nothing asked: whether
	// the old MAC still holds the address. A move back to it ends the
	// check.
	res, _, err := asker.askUnicast(ctx, &probe, func(m net.HardwareAddr) bool { return bytes.Equal(m, old) }, func(cur *table.Entry) bool {
		return cur.LLAddr != mc.old
	})
	switch res {
	case askFailed:
		m.c.moveChecked(MoveFailed)
		m.log.Warn("move check not sent", "interface", ifname, "ip", mc.key.Addr, "err", err)
		return
	case askStopped:
		return
	case askAnswered:
		// The conflict is between the old MAC and the one the entry
		// pointed at when it was asked (the last of the moves, or one
		// since): the answer may have moved it back.
		now := net.HardwareAddr(en.LLAddr)
		m.table.ReportConflict(mc.key, old, now, time.Now(), table.CauseRemediate,
			"the kernel moved the entry from "+old.String()+" to "+now.String()+
				", and "+old.String()+" still answers for the address: a spoofer or a duplicate address")
		m.c.moveChecked(MoveAnswered)
		m.log.Warn("an entry moved, and its old MAC still answers for the address: a spoofer or a duplicate address",
			"interface", ifname, "ip", mc.key.Addr, "lladdr", now.String(), "old_lladdr", old.String())
		return
	}
	m.c.moveChecked(MoveUnanswered)
	m.log.Debug("an entry moved and its old MAC is silent: the host moved", "interface", ifname, "ip", mc.key.Addr,
		"lladdr", net.HardwareAddr(mc.now).String(), "old_lladdr", old.String(), "probes", ConfirmProbes)
}

// acting holds the keys a strategy is acting on. The move watcher's
// filter reads it while the table publishes, under the table's lock: its
// mutex is a leaf, held for nothing but the map.
type acting struct {
	mu   sync.Mutex
	keys map[table.Key]int
}

// mark marks a key as one a strategy acts on, until the function it
// returns is called. That function first calls barrier (a lookup through
// the table): the table publishes under its lock, so a move still being
// published when the strategy returned has been filtered, with the key
// marked, by the time the mark goes.
func (a *acting) mark(k table.Key, barrier func()) func() {
	a.mu.Lock()
	a.keys[k]++
	a.mu.Unlock()
	return func() {
		barrier()
		a.mu.Lock()
		if a.keys[k]--; a.keys[k] <= 0 {
			delete(a.keys, k)
		}
		a.mu.Unlock()
	}
}

// has reports whether a strategy is acting on k.
func (a *acting) has(k table.Key) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.keys[k] > 0
}
