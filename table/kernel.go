package table

import (
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
