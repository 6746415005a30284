package table

import (
	"net"
	"time"
)

// Entry is the mirror of one kernel neighbour entry plus what neighwatch
// knows about it, as the table hands it out: a copy (the table keeps its
// entries as records, store.go). Times are Unix nanoseconds.
type Entry struct {
	Key
	LLAddr   string // raw link-layer address bytes
	State    State
	Flags    uint8
	FlagsExt uint32
	Protocol uint8 // NDA_PROTOCOL
	Since    int64 // when the current state began (to 10 ms; at most 248 days back)
	Confirm  int64 // last confirmation (NDA_CACHEINFO confirmed)
	Used     int64 // last use by kernel output (NDA_CACHEINFO used)

	Transitions   uint32
	LLAddrChanges uint32 // stops at 65,535 (the interface's count does not)

	// LLAddrSince is when the entry got its current lladdr (as the
	// kernel's "updated" says at load); evidence older than it says
	// nothing about that MAC.
	LLAddrSince int64

	// obs is what was observed of the entry's host; nil when nothing
	// was (most entries of a large table never see any).
	obs *Observed

	class Class
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
	// SpokeAt: the same but for announcements (gratuitous ARP, unsolicited
	// NA): the MAC spoke for its IP unasked, answered, or sent its
	// packets. What a move away from the MAC stakes: an announcement is a
	// claim any sender makes for any address, and a flood of moves is made
	// of them; the flood must not make its own addresses heard.
	SpokeAt int64
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

// Observed returns a copy of the evidence gathered about the entry's host.
func (e *Entry) Observed() Observed { return *e.o() }

// Class returns the classification as of the last table update or Advance.
func (e *Entry) Class() Class { return e.class }

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
