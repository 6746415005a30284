package table

import "unsafe"

// ent is an entry under the table's lock: its slot and its record,
// valid until the lock is released or the slot removed.
type ent struct {
	slot uint32
	*rec
}

func (t *core) ent(slot uint32) ent { return ent{slot, t.st.at(slot)} }

// candidate reports whether the tracer watches the entry's own packets:
// STALE, or managed by neighwatch.
func (r *rec) candidate() bool { return r.state == StateStale || r.owner() == OwnerNeighwatch }

// owner is Entry.Owner of the record.
func (r *rec) owner() Owner {
	switch {
	case r.flagsExt&FlagExtManaged == 0:
		return OwnerNone
	case r.protocol == ProtocolNeighwatch:
		return OwnerNeighwatch
	}
	return OwnerOther
}

// macIs reports whether the entry's lladdr is mac (raw bytes).
func (t *core) macIs(e ent, mac string) bool { return t.st.macIs(e.slot, e.rec, mac) }

// hostGone reports whether the evidence says the host is not at the
// entry's MAC: a unicast probe to it went unanswered, or it stayed
// silent for the silence window after the host was seen at another MAC.
func (t *core) hostGone(e ent) bool {
	o := t.st.o(e.rec)
	return (o.ProbeUnansweredAt != 0 && t.macIs(e, o.ProbeMAC)) || (o.SuspectAt != 0 && o.silent)
}

// conflicted reports whether the entry's MAC is one of two that answered
// for its IP (while it is in a dynamic state: the kernel follows answers).
func (t *core) conflicted(e ent) bool {
	o := t.st.o(e.rec)
	return o.ConflictAt != 0 && e.macLen != 0 && (t.macIs(e, o.ConflictMACs[0]) || t.macIs(e, o.ConflictMACs[1])) &&
		e.state&(StateReachable|StateStale|StateDelay|StateProbe) != 0
}

// fill writes the record's entry into e, without its evidence.
func (t *core) fill(e *Entry, slot uint32, r *rec) {
	*e = Entry{
		Key:           r.key(),
		State:         r.state,
		Flags:         r.flags,
		FlagsExt:      r.flagsExt,
		Protocol:      r.protocol,
		Since:         r.since,
		Confirm:       r.confirm,
		Used:          r.used,
		Transitions:   r.transitions,
		LLAddrChanges: r.llChanges,
		LLAddrSince:   r.llSince,
		class:         r.class,
	}
	e.LLAddr = t.st.lladdr(slot, r)
}

// entry returns a copy of the record's entry that shares nothing with
// the table.
func (t *core) entry(slot uint32, r *rec) Entry {
	var e Entry
	t.fill(&e, slot, r)
	if r.obs != 0 {
		o := *t.st.obs[r.obs-1]
		e.obs = &o
	}
	return e
}

// view writes into e a view of the record, for a walk under the lock: its
// lladdr and evidence are the table's own, not copies, and change with
// it. Nothing is allocated.
func (t *core) view(e *Entry, slot uint32, r *rec) {
	t.fill(e, slot, r)
	if r.macLen != longMAC && r.macLen != 0 {
		e.LLAddr = unsafe.String(&r.mac[0], int(r.macLen))
	}
	if r.obs != 0 {
		e.obs = t.st.obs[r.obs-1]
	}
}
