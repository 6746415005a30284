package table

import (
	"net"
	"net/netip"
	"strconv"
	"sync"
	"time"
)

// Table is the in-memory mirror of the neighbour tables. Every aggregate
// that metrics need is kept up to date on each change, so reading them costs
// the same with ten entries or a hundred thousand.
//
// All methods are safe for concurrent use.
type Table struct {
	mu        sync.Mutex
	threshold int64 // stale-long threshold, ns
	entries   map[Key]*Entry
	ifaces    map[int32]*ifaceState
	stuck     map[Key]*Entry
	atRisk    map[Key]*Entry
	owned     map[Key]*Entry // managed by neighwatch (NDA_PROTOCOL), any state
	conflicts map[Key]*Entry // entries with a conflict, to clear after ConflictHold
	// suspects are the entries whose host was seen at another MAC since
	// their MAC was last heard; suspectDue is when the first of them not
	// yet silent has been silent for the silence window.
	suspects   map[Key]*Entry
	suspectDue int64
	// recheck: a sighting at one of the host's known MACs is a suspicion
	// again once the entry's MAC has not been heard for this long (half
	// the threshold). silence: how long the entry's MAC must stay silent
	// after a sighting for silence alone to make it stuck.
	recheck, silence int64
	trans            [2][numStates + 1][numStates + 1]uint64
	gen              uint32
	// candGen counts changes to the set of STALE entries and of entries
	// neighwatch manages, or to their addresses (the candidates of the
	// tracer's source-MAC program). candDirty holds the keys of those
	// changes since the last CandidateChanges, once Candidates has been
	// called; candLost says it outgrew its bound and the reader must walk
	// Candidates again.
	candGen   uint64
	candDirty map[Key]struct{}
	candLost  bool
	loading   bool // initial dump: no events, no transition counts
	// onSuspect, if set, is called (under the lock: it must not block)
	// when a suspicion begins.
	onSuspect func()
	events    *Broadcaster
	now       func() time.Time
}

// ifaceState holds the aggregates of one interface, indexed by family.
type ifaceState struct {
	name          string
	counts        [2][numStates]int
	staleLong     [2]int // all classes past the threshold
	atRisk        [2]int
	stuck         [2]int
	conflict      [2]int
	multiMAC      [2]int // hosts known at other MACs than the entry's
	mismatched    [2]int // seen at another MAC (ARP/NDP or source MAC), unexplained
	lladdrChanges [2]uint64
	bypass        [2]uint64
	managed       [2][numOwners][numStates]int
	pending       [2]staleHeap // STALE, not yet past the threshold
	long          [2]staleHeap // STALE past the threshold
}

// New returns an empty table that classifies entries STALE for at least
// threshold as stale-long and publishes changes to events (nil: a new
// broadcaster).
func New(threshold time.Duration, events *Broadcaster) *Table {
	if events == nil {
		events = NewBroadcaster()
	}
	t := &Table{
		entries:   make(map[Key]*Entry),
		ifaces:    make(map[int32]*ifaceState),
		stuck:     make(map[Key]*Entry),
		atRisk:    make(map[Key]*Entry),
		owned:     make(map[Key]*Entry),
		conflicts: make(map[Key]*Entry),
		suspects:  make(map[Key]*Entry),
		events:    events,
		now:       time.Now,
	}
	t.setThreshold(threshold)
	return t
}

// setThreshold sets the threshold and the times derived from it. The
// caller holds t.mu (or owns t).
func (t *Table) setThreshold(d time.Duration) {
	t.threshold = int64(d)
	t.recheck = int64(d / 2)
	t.silence = int64(max(d, MinSilence))
}

// Events returns the broadcaster the table publishes to.
func (t *Table) Events() *Broadcaster { return t.events }

func (t *Table) iface(ifindex int32) *ifaceState {
	s := t.ifaces[ifindex]
	if s == nil {
		s = &ifaceState{name: strconv.Itoa(int(ifindex))}
		t.ifaces[ifindex] = s
	}
	return s
}

// SetLinkName records the name of an interface, for events and metrics.
func (t *Table) SetLinkName(ifindex int32, name string) {
	t.mu.Lock()
	t.iface(ifindex).name = name
	t.mu.Unlock()
}

// detach removes e's contribution to every aggregate.
func (t *Table) detach(e *Entry) {
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
func (t *Table) attach(e *Entry, now int64) {
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

func (t *Table) event(e *Entry, kind Kind, cause Cause, now int64) Event {
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

func (t *Table) publishing() bool { return !t.loading && t.events.Active() }

// since converts a cacheinfo age to the time the state began.
func since(u *Update, now int64) int64 {
	if !u.HasCacheInfo {
		return now
	}
	return now - int64(u.UpdatedAge)
}

// apply applies one update. The caller holds t.mu.
func (t *Table) apply(u *Update, cause Cause, now int64) {
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

func (t *Table) cacheTimes(e *Entry, u *Update, now int64) {
	if !u.HasCacheInfo {
		return
	}
	e.Confirm = now - int64(u.ConfirmedAge)
	e.Used = now - int64(u.UsedAge)
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

// sighted records that the entry's host was seen at mac, another MAC
// than the entry's, which begins a suspicion unless one is on. A MAC the
// host is known at begins none while the entry's MAC was heard within the
// recheck time. The caller holds t.mu and reattaches e.
func (t *Table) sighted(e *Entry, mac string, now int64) {
	if e.LLAddr == "" || !e.State.Valid() {
		return
	}
	o := e.w()
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
	t.suspects[e.Key] = e
	if due := now + t.silence; t.suspectDue == 0 || due < t.suspectDue {
		t.suspectDue = due
	}
	if t.onSuspect != nil {
		t.onSuspect()
	}
}

// OnSuspect sets fn to be called when a suspicion begins: the host of an
// entry seen at another MAC while its own was silent. fn runs under the
// table's lock: it must return at once and not call the table.
func (t *Table) OnSuspect(fn func()) {
	t.mu.Lock()
	t.onSuspect = fn
	t.mu.Unlock()
}

// heard records that the entry's own MAC was heard for its IP at now: a
// suspicion since is explained (its MAC becomes one of the host's), and
// so is an unanswered probe before. It reports whether it explained a
// suspicion. The caller holds t.mu and reattaches e.
func (t *Table) heard(e *Entry, now int64) bool {
	o := e.w()
	o.OwnAt = max(o.OwnAt, now)
	if o.ProbeUnansweredAt != 0 && o.ProbeUnansweredAt <= now {
		o.ProbeUnansweredAt, o.ProbeMAC = 0, ""
	}
	if o.SuspectAt == 0 || o.SuspectAt > now {
		return false
	}
	o.addHostMAC(o.SuspectMAC, now)
	t.unsuspect(e)
	return true
}

// unsuspect ends e's suspicion.
func (t *Table) unsuspect(e *Entry) {
	if o := e.obs; o != nil && o.SuspectAt != 0 {
		o.SuspectAt, o.SuspectMAC, o.silent = 0, "", false
		delete(t.suspects, e.Key)
	}
}

func (t *Table) remove(e *Entry, cause Cause, now int64) {
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

// Apply applies decoded netlink updates with the given cause.
func (t *Table) Apply(cause Cause, us ...Update) {
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
func (t *Table) BeginSync(initial bool) {
	t.mu.Lock()
	t.gen++
	t.loading = initial
	t.mu.Unlock()
}

// EndSync deletes the entries the last dump did not confirm and returns
// how many it deleted.
func (t *Table) EndSync() int {
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
func (t *Table) DeleteLink(ifindex int32, cause Cause) int {
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

// Advance promotes STALE entries that crossed the threshold to stale-long
// (or stuck) and publishes their class change. Cost: O(interfaces) plus
// O(log n) per promoted entry. It returns how many it promoted.
func (t *Table) Advance() int {
	now := t.now().UnixNano()
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.advance(now)
}

func (t *Table) advance(now int64) (promoted int) {
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

// SetThreshold changes the stale-long threshold and reclassifies every
// STALE entry under it (one pass over the table: for configuration
// reloads, not for the hot path).
func (t *Table) SetThreshold(d time.Duration) {
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

// Threshold returns the stale-long threshold.
func (t *Table) Threshold() time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	return time.Duration(t.threshold)
}

// reattach recomputes an entry's aggregates after its evidence or age
// changed, publishing a class event when its class changed.
func (t *Table) reattach(e *Entry, now int64, cause Cause) {
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

// ObserveMAC records that ip was seen at mac on an interface, in ARP or
// NDP. It returns true when this made the entry mismatched.
func (t *Table) ObserveMAC(ifindex int32, ip netip.Addr, mac net.HardwareAddr, when time.Time) bool {
	now := when.UnixNano()
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.entries[Key{Ifindex: ifindex, Addr: ip}]
	if e == nil {
		return false
	}
	o := e.w()
	was := o.Mismatch
	if o.SeenMAC != string(mac) {
		o.SeenMAC = string(mac)
	}
	o.SeenAt = now
	explained := false
	if string(mac) == e.LLAddr {
		explained = t.heard(e, now)
	} else {
		t.sighted(e, string(mac), now)
	}
	t.reattach(e, now, CauseARP)
	switch {
	case !t.publishing():
	case o.Mismatch && !was:
		ev := t.event(e, KindMismatch, CauseARP, now)
		ev.Detail = "seen at " + mac.String() + ", kernel sends to " + hwString(e.LLAddr) + ": stuck if that MAC stays silent"
		t.events.Publish(ev)
	case explained:
		t.publishExplained(e, CauseARP, now)
	}
	return o.Mismatch && !was
}

// publishExplained says that the entry's MAC answered after its host was
// seen at another MAC: the host has more than one.
func (t *Table) publishExplained(e *Entry, cause Cause, now int64) {
	ev := t.event(e, KindMismatch, cause, now)
	ev.Detail = "the entry's MAC answered after the host was seen at " + hwString(e.o().HostMACs[0].MAC) + ": both are the host's"
	t.events.Publish(ev)
}

// Heard records that an entry's own MAC was heard for its IP at when: its
// packets (the tracer), or an answer to a probe. A suspicion since the
// host was seen at another MAC is explained: that MAC is one of the
// host's. It reports whether mac is the entry's MAC.
func (t *Table) Heard(k Key, mac net.HardwareAddr, when time.Time) bool {
	now := when.UnixNano()
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.entries[k]
	if e == nil || len(mac) == 0 || string(mac) != e.LLAddr {
		return false
	}
	if t.heard(e, now) {
		t.reattach(e, now, CauseTraffic)
		if t.publishing() {
			t.publishExplained(e, CauseTraffic, now)
		}
		return true
	}
	t.reattach(e, now, CauseTraffic)
	return true
}

// AddBypass adds packets the tracer saw sent to an entry without the
// neighbour subsystem. Unknown entries are ignored and reported false.
func (t *Table) AddBypass(k Key, packets uint64, when time.Time) bool {
	if packets == 0 {
		return true
	}
	now := when.UnixNano()
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.entries[k]
	if e == nil {
		return false
	}
	o := e.w()
	o.BypassPackets += packets
	o.LastBypass = now
	t.iface(e.Ifindex).bypass[e.Family().idx()] += packets
	if e.State == StateStale {
		o.BypassInState += packets
		if o.BypassInState == packets { // first evidence in this period
			t.reattach(e, now, CauseTraffic)
		}
	}
	return true
}

// ObserveSourceMAC records that packets from an entry's IP arrived on its
// interface from mac. It returns true when this made the entry
// source-mismatched (the host is at another MAC than the kernel sends to).
// Unknown entries are ignored.
func (t *Table) ObserveSourceMAC(k Key, mac net.HardwareAddr, packets uint64, when time.Time) bool {
	now := when.UnixNano()
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.entries[k]
	if e == nil || len(mac) == 0 {
		return false
	}
	o := e.w()
	was := o.SourceMismatch
	if string(mac) == e.LLAddr {
		return false // its own MAC: Heard
	}
	if o.SourceMAC != string(mac) {
		o.SourceMAC = string(mac)
		o.SourcePackets = 0
	}
	o.SourcePackets += packets
	o.SourceAt = now
	t.sighted(e, string(mac), now)
	t.reattach(e, now, CauseTraffic)
	if o.SourceMismatch && !was && t.publishing() {
		ev := t.event(e, KindMismatch, CauseTraffic, now)
		ev.Detail = "packets from " + e.Addr.String() + " come from " + mac.String() + ", kernel sends to " + hwString(e.LLAddr) + ": stuck if that MAC stays silent"
		t.events.Publish(ev)
	}
	return o.SourceMismatch && !was
}

// ProbeUnanswered records that a unicast probe to mac, the entry's lladdr,
// went unanswered. It counts as evidence only while the entry keeps that
// lladdr and state. It reports whether it was recorded.
func (t *Table) ProbeUnanswered(k Key, mac string, when time.Time) bool {
	now := when.UnixNano()
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.entries[k]
	if e == nil || mac == "" || e.LLAddr != mac {
		return false
	}
	o := e.w()
	o.ProbeUnansweredAt, o.ProbeMAC = now, mac
	t.reattach(e, now, CauseRemediate)
	return true
}

// ObserveConflict records that macs a and b both answered for an entry's
// IP at when: ARP/NDP showed them in turn within the conflict window, or
// both answered one probe. While the entry's MAC is one of them the entry
// is stuck, until ConflictHold passes without another conflict. It
// reports whether the entry exists.
func (t *Table) ObserveConflict(k Key, a, b net.HardwareAddr, when time.Time) bool {
	now := when.UnixNano()
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.entries[k]
	if e == nil || len(a) == 0 || len(b) == 0 || string(a) == string(b) {
		return false
	}
	o := e.w()
	if now > o.ConflictAt {
		o.ConflictAt = now
	}
	o.ConflictMACs = [2]string{string(a), string(b)}
	t.conflicts[k] = e
	t.reattach(e, now, CauseARP)
	return true
}

// Len returns the number of entries.
func (t *Table) Len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.entries)
}

// Lookup returns a copy of one entry.
func (t *Table) Lookup(k Key) (Entry, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.advance(t.now().UnixNano())
	e := t.entries[k]
	if e == nil {
		return Entry{}, false
	}
	return e.clone(), true
}

// Snapshot returns a copy of every entry, classified as of now, and the
// interface names.
func (t *Table) Snapshot() ([]Entry, map[int32]string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.advance(t.now().UnixNano())
	out := make([]Entry, 0, len(t.entries))
	for _, e := range t.entries {
		out = append(out, e.clone())
	}
	names := make(map[int32]string, len(t.ifaces))
	for i, s := range t.ifaces {
		names[i] = s.name
	}
	return out, names
}

// LinkName returns the name the table knows for an interface.
func (t *Table) LinkName(ifindex int32) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if s := t.ifaces[ifindex]; s != nil {
		return s.name
	}
	return strconv.Itoa(int(ifindex))
}

// ApplyTracepoint applies a transition seen by the neighbour tracepoints
// that netlink never reports (STALE->DELAY and ->INCOMPLETE on transmit,
// REACHABLE->DELAY in the timer). It applies only if the entry is still in
// the from state, so a transition that netlink has already overtaken is
// dropped. It reports whether it applied.
func (t *Table) ApplyTracepoint(k Key, from, to State, when time.Time) bool {
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

// Walk calls fn, under the table's lock, for each entry of class min or
// worse, classified as of now: min ClassStuck walks the stuck entries,
// ClassAtRisk the at-risk and stuck ones, ClassStaleLong every stale-long
// entry, and ClassOK every STALE entry, young ones too. fn must not call
// the table. Walk returns copies of the
// entries fn picked (returned true for), so a caller can look at 100,000
// entries and copy a few.
func (t *Table) Walk(min Class, fn func(e *Entry, ifname string) bool) []Entry {
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

// Suspects calls fn, under the table's lock, for each entry whose host
// was seen at another MAC since its MAC was last heard, and returns
// copies of those fn picked (returned true for). It costs the suspects,
// not the table. fn must not call the table.
func (t *Table) Suspects(fn func(e *Entry, ifname string) bool) []Entry {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.advance(t.now().UnixNano())
	var out []Entry
	for _, e := range t.suspects {
		if fn(e, t.iface(e.Ifindex).name) {
			out = append(out, e.clone())
		}
	}
	return out
}

// CountClass returns how many entries are of class min or worse, in
// O(interfaces).
func (t *Table) CountClass(min Class) int {
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

// CandidatesGen changes whenever an entry enters or leaves the set of
// STALE entries and entries neighwatch manages, or one of those changes
// its address.
func (t *Table) CandidatesGen() uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.candGen
}

// minCandDirty is the least number of changed candidates the table keeps
// for CandidateChanges; it keeps as many as it holds entries, if more.
const minCandDirty = 65536

// candChanged records a change of the candidate k. The caller holds t.mu.
func (t *Table) candChanged(k Key) {
	t.candGen++
	if t.candDirty == nil || t.candLost {
		return
	}
	if len(t.candDirty) >= max(minCandDirty, len(t.entries)) {
		t.candLost = true
		clear(t.candDirty)
		return
	}
	t.candDirty[k] = struct{}{}
}

// Candidates calls fn, under the table's lock, for every STALE entry and
// every entry neighwatch manages, with its lladdr (raw bytes), and from
// then on keeps the changes to that set for CandidateChanges. fn must not
// call the table.
func (t *Table) Candidates(fn func(k Key, lladdr string)) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, e := range t.entries {
		if e.candidate() {
			fn(e.Key, e.LLAddr)
		}
	}
	t.candDirty = make(map[Key]struct{}) // a fresh map: a cleared one keeps its size
	t.candLost = false
}

// CandidateChanges calls fn, under the table's lock, once for each entry
// whose candidacy or lladdr changed since the last call (or Candidates):
// with its lladdr if it is a candidate now, with "" if it is not or is
// gone. It costs what changed, not the table's size. It returns false,
// calling fn for nothing, when the changes outgrew what the table keeps
// (a reader that stalled through a storm): the reader must call
// Candidates again. fn must not call the table.
func (t *Table) CandidateChanges(fn func(k Key, lladdr string)) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.candDirty == nil || t.candLost {
		return false
	}
	for k := range t.candDirty {
		if e := t.entries[k]; e != nil && e.candidate() {
			fn(k, e.LLAddr)
		} else {
			fn(k, "")
		}
	}
	if len(t.candDirty) > 1024 {
		t.candDirty = make(map[Key]struct{}) // let a storm's map go
	} else {
		clear(t.candDirty)
	}
	return true
}

// Owned returns copies of the entries neighwatch manages, in any state;
// it reads an index, not the table.
func (t *Table) Owned() []Entry {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]Entry, 0, len(t.owned))
	for _, e := range t.owned {
		out = append(out, e.clone())
	}
	return out
}

// CountOwned returns how many entries neighwatch manages.
func (t *Table) CountOwned() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.owned)
}

// Publish sends an event to the table's subscribers (other parts of the
// agent report through the same stream).
func (t *Table) Publish(ev Event) {
	if ev.Interface == "" {
		ev.Interface = t.LinkName(ev.Ifindex)
	}
	t.events.Publish(ev)
}

// Keys returns the key of every entry: a cheap way to walk a large table
// entry by entry (with Lookup) without copying it whole.
func (t *Table) Keys() []Key {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]Key, 0, len(t.entries))
	for k := range t.entries {
		out = append(out, k)
	}
	return out
}
