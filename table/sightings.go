package table

import (
	"bytes"
	"net"
	"net/netip"
	"time"
)

// ObserveMAC records that ip was seen at mac on an interface, in ARP or
// NDP. It returns true when this made the entry mismatched.
func (t Sightings) ObserveMAC(ifindex int32, ip netip.Addr, mac net.HardwareAddr, when time.Time) bool {
	return t.observeMAC(ifindex, ip, mac, when, false)
}

// AnnounceMAC is ObserveMAC for an announcement (a gratuitous ARP, an
// unsolicited NA): it does all ObserveMAC does, but the entry's MAC
// announcing itself is not its speaking (Observed.SpokeAt), which a move
// away from it stakes.
func (t Sightings) AnnounceMAC(ifindex int32, ip netip.Addr, mac net.HardwareAddr, when time.Time) bool {
	return t.observeMAC(ifindex, ip, mac, when, true)
}

func (t Sightings) observeMAC(ifindex int32, ip netip.Addr, mac net.HardwareAddr, when time.Time, announce bool) bool {
	now := when.UnixNano()
	t.mu.Lock()
	defer t.mu.Unlock()
	le, ok := t.get(Key{Ifindex: ifindex, Addr: ip})
	if !ok {
		return false
	}
	o := t.st.observe(le)
	was := o.Mismatch
	if o.SeenMAC != string(mac) {
		o.SeenMAC = string(mac)
	}
	o.SeenAt = now
	explained := false
	if t.st.macIs(le, string(mac)) {
		explained = t.heard(le, now, !announce)
	} else {
		t.sighted(le, string(mac), now)
	}
	t.reattach(le, now, CauseARP)
	switch {
	case !t.publishing():
	case o.Mismatch && !was:
		ev := t.event(le, KindMismatch, CauseARP, now)
		ev.Detail = "seen at " + mac.String() + ", kernel sends to " + hwString(t.st.lladdr(le.slot, le.rec)) + ": stuck if that MAC stays silent"
		t.events.Publish(ev)
	case explained:
		t.publishExplained(le, CauseARP, now)
	}
	return o.Mismatch && !was
}

// Heard records that an entry's own MAC was heard for its IP at when: its
// packets (the tracer), or an answer to a probe. A suspicion since the
// host was seen at another MAC is explained: that MAC is one of the
// host's. It reports whether mac is the entry's MAC.
func (t Sightings) Heard(k Key, mac net.HardwareAddr, when time.Time) bool {
	now := when.UnixNano()
	t.mu.Lock()
	defer t.mu.Unlock()
	le, ok := t.get(k)
	if !ok || len(mac) == 0 || !t.st.macIs(le, string(mac)) {
		return false
	}
	if t.heard(le, now, true) {
		t.reattach(le, now, CauseTraffic)
		if t.publishing() {
			t.publishExplained(le, CauseTraffic, now)
		}
		return true
	}
	t.reattach(le, now, CauseTraffic)
	return true
}

// ObserveSourceMAC records that packets from an entry's IP arrived on its
// interface from mac. It returns true when this made the entry
// source-mismatched (the host is at another MAC than the kernel sends to).
// Unknown entries are ignored.
func (t Sightings) ObserveSourceMAC(k Key, mac net.HardwareAddr, packets uint64, when time.Time) bool {
	now := when.UnixNano()
	t.mu.Lock()
	defer t.mu.Unlock()
	le, ok := t.get(k)
	if !ok || len(mac) == 0 {
		return false
	}
	o := t.st.observe(le)
	was := o.SourceMismatch
	if t.st.macIs(le, string(mac)) {
		return false // its own MAC: Heard
	}
	if o.SourceMAC != string(mac) {
		o.SourceMAC = string(mac)
		o.SourcePackets = 0
	}
	o.SourcePackets += packets
	o.SourceAt = now
	t.sighted(le, string(mac), now)
	t.reattach(le, now, CauseTraffic)
	if o.SourceMismatch && !was && t.publishing() {
		ev := t.event(le, KindMismatch, CauseTraffic, now)
		ev.Detail = "packets from " + le.ip().String() + " come from " + mac.String() + ", kernel sends to " + hwString(t.st.lladdr(le.slot, le.rec)) + ": stuck if that MAC stays silent"
		t.events.Publish(ev)
	}
	return o.SourceMismatch && !was
}

// AddBypass adds packets the tracer saw sent to an entry without the
// neighbour subsystem. Unknown entries are ignored and reported false.
func (t Sightings) AddBypass(k Key, packets uint64, when time.Time) bool {
	if packets == 0 {
		return true
	}
	now := when.UnixNano()
	t.mu.Lock()
	defer t.mu.Unlock()
	le, ok := t.get(k)
	if !ok {
		return false
	}
	o := t.st.observe(le)
	o.BypassPackets += packets
	o.LastBypass = now
	t.iface(le.ifindex).bypass[le.family().idx()] += packets
	if le.state == StateStale {
		o.BypassInState += packets
		if o.BypassInState == packets { // first evidence in this period
			t.reattach(le, now, CauseTraffic)
		}
	}
	return true
}

// ProbeUnanswered records that a unicast probe to mac, the entry's lladdr,
// went unanswered. It counts as evidence only while the entry keeps that
// lladdr and state. It reports whether it was recorded.
func (t Sightings) ProbeUnanswered(k Key, mac string, when time.Time) bool {
	now := when.UnixNano()
	t.mu.Lock()
	defer t.mu.Unlock()
	le, ok := t.get(k)
	if !ok || mac == "" || !t.st.macIs(le, mac) {
		return false
	}
	o := t.st.observe(le)
	o.ProbeUnansweredAt, o.ProbeMAC = now, mac
	t.reattach(le, now, CauseRemediate)
	return true
}

// ObserveConflict records that macs a and b both answered for an entry's
// IP at when: ARP/NDP showed them in turn within the conflict window, or
// both answered one probe. While the entry's MAC is one of them the entry
// is stuck, until ConflictHold passes without another conflict. It
// reports whether the entry exists.
func (t Sightings) ObserveConflict(k Key, a, b net.HardwareAddr, when time.Time) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.conflict(k, a, b, when.UnixNano(), CauseARP)
}

// ReportConflict records a conflict as ObserveConflict does, and
// publishes the conflict event that says so under the same lock: the
// entry's state and class as the conflict leaves them (Created and
// Deleted both set when the table has no entry for the IP). old is the
// MAC that answered before, now the one answering now; cause and detail
// say how the conflict was found. It reports whether an entry recorded
// it.
func (t Sightings) ReportConflict(k Key, old, now net.HardwareAddr, when time.Time, cause Cause, detail string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	recorded := t.conflict(k, old, now, when.UnixNano(), cause)
	if !t.publishing() {
		return recorded
	}
	ev := Event{Time: when, Ifindex: k.Ifindex, Family: FamilyOf(k.Addr), IP: k.Addr, LLAddr: bytes.Clone(now), OldLLAddr: bytes.Clone(old),
		Cause: cause, Kind: KindConflict, Detail: detail, Created: true, Deleted: true}
	if s := t.ifaces[k.Ifindex]; s != nil {
		ev.Interface = s.name
	}
	if le, ok := t.get(k); ok {
		ev.From, ev.To, ev.Class, ev.Created, ev.Deleted = le.state, le.state, le.class(), false, false
	}
	t.events.Publish(ev)
	return recorded
}

// conflict records one; the caller holds t.mu.
func (t *core) conflict(k Key, a, b net.HardwareAddr, now int64, cause Cause) bool {
	le, ok := t.get(k)
	if !ok || len(a) == 0 || len(b) == 0 || string(a) == string(b) {
		return false
	}
	o := t.st.observe(le)
	if now > o.ConflictAt {
		o.ConflictAt = now
	}
	o.ConflictMACs = [2]string{string(a), string(b)}
	t.conflicts[le.slot] = struct{}{}
	t.reattach(le, now, cause)
	return true
}

// Suspects calls fn, under the table's lock, for each entry whose host
// was seen at another MAC since its MAC was last heard, and returns
// copies of those fn picked (returned true for). It costs the suspects,
// not the table. fn must not call the table, nor keep e or its strings
// (a view of the table's own record, as Walk's).
func (t Sightings) Suspects(fn func(e *Entry, ifname string) bool) []Entry {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.advance(t.now().UnixNano())
	var out []Entry
	var v Entry
	for slot := range t.suspects {
		r := t.st.at(slot)
		t.st.view(&v, slot, r)
		if fn(&v, t.iface(r.ifindex).name) {
			out = append(out, t.st.entry(slot, r))
		}
	}
	return out
}

// OnSuspect sets fn to be called when a suspicion begins: the host of an
// entry seen at another MAC while its own was silent. fn runs under the
// table's lock: it must return at once and not call the table.
func (t Sightings) OnSuspect(fn func()) {
	t.mu.Lock()
	t.onSuspect = fn
	t.mu.Unlock()
}

// sighted records that the entry's host was seen at mac, another MAC
// than the entry's, which begins a suspicion unless one is on. A MAC the
// host is known at begins none while the entry's MAC was heard within the
// recheck time. The caller holds t.mu and reattaches le.
func (t *core) sighted(le ent, mac string, now int64) {
	if le.macLen == 0 || !le.state.Valid() {
		return
	}
	o := t.st.observe(le)
	if h := o.hostMAC(mac); h != nil {
		h.At = max(h.At, now)
		if o.OwnAt != 0 && now-o.OwnAt < t.recheck {
			return
		}
	}
	o.SuspectMAC = mac
	if o.SuspectAt != 0 {
		return
	}
	o.SuspectAt, o.silent = now, false
	t.suspects[le.slot] = struct{}{}
	if due := now + t.silence; t.suspectDue == 0 || due < t.suspectDue {
		t.suspectDue = due
	}
	if t.onSuspect != nil {
		t.onSuspect()
	}
}

// heard records that the entry's own MAC was heard for its IP at now: a
// suspicion since is explained (its MAC becomes one of the host's), and
// so is an unanswered probe before. spoke: it was not an announcement.
// It reports whether it explained a suspicion. The caller holds t.mu and
// reattaches le.
func (t *core) heard(le ent, now int64, spoke bool) bool {
	o := t.st.observe(le)
	o.OwnAt = max(o.OwnAt, now)
	if spoke {
		o.SpokeAt = max(o.SpokeAt, now)
	}
	if o.ProbeUnansweredAt != 0 && o.ProbeUnansweredAt <= now {
		o.ProbeUnansweredAt, o.ProbeMAC = 0, ""
	}
	if o.SuspectAt == 0 || o.SuspectAt > now {
		return false
	}
	o.addHostMAC(o.SuspectMAC, now)
	t.unsuspect(le)
	return true
}

// publishExplained says that the entry's MAC answered after another MAC
// was seen with the host's address. It claims no more than that: the
// other MAC may be the host's second one, or anyone's using its address.
func (t *core) publishExplained(le ent, cause Cause, now int64) {
	ev := t.event(le, KindMismatch, cause, now)
	ev.Detail = "the entry's MAC answered after " + hwString(t.st.observed(le).HostMACs[0].MAC) + " was seen with the host's address: not stuck while the entry's MAC answers"
	t.events.Publish(ev)
}

// get returns the entry of k.
func (t *core) get(k Key) (ent, bool) {
	slot, r, ok := t.st.get(k)
	return ent{slot, r}, ok
}
