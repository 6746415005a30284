package table

import (
	"bytes"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"time"

	"github.com/neighwatch/neighwatch/internal/quote"
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
	return 0, fmt.Errorf("unknown neighbour state %s", quote.Input(name))
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

// Signals lists every signal, in the order docs/running.md and docs/detection.md document them.
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

// Kinds lists every event kind, in the order docs/running.md and docs/detection.md document them.
func Kinds() []Kind {
	return []Kind{KindTransition, KindMismatch, KindConflict, KindClass, KindRemediation}
}

// Causes lists every cause, in the order docs/running.md and docs/detection.md document them.
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
	// For a move (OldLLAddr and LLAddr both set, and different): the
	// entry's lladdr changes so far, this one included (LLAddrChanges:
	// 1 is the first the table saw); since when it had OldLLAddr, and
	// when traffic last used it (kernel output, or bypass traffic the
	// tracer counted), both Unix ns, 0 when unknown.
	Moves          uint32
	OldLLAddrSince int64
	LastUsed       int64
	// OldHeard is when the old MAC last spoke for the address (its ARP
	// or NDP but for announcements, its packets, an answer to a probe),
	// Unix ns, 0 when never while the table held it.
	OldHeard int64
	// borrowed: LLAddr and OldLLAddr may be the table's own bytes, valid
	// only under its lock; Publish copies them for a subscriber.
	borrowed bool
}

// own replaces borrowed lladdrs with copies, one for both where they are
// the same bytes.
func (ev *Event) own() {
	if !ev.borrowed {
		return
	}
	ev.borrowed = false
	same := len(ev.LLAddr) > 0 && len(ev.LLAddr) == len(ev.OldLLAddr) && &ev.LLAddr[0] == &ev.OldLLAddr[0]
	ev.LLAddr = bytes.Clone(ev.LLAddr)
	if same {
		ev.OldLLAddr = ev.LLAddr
	} else {
		ev.OldLLAddr = bytes.Clone(ev.OldLLAddr)
	}
}

func hwString(s string) string {
	if s == "" {
		return ""
	}
	return net.HardwareAddr(s).String()
}
