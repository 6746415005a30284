package table

import (
	"net"
	"time"
)

// Advance promotes STALE entries that crossed the threshold to stale-long
// (or stuck) and publishes their class change. Cost: O(interfaces) plus
// O(log n) per promoted entry. It returns how many it promoted.
func (t Classifier) Advance() int {
	now := t.now().UnixNano()
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.advance(now)
}

// SetThreshold changes the stale-long threshold and reclassifies every
// STALE entry under it (one pass over the table: for configuration
// reloads, not for the hot path).
func (t Classifier) SetThreshold(d time.Duration) {
	now := t.now().UnixNano()
	t.mu.Lock()
	defer t.mu.Unlock()
	if int64(d) == t.threshold {
		return
	}
	t.setThreshold(d)
	for _, e := range t.suspects {
		e.w().silent = false // judged again against the new window
	}
	t.suspectDue = now
	for _, e := range t.entries {
		if e.State == StateStale {
			t.reattach(e, now, CauseClassify)
		}
	}
	t.advance(now)
}

// Walk calls fn, under the table's lock, for each entry of class min or
// worse, classified as of now: min ClassStuck walks the stuck entries,
// ClassAtRisk the at-risk and stuck ones, ClassStaleLong every stale-long
// entry, and ClassOK every STALE entry, young ones too. fn must not call
// the table. Walk returns copies of the
// entries fn picked (returned true for), so a caller can look at 100,000
// entries and copy a few.
func (t Classifier) Walk(min Class, fn func(e *Entry, ifname string) bool) []Entry {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.advance(t.now().UnixNano())
	var out []Entry
	visit := func(e *Entry, name string) {
		if fn(e, name) {
			out = append(out, e.clone())
		}
	}
	if min >= ClassAtRisk {
		for _, e := range t.stuck {
			visit(e, t.iface(e.Ifindex).name)
		}
		if min == ClassAtRisk {
			for _, e := range t.atRisk {
				visit(e, t.iface(e.Ifindex).name)
			}
		}
		return out
	}
	for _, s := range t.ifaces {
		for f := range s.long {
			for _, e := range s.long[f] {
				visit(e, s.name)
			}
			if min == ClassOK {
				for _, e := range s.pending[f] {
					visit(e, s.name)
				}
			}
		}
	}
	return out
}

// CountClass returns how many entries are of class min or worse, in
// O(interfaces).
func (t Classifier) CountClass(min Class) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.advance(t.now().UnixNano())
	n := 0
	for _, s := range t.ifaces {
		for f := range 2 {
			switch {
			case min <= ClassStaleLong:
				n += s.staleLong[f]
			case min == ClassAtRisk:
				n += s.atRisk[f] + s.stuck[f]
			default:
				n += s.stuck[f]
			}
		}
	}
	return n
}

// Owned returns copies of the entries neighwatch manages, in any state;
// it reads an index, not the table.
func (t Classifier) Owned() []Entry {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]Entry, 0, len(t.owned))
	for _, e := range t.owned {
		out = append(out, e.clone())
	}
	return out
}

// CountOwned returns how many entries neighwatch manages.
func (t Classifier) CountOwned() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.owned)
}

// Events returns the broadcaster the table publishes to.
func (t Classifier) Events() *Broadcaster { return t.events }

// Publish sends an event to the table's subscribers (other parts of the
// agent report through the same stream).
func (t Classifier) Publish(ev Event) {
	if ev.Interface == "" {
		ev.Interface = t.LinkName(ev.Ifindex)
	}
	t.events.Publish(ev)
}

// reattach recomputes an entry's aggregates after its evidence or age
// changed, publishing a class event when its class changed.
func (t *core) reattach(e *Entry, now int64, cause Cause) {
	old := e.class
	t.detach(e)
	if o := e.obs; o != nil {
		o.Mismatch, o.SourceMismatch = mismatch(e)
	}
	t.attach(e, now)
	if e.class != old && t.publishing() {
		ev := t.event(e, KindClass, cause, now)
		ev.Detail = classChanges[old][e.class]
		t.events.Publish(ev)
	}
}

func (t *core) advance(now int64) (promoted int) {
	if t.suspectDue != 0 && now >= t.suspectDue {
		t.suspectDue = 0
		for _, e := range t.suspects {
			o := e.w()
			switch due := o.SuspectAt + t.silence; {
			case o.silent:
			case now >= due:
				o.silent = true
				t.reattach(e, now, CauseClassify)
			case t.suspectDue == 0 || due < t.suspectDue:
				t.suspectDue = due
			}
		}
	}
	for k, e := range t.conflicts {
		if o := e.w(); now-o.ConflictAt >= int64(ConflictHold) {
			delete(t.conflicts, k)
			o.ConflictMACs, o.ConflictAt = [2]string{}, 0
			t.reattach(e, now, CauseClassify)
		}
	}
	for _, s := range t.ifaces {
		for f := range s.pending {
			for {
				e := s.pending[f].min()
				if e == nil || now-e.Since < t.threshold {
					break
				}
				t.reattach(e, now, CauseClassify)
				promoted++
			}
		}
	}
	return promoted
}

// detach removes e's contribution to every aggregate.
func (t *core) detach(e *Entry) {
	s := t.iface(e.Ifindex)
	f := e.Family().idx()
	s.counts[f][e.State.idx()]--
	s.managed[f][e.Owner()][e.State.idx()]--
	if e.Owner() == OwnerNeighwatch {
		delete(t.owned, e.Key)
	}
	if e.heapIdx >= 0 {
		if e.long {
			s.long[f].remove(e)
		} else {
			s.pending[f].remove(e)
		}
	}
	switch e.class {
	case ClassStuck:
		s.stuck[f]--
		delete(t.stuck, e.Key)
	case ClassAtRisk:
		s.atRisk[f]--
		delete(t.atRisk, e.Key)
	case ClassConflict:
		s.conflict[f]--
	}
	if e.long {
		s.staleLong[f]--
	}
	if o := e.o(); o.Mismatch || o.SourceMismatch {
		s.mismatched[f]--
	}
	if e.multi {
		s.multiMAC[f]--
	}
}

// attach adds e's contribution to every aggregate and sets its class.
func (t *core) attach(e *Entry, now int64) {
	s := t.iface(e.Ifindex)
	f := e.Family().idx()
	s.counts[f][e.State.idx()]++
	s.managed[f][e.Owner()][e.State.idx()]++
	if e.Owner() == OwnerNeighwatch {
		t.owned[e.Key] = e
	}
	e.class = ClassOK
	e.long = false
	if e.State == StateStale {
		if now-e.Since >= t.threshold {
			e.long = true
			s.long[f].push(e)
			s.staleLong[f]++
			switch {
			case e.hostGone():
				e.class = ClassStuck
			case e.o().BypassInState > 0:
				e.class = ClassAtRisk
			default:
				e.class = ClassStaleLong
			}
		} else {
			s.pending[f].push(e)
		}
	}
	if e.class != ClassStuck && e.conflicted() {
		e.class = ClassConflict
	}
	switch e.class {
	case ClassStuck:
		s.stuck[f]++
		t.stuck[e.Key] = e
	case ClassAtRisk:
		s.atRisk[f]++
		t.atRisk[e.Key] = e
	case ClassConflict:
		s.conflict[f]++
	}
	if o := e.o(); o.Mismatch || o.SourceMismatch {
		s.mismatched[f]++
	}
	if e.multi = e.MultiMAC(); e.multi {
		s.multiMAC[f]++
	}
}

// mismatch reports whether ARP/NDP (arp) and the host's own packets
// (source) last showed the entry's IP at a MAC other than the one the
// kernel sends to, unexplained: the entry's MAC was not heard since.
func mismatch(e *Entry) (arp, source bool) {
	o := e.o()
	if e.LLAddr == "" || !e.State.Valid() || o.SuspectAt == 0 {
		return false, false
	}
	return o.SeenMAC != "" && o.SeenMAC != e.LLAddr && o.SeenAt >= e.LLAddrSince, o.SourceMAC != "" && o.SourceMAC != e.LLAddr
}

// classChanges names each class change ("ok -> stale-long") once, not
// once per event.
var classChanges = func() (n [ClassStuck + 1][ClassStuck + 1]string) { // ClassStuck is the last
	for _, a := range Classes() {
		for _, b := range Classes() {
			n[a][b] = a.String() + " -> " + b.String()
		}
	}
	return n
}()

func (t *core) event(e *Entry, kind Kind, cause Cause, now int64) Event {
	hw := net.HardwareAddr(e.LLAddr) // one copy for both: events are read only
	return Event{
		Time:      time.Unix(0, now),
		Ifindex:   e.Ifindex,
		Interface: t.iface(e.Ifindex).name,
		Family:    e.Family(),
		IP:        e.Addr,
		From:      e.State,
		To:        e.State,
		LLAddr:    hw,
		OldLLAddr: hw,
		Cause:     cause,
		Kind:      kind,
		Class:     e.class,
	}
}

func (t *core) publishing() bool { return !t.loading && t.events.Active() }
