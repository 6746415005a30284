package table

import (
	"math"
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
	t.dumping = true
	t.mu.Unlock()
}

// EndSync deletes the entries the last dump did not confirm and returns
// how many it deleted.
func (t Kernel) EndSync() int {
	now := t.now().UnixNano()
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	t.st.each(func(slot uint32, r *rec) bool {
		if r.gen != t.gen {
			t.remove(ent{slot, r}, CauseResync, now)
			n++
		}
		return true
	})
	t.loading, t.dumping = false, false
	return n
}

// DeleteLink removes every entry of an interface and forgets the interface,
// so its series leave the metrics.
func (t Kernel) DeleteLink(ifindex int32, cause Cause) int {
	now := t.now().UnixNano()
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	t.st.each(func(slot uint32, r *rec) bool {
		if r.ifindex == ifindex {
			t.remove(ent{slot, r}, cause, now)
			n++
		}
		return true
	})
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
	slot, r, ok := t.st.get(k)
	u := Update{Ifindex: k.Ifindex, Family: FamilyOf(k.Addr), Addr: k.Addr, State: to}
	switch {
	case !ok && from == StateNone:
	case !ok || r.state != from:
		return false
	default:
		u.Flags, u.FlagsExt, u.Protocol = r.flags, uint32(r.flagsExt), r.protocol
		if to.Valid() {
			u.LLAddr = []byte(t.st.lladdr(slot, r))
		}
	}
	t.apply(&u, CauseTracepoint, now)
	return true
}

// apply applies one update. The caller holds t.mu.
func (t *core) apply(u *Update, cause Cause, now int64) {
	k := Key{Ifindex: u.Ifindex, Addr: u.Addr}
	// Dump replies come in the order the store holds them (getInOrder);
	// notifications do not.
	var (
		slot uint32
		r    *rec
		ok   bool
	)
	if t.dumping {
		slot, r, ok = t.st.getInOrder(k)
	} else {
		slot, r, ok = t.st.get(k)
	}
	if u.Delete {
		if ok {
			t.remove(ent{slot, r}, cause, now)
		}
		return
	}
	f := FamilyOf(u.Addr).idx()
	if !ok {
		slot, r = t.st.insert(k)
		e := ent{slot, r}
		t.st.setLLAddr(slot, r, u.LLAddr)
		r.state, r.flags, r.flagsExt, r.protocol = u.State, u.Flags, uint8(u.FlagsExt), u.Protocol
		sn := since(u, now)
		r.since, r.llSince = t.st.cs(sn), t.st.ms(sn)
		r.gen = t.gen
		t.st.cacheTimes(r, u, now)
		t.attach(e, now)
		if r.candidate() {
			t.candChanged(k)
		}
		if !t.loading {
			t.trans[f][idxAbsent][r.state.idx()]++
		}
		if t.publishing() {
			ev := t.event(e, KindTransition, cause, now)
			ev.Created = true
			ev.OldLLAddr = nil
			t.events.Publish(ev)
		}
		return
	}
	e := ent{slot, r}
	r.gen = t.gen
	t.st.cacheTimes(r, u, now)
	stateChanged := r.state != u.State
	llChanged := !t.st.macIs(ent{slot, r}, string(u.LLAddr))
	if !stateChanged && !llChanged && r.flags == u.Flags && r.flagsExt == uint8(u.FlagsExt) && r.protocol == u.Protocol {
		return
	}
	oldState := r.state
	var oldLL net.HardwareAddr
	if t.publishing() {
		oldLL = net.HardwareAddr(t.st.lladdr(slot, r))
	}
	wasCand, oldOwner := r.candidate(), r.owner()
	t.detach(e)
	if stateChanged {
		r.state = u.State
		r.since = t.st.cs(since(u, now))
		r.transitions++
		if r.observed() {
			o := t.st.o(e)
			o.BypassInState = 0
			o.ProbeUnansweredAt, o.ProbeMAC = 0, ""
		}
		t.trans[f][oldState.idx()][u.State.idx()]++
	}
	if llChanged {
		// The MAC it leaves, copied before the new one overwrites it.
		var prev string
		if r.macLen != 0 && r.observed() {
			prev = string(t.st.lladdr(slot, r))
		}
		// Entries in INCOMPLETE or FAILED carry no lladdr; only a move from
		// one address to another counts as a change.
		if r.macLen != 0 && len(u.LLAddr) > 0 {
			if r.llChanges < math.MaxUint16 {
				r.llChanges++
			}
			t.iface(r.ifindex).lladdrChanges[f]++
		}
		t.st.setLLAddr(slot, r, u.LLAddr)
		// A new MAC starts the state afresh, as the kernel's "updated"
		// does: evidence gathered against the old MAC (sightings of the
		// host's packets, bypass traffic, probes) says nothing about it.
		r.since = t.st.cs(since(u, now))
		r.llSince = t.st.ms(now) // seen changing: no older than this message
		if r.observed() {
			o := t.st.o(e)
			o.SourceMAC, o.SourceAt, o.SourcePackets = "", 0, 0
			o.BypassInState = 0
			o.ProbeUnansweredAt, o.ProbeMAC = 0, ""
			// Whether the new MAC answers is not known yet, and a
			// suspicion against the old one says nothing of it; the
			// host's other MACs stay known, but for the new one. A move
			// to one of them is the host's own (a bond, ARP flux): the
			// old MAC takes its place among them.
			o.OwnAt = 0
			t.unsuspect(e)
			if h := o.hostMAC(string(u.LLAddr)); h != nil {
				*h = HostMAC{}
				if prev != "" && len(u.LLAddr) > 0 && o.hostMAC(prev) == nil {
					*h = HostMAC{MAC: prev, At: now}
				}
				o.compactHostMACs()
			}
		}
	}
	r.flags, r.flagsExt, r.protocol = u.Flags, uint8(u.FlagsExt), u.Protocol
	if r.observed() {
		o := t.st.o(e)
		o.Mismatch, o.SourceMismatch = t.mismatch(e)
	}
	t.attach(e, now)
	if (wasCand || r.candidate()) && (wasCand != r.candidate() || llChanged || oldOwner != r.owner()) {
		t.candChanged(k)
	}
	if t.publishing() {
		ev := t.event(e, KindTransition, cause, now)
		ev.From = oldState
		ev.OldLLAddr = oldLL
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

func (s *store) cacheTimes(r *rec, u *Update, now int64) {
	if !u.HasCacheInfo {
		return
	}
	r.confirm = s.ms(now - int64(u.ConfirmedAge))
	r.used = s.ms(now - int64(u.UsedAge))
}

// remove deletes an entry, after the event that says so is built.
func (t *core) remove(e ent, cause Cause, now int64) {
	if e.candidate() {
		t.candChanged(e.key())
	}
	t.detach(e)
	delete(t.conflicts, e.slot)
	delete(t.suspects, e.slot)
	t.trans[e.family().idx()][e.state.idx()][idxAbsent]++
	if t.publishing() {
		ev := t.event(e, KindTransition, cause, now)
		ev.Deleted = true
		t.events.Publish(ev)
	}
	t.st.remove(e.slot)
}
