package table

import (
	"math"
	"net"
	"net/netip"
	"strconv"
	"time"
	"unsafe"
)

// Update is one kernel neighbour message (RTM_NEWNEIGH or RTM_DELNEIGH)
// after decoding: the entry's whole state as the kernel sent it. Dump
// replies and notifications are both Updates.
type Update struct {
	Delete   bool
	Family   Family
	Ifindex  int32
	State    State
	Flags    uint8  // ndm_flags
	FlagsExt uint32 // NDA_FLAGS_EXT
	Protocol uint8  // NDA_PROTOCOL: who made the entry (0 unless set)
	Addr     netip.Addr
	LLAddr   []byte // may alias the message buffer; the table copies it

	// HasCacheInfo says whether the message carried NDA_CACHEINFO. The
	// ages are how long before the message the entry was last confirmed,
	// used by kernel output, and updated (its last state change).
	HasCacheInfo                      bool
	ConfirmedAge, UsedAge, UpdatedAge time.Duration
}

// The path of one update, top to bottom: apply finds the entry in the
// store and removes, creates or changes it; each ends by classifying the
// entry (attach, after detach for a change), noting a change of the
// tracer's candidates, and publishing the event. Every write to the
// table (the kernel's, a sighting's, the classifier's) goes through
// detach and attach below, which keep the aggregates and the classes.

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
	switch {
	case u.Delete && ok:
		t.remove(ent{slot, r}, cause, now)
	case u.Delete:
	case !ok:
		t.create(k, u, cause, now)
	default:
		t.change(ent{slot, r}, u, cause, now)
	}
}

// create stores a new entry, classifies it and says so.
func (t *core) create(k Key, u *Update, cause Cause, now int64) {
	slot, r := t.st.insert(k)
	le := ent{slot, r}
	t.st.setLLAddr(slot, r, u.LLAddr)
	r.state, r.flags, r.flagsExt, r.protocol = u.State, u.Flags, uint8(u.FlagsExt), u.Protocol
	sn := since(u, now)
	r.since, r.llSince = t.st.clk.cs(sn), t.st.clk.ms(sn)
	r.gen = t.gen
	r.cacheTimes(&t.st.clk, u, now)
	t.attach(le, now)
	if r.candidate() {
		t.candChanged(k)
	}
	if !t.loading {
		t.trans[FamilyOf(u.Addr).idx()][idxAbsent][r.state.idx()]++
	}
	if t.publishing() {
		ev := t.event(le, KindTransition, cause, now)
		ev.Created = true
		ev.OldLLAddr = nil
		t.events.Publish(ev)
	}
}

// change applies an update to a stored entry: its state, its MAC, its
// flags; then classifies it again and says what changed.
func (t *core) change(le ent, u *Update, cause Cause, now int64) {
	r := le.rec
	r.gen = t.gen
	r.cacheTimes(&t.st.clk, u, now)
	stateChanged := r.state != u.State
	llChanged := !t.st.macIs(le, string(u.LLAddr))
	if !stateChanged && !llChanged && r.flags == u.Flags && r.flagsExt == uint8(u.FlagsExt) && r.protocol == u.Protocol {
		return
	}
	oldState := r.state
	var (
		oldLL    net.HardwareAddr
		oldSince int64
		oldHeard int64
	)
	if t.publishing() {
		oldLL = net.HardwareAddr(t.st.lladdr(le.slot, r))
		oldSince = t.st.clk.ns(r.llSince)
		if r.observed() {
			oldHeard = t.st.observed(le).SpokeAt // cleared when the MAC changes
		}
	}
	wasCand, oldOwner := r.candidate(), r.owner()
	t.detach(le)
	if stateChanged {
		t.changeState(le, u, now)
	}
	if llChanged {
		t.changeMAC(le, u, now)
	}
	r.flags, r.flagsExt, r.protocol = u.Flags, uint8(u.FlagsExt), u.Protocol
	if r.observed() {
		o := t.st.observed(le)
		o.Mismatch, o.SourceMismatch = t.mismatch(le)
	}
	t.attach(le, now)
	if (wasCand || r.candidate()) && (wasCand != r.candidate() || llChanged || oldOwner != r.owner()) {
		t.candChanged(le.key())
	}
	if t.publishing() {
		ev := t.event(le, KindTransition, cause, now)
		ev.From = oldState
		ev.OldLLAddr = oldLL
		if llChanged {
			ev.Moves, ev.OldLLAddrSince, ev.LastUsed, ev.OldHeard = uint32(r.llChanges), oldSince, t.lastUsed(le), oldHeard
		}
		t.events.Publish(ev)
	}
}

// lastUsed is when traffic last used the entry, as the table knows:
// kernel output (NDA_CACHEINFO's used) or bypass traffic the tracer
// counted, the later; 0 when neither is known.
func (t *core) lastUsed(le ent) int64 {
	used := t.st.clk.ns(le.used)
	if le.observed() {
		used = max(used, t.st.observed(le).LastBypass)
	}
	return used
}

// changeState moves an entry to the update's state: the evidence
// gathered in the old state (bypass traffic, an unanswered probe) goes.
func (t *core) changeState(le ent, u *Update, now int64) {
	r := le.rec
	t.trans[FamilyOf(u.Addr).idx()][r.state.idx()][u.State.idx()]++
	r.state = u.State
	r.since = t.st.clk.cs(since(u, now))
	r.transitions++
	if r.observed() {
		o := t.st.observed(le)
		o.BypassInState = 0
		o.ProbeUnansweredAt, o.ProbeMAC = 0, ""
	}
}

// changeMAC points an entry at the update's MAC. A new MAC starts the
// state afresh, as the kernel's "updated" does: evidence gathered
// against the old MAC (sightings of the host's packets, bypass traffic,
// probes) says nothing about it.
func (t *core) changeMAC(le ent, u *Update, now int64) {
	r := le.rec
	// The MAC it leaves, copied before the new one overwrites it.
	var prev string
	if r.macLen != 0 && r.observed() {
		prev = string(t.st.lladdr(le.slot, r))
	}
	// Entries in INCOMPLETE or FAILED carry no lladdr; only a move from
	// one address to another counts as a change.
	if r.macLen != 0 && len(u.LLAddr) > 0 {
		if r.llChanges < math.MaxUint16 {
			r.llChanges++
		}
		t.iface(r.ifindex).lladdrChanges[FamilyOf(u.Addr).idx()]++
	}
	t.st.setLLAddr(le.slot, r, u.LLAddr)
	r.since = t.st.clk.cs(since(u, now))
	r.llSince = t.st.clk.ms(now) // seen changing: no older than this message
	if !r.observed() {
		return
	}
	o := t.st.observed(le)
	o.SourceMAC, o.SourceAt, o.SourcePackets = "", 0, 0
	o.BypassInState = 0
	o.ProbeUnansweredAt, o.ProbeMAC = 0, ""
	// Whether the new MAC answers is not known yet, and a suspicion
	// against the old one says nothing of it; the host's other MACs stay
	// known, but for the new one. A move to one of them is the host's
	// own (a bond, ARP flux): the old MAC takes its place among them.
	o.OwnAt, o.SpokeAt = 0, 0
	t.unsuspect(le)
	if h := o.hostMAC(string(u.LLAddr)); h != nil {
		*h = HostMAC{}
		if prev != "" && len(u.LLAddr) > 0 && o.hostMAC(prev) == nil {
			*h = HostMAC{MAC: prev, At: now}
		}
		o.compactHostMACs()
	}
}

// remove deletes an entry, after the event that says so is built.
func (t *core) remove(le ent, cause Cause, now int64) {
	if le.candidate() {
		t.candChanged(le.key())
	}
	t.detach(le)
	delete(t.conflicts, le.slot)
	delete(t.suspects, le.slot)
	t.trans[le.family().idx()][le.state.idx()][idxAbsent]++
	if t.publishing() {
		ev := t.event(le, KindTransition, cause, now)
		ev.Deleted = true
		t.events.Publish(ev)
	}
	t.st.remove(le.slot)
}

// since converts a cacheinfo age to the time the state began.
func since(u *Update, now int64) int64 {
	if !u.HasCacheInfo {
		return now
	}
	return now - int64(u.UpdatedAge)
}

// cacheTimes sets a record's last confirmation and use from the
// update's NDA_CACHEINFO ages, when it carried them.
func (r *rec) cacheTimes(clk *timebase, u *Update, now int64) {
	if !u.HasCacheInfo {
		return
	}
	r.confirm = clk.ms(now - int64(u.ConfirmedAge))
	r.used = clk.ms(now - int64(u.UsedAge))
}

// detach removes le's contribution to every aggregate.
func (t *core) detach(le ent) {
	s := t.iface(le.ifindex)
	f := le.family().idx()
	s.counts[f][le.state.idx()]--
	s.managed[f][le.owner()][le.state.idx()]--
	if le.owner() == OwnerNeighwatch {
		delete(t.owned, le.slot)
	}
	if le.heapIdx >= 0 {
		if le.long() {
			s.long[f].remove(t.st, le.slot)
		} else {
			s.pending[f].remove(t.st, le.slot)
		}
	}
	switch le.class() {
	case ClassStuck:
		s.stuck[f]--
		delete(t.stuck, le.slot)
	case ClassAtRisk:
		s.atRisk[f]--
		delete(t.atRisk, le.slot)
	case ClassConflict:
		s.conflict[f]--
	}
	if le.long() {
		s.staleLong[f]--
	}
	if o := t.st.observed(le); o.Mismatch || o.SourceMismatch {
		s.mismatched[f]--
	}
	if le.multi() {
		s.multiMAC[f]--
	}
}

// attach adds le's contribution to every aggregate and sets its class.
func (t *core) attach(le ent, now int64) {
	s := t.iface(le.ifindex)
	f := le.family().idx()
	s.counts[f][le.state.idx()]++
	s.managed[f][le.owner()][le.state.idx()]++
	if le.owner() == OwnerNeighwatch {
		t.owned[le.slot] = struct{}{}
	}
	o := t.st.observed(le)
	le.setClass(ClassOK)
	le.setBit(recLong, false)
	if le.state == StateStale {
		if t.pastThreshold(le.rec, now) {
			le.setBit(recLong, true)
			s.long[f].push(t.st, le.slot)
			s.staleLong[f]++
			switch {
			case t.st.hostGone(le):
				le.setClass(ClassStuck)
			case o.BypassInState > 0:
				le.setClass(ClassAtRisk)
			default:
				le.setClass(ClassStaleLong)
			}
		} else {
			s.pending[f].push(t.st, le.slot)
		}
	}
	if le.class() != ClassStuck && t.st.conflicted(le) {
		le.setClass(ClassConflict)
	}
	switch le.class() {
	case ClassStuck:
		s.stuck[f]++
		t.stuck[le.slot] = struct{}{}
	case ClassAtRisk:
		s.atRisk[f]++
		t.atRisk[le.slot] = struct{}{}
	case ClassConflict:
		s.conflict[f]++
	}
	if o.Mismatch || o.SourceMismatch {
		s.mismatched[f]++
	}
	multi := o.HostMACs[0].MAC != ""
	le.setBit(recMulti, multi)
	if multi {
		s.multiMAC[f]++
	}
}

// mismatch reports whether ARP/NDP (arp) and the host's own packets
// (source) last showed the entry's IP at a MAC other than the one the
// kernel sends to, unexplained: the entry's MAC was not heard since.
func (t *core) mismatch(le ent) (arp, source bool) {
	o := t.st.observed(le)
	if le.macLen == 0 || !le.state.Valid() || o.SuspectAt == 0 {
		return false, false
	}
	return o.SeenMAC != "" && !t.st.macIs(le, o.SeenMAC) && o.SeenAt >= t.st.clk.ns(le.llSince), o.SourceMAC != "" && !t.st.macIs(le, o.SourceMAC)
}

// unsuspect ends le's suspicion.
func (t *core) unsuspect(le ent) {
	if o := t.st.observed(le); o.SuspectAt != 0 {
		o.SuspectAt, o.SuspectMAC, o.silent = 0, "", false
		delete(t.suspects, le.slot)
	}
}

// candChanged records a change of the candidate k. The caller holds t.mu.
func (t *core) candChanged(k Key) {
	if t.candDirty == nil || t.candLost {
		return
	}
	if len(t.candDirty) >= max(minCandDirty, t.st.n) {
		t.candLost = true
		clear(t.candDirty)
		return
	}
	t.candDirty[k] = struct{}{}
}

func (t *core) event(le ent, kind Kind, cause Cause, now int64) Event {
	// The record's own bytes, for both: Publish copies them for the
	// subscribers that keep the event, so a burst that none keeps (a
	// table crossing the threshold together) copies nothing.
	var hw net.HardwareAddr
	if s := t.st.lladdrView(le.slot, le.rec); s != "" {
		hw = unsafe.Slice(unsafe.StringData(s), len(s))
	}
	return Event{
		borrowed:  true,
		Time:      time.Unix(0, now),
		Ifindex:   le.ifindex,
		Interface: t.iface(le.ifindex).name,
		Family:    le.family(),
		IP:        le.ip(),
		From:      le.state,
		To:        le.state,
		LLAddr:    hw,
		OldLLAddr: hw,
		Cause:     cause,
		Kind:      kind,
		Class:     le.class(),
	}
}

func (t *core) publishing() bool { return !t.loading && t.events.Active() }

// iface is the aggregates of an interface, made at its first entry.
func (t *core) iface(ifindex int32) *ifaceState {
	s := t.ifaces[ifindex]
	if s == nil {
		s = &ifaceState{name: strconv.Itoa(int(ifindex))}
		t.ifaces[ifindex] = s
	}
	return s
}
