package table

import "unsafe"

// ent is an entry under the table's lock: its slot and its record,
// valid until the lock is released or the slot removed.
type ent struct {
	slot uint32
	*rec
}

func (s *store) ent(slot uint32) ent { return ent{slot, s.at(slot)} }

// hostGone reports whether the evidence says the host is not at the
// entry's MAC: a unicast probe to it went unanswered, or it stayed
// silent for the silence window after the host was seen at another MAC.
func (s *store) hostGone(le ent) bool {
	o := s.observed(le)
	return (o.ProbeUnansweredAt != 0 && s.macIs(le, o.ProbeMAC)) || (o.SuspectAt != 0 && o.silent)
}

// conflicted reports whether the entry's MAC is one of two that answered
// for its IP (while it is in a dynamic state: the kernel follows answers).
func (s *store) conflicted(le ent) bool {
	o := s.observed(le)
	return o.ConflictAt != 0 && le.macLen != 0 && (s.macIs(le, o.ConflictMACs[0]) || s.macIs(le, o.ConflictMACs[1])) &&
		le.state&(StateReachable|StateStale|StateDelay|StateProbe) != 0
}

// fill writes the record's entry into e, without its lladdr or its
// evidence.
func (s *store) fill(e *Entry, r *rec) {
	*e = Entry{
		Key:           r.key(),
		State:         r.state,
		Flags:         r.flags,
		FlagsExt:      uint32(r.flagsExt),
		Protocol:      r.protocol,
		Since:         s.clk.csNS(r.since),
		Confirm:       s.clk.ns(r.confirm),
		Used:          s.clk.ns(r.used),
		Transitions:   r.transitions,
		LLAddrChanges: uint32(r.llChanges),
		LLAddrSince:   s.clk.ns(r.llSince),
		class:         r.class(),
	}
}

// entry returns a copy of the record's entry that shares nothing with
// the table.
func (s *store) entry(slot uint32, r *rec) Entry {
	var e Entry
	s.fill(&e, r)
	e.LLAddr = s.lladdr(slot, r)
	if r.observed() {
		o := *s.obs[slot]
		e.obs = &o
	}
	return e
}

// view writes into e a view of the record, for a walk under the lock: its
// lladdr and evidence are the table's own, not copies, and change with
// it. Nothing is allocated.
func (s *store) view(e *Entry, slot uint32, r *rec) {
	s.fill(e, r)
	e.LLAddr = s.lladdrView(slot, r)
	if r.observed() {
		e.obs = s.obs[slot]
	}
}

// lladdrView returns a record's lladdr as the store's own bytes, valid
// under the table's lock until the record changes: the record's array,
// or the string the store holds for a long one. Nothing is allocated.
func (s *store) lladdrView(slot uint32, r *rec) string {
	switch r.macLen {
	case 0:
		return ""
	case longMAC:
		return s.longMACs[slot]
	}
	return unsafe.String(&r.mac[0], int(r.macLen))
}

// candidate reports whether the tracer watches the entry's own packets:
// STALE, or managed by neighwatch.
func (r *rec) candidate() bool { return r.state == StateStale || r.owner() == OwnerNeighwatch }

// owner is Entry.Owner of the record.
func (r *rec) owner() Owner {
	switch {
	case uint32(r.flagsExt)&FlagExtManaged == 0:
		return OwnerNone
	case r.protocol == ProtocolNeighwatch:
		return OwnerNeighwatch
	}
	return OwnerOther
}
