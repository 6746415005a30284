package table

import (
	"fmt"
	"net"
	"net/netip"
	"strings"
	"time"
)

// State is a kernel NUD state (include/uapi/linux/neighbour.h). The
// values are the kernel's ABI; types_linux_test.go checks them against
// golang.org/x/sys/unix, which this package cannot import and still build
// on every OS.
type State uint8

// The NUD states. They are bits, but an entry holds exactly one of them.
const (
	StateNone       State = 0x00
	StateIncomplete State = 0x01
	StateReachable  State = 0x02
	StateStale      State = 0x04
	StateDelay      State = 0x08
	StateProbe      State = 0x10
	StateFailed     State = 0x20
	StateNoARP      State = 0x40
	StatePermanent  State = 0x80
)

// stateIdx numbers the states densely for counter arrays. Index
// idxAbsent stands for "no entry" in transitions (creation and deletion).
const (
	idxAbsent = numStates
	numStates = 9
)

var stateNames = [numStates + 1]string{"none", "incomplete", "reachable", "stale", "delay", "probe", "failed", "noarp", "permanent", "absent"}

func (s State) idx() int {
	switch s {
	case StateIncomplete:
		return 1
	case StateReachable:
		return 2
	case StateStale:
		return 3
	case StateDelay:
		return 4
	case StateProbe:
		return 5
	case StateFailed:
		return 6
	case StateNoARP:
		return 7
	case StatePermanent:
		return 8
	}
	return 0
}

// String returns the lowercase kernel name of the state ("stale").
// Values that are not a single known state print in hex.
func (s State) String() string {
	if i := s.idx(); i != 0 || s == StateNone {
		return stateNames[i]
	}
	return fmt.Sprintf("0x%02x", uint8(s))
}

// ParseState is the inverse of String.
func ParseState(name string) (State, error) {
	for _, s := range AllStates() {
		if strings.EqualFold(name, s.String()) {
			return s, nil
		}
	}
	return 0, fmt.Errorf("unknown neighbour state %q", name)
}

// AllStates lists the NUD states in kernel order.
func AllStates() []State {
	return []State{StateNone, StateIncomplete, StateReachable, StateStale, StateDelay, StateProbe, StateFailed, StateNoARP, StatePermanent}
}

// Valid reports whether the state is in the kernel's NUD_VALID set, the
// states for which bpf_fib_lookup() answers SUCCESS.
func (s State) Valid() bool {
	return s&(StatePermanent|StateNoARP|StateReachable|StateProbe|StateStale|StateDelay) != 0
}

// Neighbour flags: ndm_flags (NTF_*) and NDA_FLAGS_EXT (NTF_EXT_*), as in
// include/uapi/linux/neighbour.h.
const (
	FlagProxy      uint8  = 0x08 // NTF_PROXY
	FlagExtLearned uint8  = 0x10 // NTF_EXT_LEARNED
	FlagRouter     uint8  = 0x80 // NTF_ROUTER
	FlagExtManaged uint32 = 0x01 // NTF_EXT_MANAGED (kernel >= 5.16)

	// ProtocolNeighwatch is the NDA_PROTOCOL value neighwatch sets on the
	// entries it makes managed, to know them again after a restart: 0x6e,
	// "n". The kernel keeps a protocol until another one is set.
	ProtocolNeighwatch uint8 = 0x6e
)

// Family is an address family of a neighbour table.
type Family uint8

// The two neighbour tables neighwatch follows, with Linux's address
// family numbers (other systems number AF_INET6 differently).
const (
	FamilyInet  Family = 2  // AF_INET
	FamilyInet6 Family = 10 // AF_INET6
)

// String returns "inet" or "inet6", as ip(8) names them.
func (f Family) String() string {
	switch f {
	case FamilyInet:
		return "inet"
	case FamilyInet6:
		return "inet6"
	}
	return fmt.Sprintf("af%d", uint8(f))
}

func (f Family) idx() int {
	if f == FamilyInet6 {
		return 1
	}
	return 0
}

// FamilyOf returns the family of an address.
func FamilyOf(a netip.Addr) Family {
	if a.Is4() {
		return FamilyInet
	}
	return FamilyInet6
}

// Key identifies a neighbour entry: interface and address. The family is
// that of the address.
type Key struct {
	Ifindex int32
	Addr    netip.Addr
}

// Family returns the address family of the key.
func (k Key) Family() Family { return FamilyOf(k.Addr) }

// Class is neighwatch's verdict on an entry. Classes are exclusive and
// ordered from harmless to harmful.
type Class uint8

// Classes.
const (
	ClassOK        Class = iota
	ClassStaleLong       // STALE for at least the threshold
	// ClassAtRisk: stale-long, and traffic reaches it without the
	// neighbour subsystem, so the kernel will never re-validate it; nothing
	// says its host is gone.
	ClassAtRisk
	// ClassConflict: two MACs answer for the entry's IP in turn, the
	// entry's one of them (a duplicate address or a spoofer), in any
	// dynamic state: worth a warning, not a black hole, since whoever
	// holds the entry's MAC answers. Remediation leaves it alone.
	ClassConflict
	// ClassStuck: stale-long, and evidence that the host is not at the
	// entry's MAC: seen at another MAC (in ARP/NDP or in the source of
	// its own packets) while the entry's MAC stayed silent, confirmed by
	// a unicast probe to the entry's MAC that went unanswered, or by
	// silence alone for SilenceWindow.
	ClassStuck
)

// String returns "ok", "stale-long", "at-risk", "conflict" or "stuck".
func (c Class) String() string {
	switch c {
	case ClassStaleLong:
		return "stale-long"
	case ClassAtRisk:
		return "at-risk"
	case ClassConflict:
		return "conflict"
	case ClassStuck:
		return "stuck"
	}
	return "ok"
}

// Signal names one kind of evidence about an entry.
type Signal string

// Signals.
const (
	// SignalBypass: packets reached the entry without the neighbour
	// subsystem (the tracer). It makes a stale-long entry at-risk.
	SignalBypass Signal = "bypass"
	// SignalARP: an ARP or NDP answer or announcement showed the IP at
	// another MAC, and the entry's MAC has not been heard since: a
	// suspicion, which a silent entry's MAC turns into stuck.
	SignalARP Signal = "arp"
	// SignalSourceMAC: the host's own packets arrived from another MAC,
	// and the entry's MAC has not been heard since: a suspicion, as arp.
	SignalSourceMAC Signal = "source-mac"
	// SignalProbeUnanswered: a unicast probe to the entry's MAC went
	// unanswered (the confirmation of a suspicion, in dry-run too, or a
	// remediation probe). It makes a stale-long entry stuck.
	SignalProbeUnanswered Signal = "probe-unanswered"
	// SignalConflict: two MACs answered for the IP, the entry's one of
	// them (ARP/NDP in turn within the conflict window, or both answering
	// one probe). It makes the entry a conflict in any dynamic state until
	// ConflictHold passes without another one.
	SignalConflict Signal = "conflict"
)

// ConflictHold is how long a conflict keeps an entry in the conflict
// class after it was last seen.
const ConflictHold = 5 * time.Minute

// MinSilence is the least time the entry's MAC must stay silent after its
// host was seen at another MAC before silence alone makes it stuck (the
// window is the stale threshold, if longer). It leaves a confirmation
// probe the time to answer on a busy machine: a sweep, three unicast
// requests within the verify timeout, a rate limiter's wait.
const MinSilence = 10 * time.Second

// MaxHostMACs is how many other MACs of one host the table remembers.
const MaxHostMACs = 4

// HostMAC is another MAC a host was seen at (sending or answering) while
// its entry's MAC kept answering.
type HostMAC struct {
	MAC string // raw bytes
	At  int64  // last seen
}

// Signals lists every signal, in the order the README documents them.
func Signals() []Signal {
	return []Signal{SignalBypass, SignalARP, SignalSourceMAC, SignalProbeUnanswered, SignalConflict}
}

// Evidence is one signal about an entry and when it was last seen.
type Evidence struct {
	Signal  Signal
	MAC     net.HardwareAddr // the MAC the host was seen at (arp, source-mac) or probed at (probe-unanswered)
	At      time.Time        // last seen
	Packets uint64           // bypass and source-mac: packets counted
}

// Kind says what an event reports.
type Kind string

// Event kinds.
const (
	KindTransition  Kind = "transition"  // the kernel entry changed: state, lladdr or flags
	KindMismatch    Kind = "mismatch"    // ARP/NDP or the host's own packets showed the IP at a MAC other than the entry's
	KindConflict    Kind = "conflict"    // two MACs answered for one IP within the window
	KindClass       Kind = "class"       // the entry changed class with time or evidence
	KindRemediation Kind = "remediation" // neighwatch acted on the entry
)

// Kinds lists every event kind, in the order the README documents them.
func Kinds() []Kind {
	return []Kind{KindTransition, KindMismatch, KindConflict, KindClass, KindRemediation}
}

// Causes lists every cause, in the order the README documents them.
func Causes() []Cause {
	return []Cause{CauseNetlink, CauseResync, CauseLink, CauseARP, CauseTraffic, CauseClassify, CauseTracepoint, CauseRemediate}
}

// Classes lists every class, from harmless to harmful.
func Classes() []Class {
	return []Class{ClassOK, ClassStaleLong, ClassAtRisk, ClassConflict, ClassStuck}
}

// Cause says where a change came from.
type Cause string

// Causes of events.
const (
	CauseNetlink    Cause = "netlink"     // an RTM_NEWNEIGH/RTM_DELNEIGH notification
	CauseResync     Cause = "resync"      // found different by a fresh dump
	CauseLink       Cause = "link"        // the interface went away or out of scope
	CauseTracepoint Cause = "tracepoint"  // a neighbour tracepoint (silent transitions)
	CauseARP        Cause = "arp"         // ARP/NDP evidence: mismatch or conflict
	CauseTraffic    Cause = "traffic"     // evidence from packets: bypass or source MAC (the tracer)
	CauseClassify   Cause = "classify"    // the entry changed class with time
	CauseRemediate  Cause = "remediation" // neighwatch acted on the entry
)

// Entry is the mirror of one kernel neighbour entry plus what neighwatch
// knows about it. Times are Unix nanoseconds to keep the entry small.
type Entry struct {
	Key
	LLAddr   string // raw link-layer address bytes
	State    State
	Flags    uint8
	FlagsExt uint32
	Protocol uint8 // NDA_PROTOCOL
	Since    int64 // when the current state began
	Confirm  int64 // last confirmation (NDA_CACHEINFO confirmed)
	Used     int64 // last use by kernel output (NDA_CACHEINFO used)

	Transitions   uint32
	LLAddrChanges uint32

	// LLAddrSince is when the entry got its current lladdr (as the
	// kernel's "updated" says at load); evidence older than it says
	// nothing about that MAC.
	LLAddrSince int64

	// obs is what was observed of the entry's host; nil until something
	// was (most entries of a large table never see any).
	obs *Observed

	class   Class
	gen     uint32 // resync generation that last confirmed the entry
	heapIdx int32  // position in the stale heap of its interface, -1 if none
	long    bool   // in the stale-long heap rather than the pending one
	multi   bool   // counted in the multi-MAC aggregate
}

// Observed is the evidence gathered about an entry's host. It is kept
// apart from the entry, which holds a pointer: at 100,000 entries the
// fields would cost 16 MB in entries that never see any.
//
// A sighting of the host at another MAC is a suspicion, not proof: hosts
// send from more than one MAC (balance-tlb and -alb bonds, ARP flux,
// routers relaying them). It is proof only once the entry's MAC stayed
// silent after it: a unicast probe to it went unanswered, or nothing was
// heard from it for the silence window. Heard after the sighting, the
// entry's MAC clears the suspicion, and the other MAC becomes one of the
// host's: its sightings say nothing while the entry's MAC keeps
// answering (heard within the recheck time).
type Observed struct {
	// ARP/NDP evidence.
	SeenMAC  string // last MAC this IP was seen answering from
	SeenAt   int64
	Mismatch bool // SeenMAC, seen since LLAddrSince, differs from LLAddr and is a suspicion (while the entry is valid)

	// Tracer evidence.
	BypassPackets uint64 // all packets sent to this entry while STALE, bypassing the neighbour subsystem
	BypassInState uint64 // the same, in the current STALE period
	LastBypass    int64

	// Source-MAC evidence: packets from this IP arrived from SourceMAC.
	SourceMAC      string
	SourceAt       int64
	SourcePackets  uint64 // packets from this IP at a MAC other than LLAddr
	SourceMismatch bool   // SourceMAC differs from LLAddr and is a suspicion (while the entry is valid)

	// OwnAt: the entry's MAC was last heard for its IP (its ARP or NDP,
	// its packets, an answer to a probe); cleared with a new MAC.
	OwnAt int64
	// SuspectAt: the host was first seen at another MAC, SuspectMAC the
	// latest, since the entry's MAC was last heard; 0 when nothing is
	// unexplained. silent: the silence window has passed since.
	SuspectAt  int64
	SuspectMAC string
	silent     bool
	// HostMACs are the host's other MACs (most recent first): seen while
	// the entry's MAC answered after them.
	HostMACs [MaxHostMACs]HostMAC

	// ProbeUnansweredAt: a unicast probe to ProbeMAC (then the entry's
	// lladdr) went unanswered; cleared when the entry's state changes.
	ProbeUnansweredAt int64
	ProbeMAC          string

	// Conflict: ConflictMACs both answered for this IP, last at
	// ConflictAt; cleared ConflictHold after.
	ConflictMACs [2]string
	ConflictAt   int64
}

// noObserved is what o returns for an entry without evidence: read only.
var noObserved Observed

// o returns the entry's evidence for reading: never nil, never to be
// written through.
func (e *Entry) o() *Observed {
	if e.obs == nil {
		return &noObserved
	}
	return e.obs
}

// w returns the entry's evidence for writing, making it on first use.
func (e *Entry) w() *Observed {
	if e.obs == nil {
		e.obs = &Observed{}
	}
	return e.obs
}

// Observed returns a copy of the evidence gathered about the entry's host.
func (e *Entry) Observed() Observed { return *e.o() }

// clone returns a copy of the entry that shares nothing with it.
func (e *Entry) clone() Entry {
	c := *e
	if e.obs != nil {
		o := *e.obs
		c.obs = &o
	}
	return c
}

// candidate reports whether the tracer watches the entry's own packets:
// STALE, or managed by neighwatch.
func (e *Entry) candidate() bool { return e.State == StateStale || e.Owner() == OwnerNeighwatch }

// Class returns the classification as of the last table update or Advance.
func (e *Entry) Class() Class { return e.class }

// hostGone reports whether the evidence says the host is not at the
// entry's MAC: a unicast probe to it went unanswered, or it stayed
// silent for the silence window after the host was seen at another MAC.
func (e *Entry) hostGone() bool {
	o := e.o()
	return (o.ProbeUnansweredAt != 0 && o.ProbeMAC == e.LLAddr) || (o.SuspectAt != 0 && o.silent)
}

// Suspect reports whether the host was seen at another MAC since the
// entry's MAC was last heard: the suspicion a unicast probe to the
// entry's MAC confirms or clears.
func (e *Entry) Suspect() bool { return e.o().SuspectAt != 0 }

// SuspectSince returns when the suspicion began (zero when none).
func (e *Entry) SuspectSince() time.Time {
	if at := e.o().SuspectAt; at != 0 {
		return time.Unix(0, at)
	}
	return time.Time{}
}

// MultiMAC reports whether the host is known at other MACs than the
// entry's: it kept answering at the entry's MAC after it was seen at them.
func (e *Entry) MultiMAC() bool { return e.o().HostMACs[0].MAC != "" }

// OtherMACs lists the host's other known MACs, most recent first.
func (e *Entry) OtherMACs() []HostMAC {
	var out []HostMAC
	for _, h := range e.o().HostMACs {
		if h.MAC != "" {
			out = append(out, h)
		}
	}
	return out
}

// hostMAC returns the host's known MAC mac, or nil.
func (o *Observed) hostMAC(mac string) *HostMAC {
	for i := range o.HostMACs {
		if o.HostMACs[i].MAC == mac {
			return &o.HostMACs[i]
		}
	}
	return nil
}

// compactHostMACs closes the gaps in HostMACs, keeping the order.
func (o *Observed) compactHostMACs() {
	n := 0
	for _, h := range o.HostMACs {
		if h.MAC != "" {
			o.HostMACs[n] = h
			n++
		}
	}
	for ; n < len(o.HostMACs); n++ {
		o.HostMACs[n] = HostMAC{}
	}
}

// addHostMAC remembers mac as one of the host's, most recent first; the
// least recent of a full list goes.
func (o *Observed) addHostMAC(mac string, at int64) {
	i := len(o.HostMACs) - 1
	for j := range o.HostMACs {
		if o.HostMACs[j].MAC == mac || o.HostMACs[j].MAC == "" {
			i = j
			break
		}
	}
	copy(o.HostMACs[1:i+1], o.HostMACs[:i])
	o.HostMACs[0] = HostMAC{MAC: mac, At: at}
}

// conflicted reports whether the entry's MAC is one of two that answered
// for its IP (while it is in a dynamic state: the kernel follows answers).
func (e *Entry) conflicted() bool {
	o := e.o()
	return o.ConflictAt != 0 && e.LLAddr != "" && (e.LLAddr == o.ConflictMACs[0] || e.LLAddr == o.ConflictMACs[1]) &&
		e.State&(StateReachable|StateStale|StateDelay|StateProbe) != 0
}

// DisputingMAC returns the MAC that evidence says the IP is at instead of
// the entry's, or "": the other MAC of a conflict, else the MAC of an
// unexplained sighting.
func (e *Entry) DisputingMAC() string {
	o := e.o()
	switch {
	case e.conflicted():
		if o.ConflictMACs[0] == e.LLAddr {
			return o.ConflictMACs[1]
		}
		return o.ConflictMACs[0]
	case o.SuspectAt != 0:
		return o.SuspectMAC
	}
	return ""
}

// Evidence lists what is known against the entry, one item per signal.
func (e *Entry) Evidence() []Evidence {
	var out []Evidence
	o := e.o()
	if o.BypassInState > 0 {
		out = append(out, Evidence{Signal: SignalBypass, At: time.Unix(0, o.LastBypass), Packets: o.BypassInState})
	}
	if o.Mismatch {
		out = append(out, Evidence{Signal: SignalARP, MAC: net.HardwareAddr(o.SeenMAC), At: time.Unix(0, o.SeenAt)})
	}
	if o.SourceMismatch {
		out = append(out, Evidence{Signal: SignalSourceMAC, MAC: net.HardwareAddr(o.SourceMAC), At: time.Unix(0, o.SourceAt), Packets: o.SourcePackets})
	}
	if o.ProbeUnansweredAt != 0 && o.ProbeMAC == e.LLAddr {
		out = append(out, Evidence{Signal: SignalProbeUnanswered, MAC: net.HardwareAddr(o.ProbeMAC), At: time.Unix(0, o.ProbeUnansweredAt)})
	}
	if e.conflicted() {
		out = append(out, Evidence{Signal: SignalConflict, MAC: net.HardwareAddr(e.DisputingMAC()), At: time.Unix(0, o.ConflictAt)})
	}
	return out
}

// HardwareAddr returns the lladdr as a net.HardwareAddr (a copy).
func (e *Entry) HardwareAddr() net.HardwareAddr { return net.HardwareAddr(e.LLAddr) }

// Managed reports whether the entry belongs to the kernel or another agent
// (NTF_EXT_MANAGED or NTF_EXT_LEARNED).
func (e *Entry) Managed() bool {
	return e.FlagsExt&FlagExtManaged != 0 || e.Flags&FlagExtLearned != 0
}

// Owner says who keeps a managed entry fresh: OwnerNeighwatch (managed,
// with neighwatch's protocol), OwnerOther (managed by anyone else), or
// OwnerNone.
func (e *Entry) Owner() Owner {
	switch {
	case e.FlagsExt&FlagExtManaged == 0:
		return OwnerNone
	case e.Protocol == ProtocolNeighwatch:
		return OwnerNeighwatch
	}
	return OwnerOther
}

// Owner of a managed entry.
type Owner uint8

// Owners.
const (
	OwnerNone Owner = iota
	OwnerNeighwatch
	OwnerOther
	numOwners
)

func (o Owner) String() string {
	switch o {
	case OwnerNeighwatch:
		return "neighwatch"
	case OwnerOther:
		return "other"
	}
	return ""
}

// FlagNames lists the entry's flags as ip(8) prints them.
func (e *Entry) FlagNames() []string {
	var out []string
	if e.Flags&FlagRouter != 0 {
		out = append(out, "router")
	}
	if e.Flags&FlagProxy != 0 {
		out = append(out, "proxy")
	}
	if e.Flags&FlagExtLearned != 0 {
		out = append(out, "extern_learn")
	}
	if e.FlagsExt&FlagExtManaged != 0 {
		out = append(out, "managed")
	}
	return out
}

// Event is one change to the table or to the evidence about an entry.
type Event struct {
	Time      time.Time
	Ifindex   int32
	Interface string
	Family    Family
	IP        netip.Addr
	From      State
	To        State
	Created   bool // From is meaningless: the entry is new
	Deleted   bool // To is meaningless: the entry is gone
	OldLLAddr net.HardwareAddr
	LLAddr    net.HardwareAddr
	Cause     Cause
	Kind      Kind
	Class     Class
	Detail    string
}

func hwString(s string) string {
	if s == "" {
		return ""
	}
	return net.HardwareAddr(s).String()
}
