package table

import (
	"net"
	"time"
)

// SetLinkName records the name of an interface, for events and metrics.
func (t Kernel) SetLinkName(ifindex int32, name string) {
	t.mu.Lock()
	t.iface(ifindex).name = name
	t.mu.Unlock()
}

// Apply applies decoded netlink updates with the given cause.
func (t Kernel) Apply(cause Cause, us ...Update) {
	now := t.now().UnixNano()
	t.mu.Lock()
	for i := range us {
		t.apply(&us[i], cause, now)
	}
	t.mu.Unlock()
}

// BeginSync starts a full dump: entries the dump (or updates during it) do
// not confirm are deleted by EndSync. The initial sync publishes no events
// and counts no transitions.
func (t Kernel) BeginSync(initial bool) {
	t.mu.Lock()
	t.gen++
	t.loading = initial
	t.mu.Unlock()
}

// EndSync deletes the entries the last dump did not confirm and returns
// how many it deleted.
func (t Kernel) EndSync() int {
	now := t.now().UnixNano()
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, e := range t.entries {
		if e.gen != t.gen {
			t.remove(e, CauseResync, now)
			n++
		}
	}
	t.loading = false
	return n
}

// DeleteLink removes every entry of an interface and forgets the interface,
// so its series leave the metrics.
func (t Kernel) DeleteLink(ifindex int32, cause Cause) int {
	now := t.now().UnixNano()
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for k, e := range t.entries {
		if k.Ifindex == ifindex {
			t.remove(e, cause, now)
			n++
		}
	}
	delete(t.ifaces, ifindex)
	return n
}

// ApplyTracepoint applies a transition seen by the neighbour tracepoints
// that netlink never reports (STALE->DELAY and ->INCOMPLETE on transmit,
// REACHABLE->DELAY in the timer). It applies only if the entry is still in
// the from state, so a transition that netlink has already overtaken is
// dropped. It reports whether it applied.
func (t Kernel) ApplyTracepoint(k Key, from, to State, when time.Time) bool {
	now := when.UnixNano()
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.entries[k]
	u := Update{Ifindex: k.Ifindex, Family: FamilyOf(k.Addr), Addr: k.Addr, State: to}
	switch {
	case e == nil && from == StateNone:
	case e == nil || e.State != from:
		return false
	default:
		u.Flags, u.FlagsExt, u.Protocol = e.Flags, e.FlagsExt, e.Protocol
		if to.Valid() {
			u.LLAddr = []byte(e.LLAddr)
		}
	}
	t.apply(&u, CauseTracepoint, now)
	return true
}

// apply applies one update. The caller holds t.mu.
func (t *core) apply(u *Update, cause Cause, now int64) {
	k := Key{Ifindex: u.Ifindex, Addr: u.Addr}
	e := t.entries[k]
	if u.Delete {
		if e != nil {
			t.remove(e, cause, now)
		}
		return
	}
	f := FamilyOf(u.Addr).idx()
	if e == nil {
		e = &Entry{
			Key:      k,
			LLAddr:   string(u.LLAddr),
			State:    u.State,
			Flags:    u.Flags,
			FlagsExt: u.FlagsExt,
			Protocol: u.Protocol,
			Since:    since(u, now),
			heapIdx:  -1,
			gen:      t.gen,
		}
		e.LLAddrSince = e.Since
		t.cacheTimes(e, u, now)
		t.entries[k] = e
		t.attach(e, now)
		if e.candidate() {
			t.candChanged(k)
		}
		if !t.loading {
			t.trans[f][idxAbsent][e.State.idx()]++
		}
		if t.publishing() {
			ev := t.event(e, KindTransition, cause, now)
			ev.Created = true
			ev.OldLLAddr = nil
			t.events.Publish(ev)
		}
		return
	}
	e.gen = t.gen
	t.cacheTimes(e, u, now)
	stateChanged := e.State != u.State
	llChanged := e.LLAddr != string(u.LLAddr)
	if !stateChanged && !llChanged && e.Flags == u.Flags && e.FlagsExt == u.FlagsExt && e.Protocol == u.Protocol {
		return
	}
	oldState, oldLL := e.State, e.LLAddr
	wasCand, oldOwner := e.candidate(), e.Owner()
	t.detach(e)
	if stateChanged {
		e.State = u.State
		e.Since = since(u, now)
		e.Transitions++
		if o := e.obs; o != nil {
			o.BypassInState = 0
			o.ProbeUnansweredAt, o.ProbeMAC = 0, ""
		}
		t.trans[f][oldState.idx()][u.State.idx()]++
	}
	if llChanged {
		// Entries in INCOMPLETE or FAILED carry no lladdr; only a move from
		// one address to another counts as a change.
		if e.LLAddr != "" && len(u.LLAddr) > 0 {
			e.LLAddrChanges++
			t.iface(e.Ifindex).lladdrChanges[f]++
		}
		e.LLAddr = string(u.LLAddr)
		// A new MAC starts the state afresh, as the kernel's "updated"
		// does: evidence gathered against the old MAC (sightings of the
		// host's packets, bypass traffic, probes) says nothing about it.
		e.Since = since(u, now)
		e.LLAddrSince = now // seen changing: no older than this message
		if o := e.obs; o != nil {
			o.SourceMAC, o.SourceAt, o.SourcePackets = "", 0, 0
			o.BypassInState = 0
			o.ProbeUnansweredAt, o.ProbeMAC = 0, ""
			// Whether the new MAC answers is not known yet, and a
			// suspicion against the old one says nothing of it; the
			// host's other MACs stay known, but for the new one.
			o.OwnAt = 0
			t.unsuspect(e)
			if h := o.hostMAC(e.LLAddr); h != nil {
				*h = HostMAC{}
				o.compactHostMACs()
			}
		}
	}
	e.Flags, e.FlagsExt, e.Protocol = u.Flags, u.FlagsExt, u.Protocol
	if o := e.obs; o != nil {
		o.Mismatch, o.SourceMismatch = mismatch(e)
	}
	t.attach(e, now)
	if (wasCand || e.candidate()) && (wasCand != e.candidate() || llChanged || oldOwner != e.Owner()) {
		t.candChanged(k)
	}
	if t.publishing() {
		ev := t.event(e, KindTransition, cause, now)
		ev.From = oldState
		ev.OldLLAddr = net.HardwareAddr(oldLL)
		t.events.Publish(ev)
	}
}

// since converts a cacheinfo age to the time the state began.
func since(u *Update, now int64) int64 {
	if !u.HasCacheInfo {
		return now
	}
	return now - int64(u.UpdatedAge)
}

func (t *core) cacheTimes(e *Entry, u *Update, now int64) {
	if !u.HasCacheInfo {
		return
	}
	e.Confirm = now - int64(u.ConfirmedAge)
	e.Used = now - int64(u.UsedAge)
}

func (t *core) remove(e *Entry, cause Cause, now int64) {
	if e.candidate() {
		t.candChanged(e.Key)
	}
	t.detach(e)
	delete(t.entries, e.Key)
	delete(t.conflicts, e.Key)
	delete(t.suspects, e.Key)
	t.trans[e.Family().idx()][e.State.idx()][idxAbsent]++
	if t.publishing() {
		ev := t.event(e, KindTransition, cause, now)
		ev.Deleted = true
		t.events.Publish(ev)
	}
}
