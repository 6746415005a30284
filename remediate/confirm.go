package remediate

import (
	"context"
	"net"
	"time"

	"github.com/neighwatch/neighwatch/table"
)

// A confirmation answers a suspicion before it pages: the entry's host
// was seen at another MAC, which a host with two MACs does (a
// balance-tlb or -alb bond, ARP flux, a router relaying it) as well as a
// host that moved. The engine asks the entry's own MAC, as the kernel
// does for a STALE entry in use: unicast ARP requests (or Neighbor
// Solicitations) to it, nothing broadcast, nothing to another MAC, no
// entry changed. An answer explains the sighting (the table remembers
// the other MAC as the host's); none makes the entry stuck once it is
// stale-long. It runs in dry-run and on, unless Config.NoConfirm.

// ConfirmProbes is how many unicast requests one confirmation sends at
// most, a third of the verify timeout apart: what the kernel's
// ucast_probes sends before it gives an entry up.
const ConfirmProbes = 3

// ConfirmOutcome is what a confirmation found.
type ConfirmOutcome string

// Confirmation outcomes.
const (
	ConfirmAnswered   ConfirmOutcome = "answered"   // the entry's MAC answered: the host has more than one MAC
	ConfirmUnanswered ConfirmOutcome = "unanswered" // nothing answered at the entry's MAC: the host is not there
	ConfirmFailed     ConfirmOutcome = "failed"     // the probe could not be sent
)

// ConfirmOutcomes lists them, for pre-created metric series.
func ConfirmOutcomes() []ConfirmOutcome {
	return []ConfirmOutcome{ConfirmAnswered, ConfirmUnanswered, ConfirmFailed}
}

// confirmation is what the engine remembers of a suspect entry.
type confirmation struct {
	suspectAt int64 // the suspicion it was queued for
	pending   bool
	seen      uint32 // last sweep that saw it
}

// queueConfirmations queues the suspects that may get a confirmation and
// have not had one for their suspicion. The caller holds e.mu.
func (e *Engine) queueConfirmations(pol Policy, sweep uint32) {
	if e.conf().NoConfirm {
		return
	}
	// The room in the queue, taken as suspects are picked: only the
	// sweep sends, so the sends below never block (with e.mu held, a
	// blocked send would wait for workers that wait for e.mu).
	room := cap(e.confirmQ) - len(e.confirmQ)
	picked := e.table.Suspects(func(en *table.Entry, ifname string) bool {
		if !Confirmable(en, ifname, pol) {
			return false
		}
		if r := e.cands[en.Key]; r != nil && r.pending {
			return false // a repair is on it
		}
		at := en.SuspectSince().UnixNano()
		c := e.confirms[en.Key]
		if c == nil {
			c = &confirmation{}
			e.confirms[en.Key] = c
		}
		c.seen = sweep
		if c.pending || c.suspectAt == at || room == 0 {
			return false
		}
		room--
		c.suspectAt, c.pending = at, true
		return true
	})
	for k, c := range e.confirms {
		if c.seen != sweep && !c.pending {
			delete(e.confirms, k)
		}
	}
	for i := range picked {
		e.confirmQ <- picked[i].Key // room was taken above
	}
}

// confirmable returns the entry of k as the table has it now, and
// whether it may get a confirmation under the mode and configuration in
// force now.
func (e *Engine) confirmable(k table.Key) (table.Entry, bool) {
	if e.conf().NoConfirm {
		return table.Entry{}, false
	}
	en, ok := e.table.Lookup(k)
	return en, ok && Confirmable(&en, e.table.LinkName(k.Ifindex), e.policy(e.Mode()))
}

// confirm sends up to ConfirmProbes unicast requests to a suspect
// entry's MAC and tells the table whether it answered.
func (e *Engine) confirm(ctx context.Context, k table.Key) {
	defer func() {
		e.mu.Lock()
		if c := e.confirms[k]; c != nil {
			c.pending = false
		}
		e.mu.Unlock()
	}()
	en, ok := e.confirmable(k)
	if !ok {
		return
	}
	e.mu.Lock()
	r := e.cands[k]
	repairing := r != nil && r.pending
	e.mu.Unlock()
	if repairing {
		return
	}
	if err := e.limits.wait(ctx, k.Ifindex); err != nil {
		return
	}
	// Asked again after the wait for a token, which may be long: off
	// (or --remediation.confirm=false) sends nothing, even for a
	// confirmation that was waiting when it was switched.
	if cur, ok := e.confirmable(k); !ok || cur.LLAddr != en.LLAddr {
		return
	}
	// Whoever answers a request sent to the entry's MAC received it there
	// (a host that moved drops frames to its old MAC).
	res, answered, err := e.kit().askUnicast(ctx, &en, func(net.HardwareAddr) bool { return true }, func(cur *table.Entry) bool {
		return cur.LLAddr == en.LLAddr && cur.Suspect() // else its MAC was heard meanwhile, or it moved
	})
	switch res {
	case askFailed:
		e.c.confirmed(ConfirmFailed)
		e.log.Warn("confirmation probe not sent", "interface", e.table.LinkName(k.Ifindex), "ip", k.Addr, "err", err)
		return
	case askStopped:
		return
	case askAnswered:
		// When ARP or NDP showed the IP at the other MAC, two MACs answer
		// for it: a conflict (a duplicate address or a spoofer), not a
		// host with two MACs.
		now := time.Now()
		e.table.Heard(k, en.HardwareAddr(), now)
		if o := en.Observed(); o.Mismatch {
			e.table.ObserveConflict(k, en.HardwareAddr(), net.HardwareAddr(o.SeenMAC), now)
		}
		e.c.confirmed(ConfirmAnswered)
		e.log.Debug("confirmation answered: the host has more than one MAC", "interface", e.table.LinkName(k.Ifindex),
			"ip", k.Addr, "lladdr", en.HardwareAddr().String(), "seen_at", macString(en.DisputingMAC()), "answers", len(answered))
		return
	}
	e.table.ProbeUnanswered(k, en.LLAddr, time.Now())
	e.c.confirmed(ConfirmUnanswered)
	e.sweepSoon() // stuck now, if stale-long: repaired without waiting for the next sweep
	e.log.Info("confirmation unanswered: nothing at the entry's MAC", "interface", e.table.LinkName(k.Ifindex),
		"ip", k.Addr, "lladdr", en.HardwareAddr().String(), "seen_at", macString(en.DisputingMAC()), "probes", ConfirmProbes)
}
