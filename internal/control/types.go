package control

import (
	"net"
	"time"

	"github.com/neighwatch/neighwatch/table"
)

// Entry is one neighbour entry as `neighwatch status --json` prints it.
type Entry struct {
	Interface           string   `json:"interface"`
	Family              string   `json:"family"`
	IP                  string   `json:"ip"`
	LLAddr              string   `json:"lladdr"`
	State               string   `json:"state"`
	StateAgeSeconds     float64  `json:"state_age_seconds"`
	Class               string   `json:"class"`
	Flags               []string `json:"flags"`
	ManagedBy           string   `json:"managed_by,omitempty"`
	NextAction          string   `json:"next_action,omitempty"`
	Transitions         uint32   `json:"transitions"`
	LLAddrChanges       uint32   `json:"lladdr_changes"` // stops at 65,535
	ConfirmedAgeSeconds *float64 `json:"confirmed_age_seconds,omitempty"`
	UsedAgeSeconds      *float64 `json:"used_age_seconds,omitempty"`
	SeenLLAddr          string   `json:"seen_lladdr,omitempty"`
	SeenAgeSeconds      *float64 `json:"seen_age_seconds,omitempty"`
	Mismatch            bool     `json:"mismatch"`
	BypassPackets       uint64   `json:"bypass_packets"`
	LastBypassAgeSecs   *float64 `json:"last_bypass_age_seconds,omitempty"`
	// SuspectAgeSeconds: since the host was seen at another MAC with the
	// entry's MAC silent since (a suspicion, confirmed or cleared by a
	// unicast probe to the entry's MAC).
	SuspectAgeSeconds *float64 `json:"suspect_age_seconds,omitempty"`
	// OtherMACs are the host's other MACs: seen there while the entry's
	// MAC kept answering.
	OtherMACs []HostMAC `json:"other_macs,omitempty"`
	Evidence  []Signal  `json:"evidence"`
}

// HostMAC is another MAC of an entry's host.
type HostMAC struct {
	MAC        string  `json:"mac"`
	AgeSeconds float64 `json:"age_seconds"`
}

// Signal is one item of an entry's evidence.
type Signal struct {
	Signal     string  `json:"signal"`
	MAC        string  `json:"mac,omitempty"`
	AgeSeconds float64 `json:"age_seconds"`
	Packets    uint64  `json:"packets,omitempty"`
}

// Event is one event as `neighwatch events --json` prints it.
type Event struct {
	Time      string `json:"time"`
	Interface string `json:"interface"`
	Family    string `json:"family"`
	IP        string `json:"ip"`
	Kind      string `json:"kind"`
	From      string `json:"from"`
	To        string `json:"to"`
	LLAddr    string `json:"lladdr"`
	OldLLAddr string `json:"old_lladdr,omitempty"`
	Cause     string `json:"cause"`
	Class     string `json:"class"`
	Detail    string `json:"detail,omitempty"`
}

func age(now time.Time, t int64) *float64 {
	if t == 0 {
		return nil
	}
	v := now.Sub(time.Unix(0, t)).Seconds()
	return &v
}

// EntryFromTable renders a table entry.
func EntryFromTable(e *table.Entry, name string, now time.Time) Entry {
	o := e.Observed()
	flags := e.FlagNames()
	if flags == nil {
		flags = []string{}
	}
	out := Entry{
		Interface:           name,
		Family:              e.Family().String(),
		IP:                  e.Addr.String(),
		LLAddr:              hw(e.LLAddr),
		State:               e.State.String(),
		StateAgeSeconds:     now.Sub(time.Unix(0, e.Since)).Seconds(),
		Class:               e.Class().String(),
		Flags:               flags,
		ManagedBy:           e.Owner().String(),
		Transitions:         e.Transitions,
		LLAddrChanges:       e.LLAddrChanges,
		ConfirmedAgeSeconds: age(now, e.Confirm),
		UsedAgeSeconds:      age(now, e.Used),
		SeenLLAddr:          hw(o.SeenMAC),
		SeenAgeSeconds:      age(now, o.SeenAt),
		Mismatch:            o.Mismatch,
		BypassPackets:       o.BypassPackets,
		LastBypassAgeSecs:   age(now, o.LastBypass),
		Evidence:            []Signal{},
	}
	if e.Suspect() {
		out.SuspectAgeSeconds = age(now, e.SuspectSince().UnixNano())
	}
	for _, h := range e.OtherMACs() {
		out.OtherMACs = append(out.OtherMACs, HostMAC{MAC: hw(h.MAC), AgeSeconds: now.Sub(time.Unix(0, h.At)).Seconds()})
	}
	for _, ev := range e.Evidence() {
		out.Evidence = append(out.Evidence, Signal{
			Signal: string(ev.Signal), MAC: ev.MAC.String(), AgeSeconds: now.Sub(ev.At).Seconds(), Packets: ev.Packets,
		})
	}
	return out
}

func hw(s string) string {
	if s == "" {
		return ""
	}
	return net.HardwareAddr(s).String()
}

// eventStates names an event's states, "absent" on the side of a
// creation or a deletion.
func eventStates(ev table.Event) (from, to string) {
	from, to = ev.From.String(), ev.To.String()
	if ev.Created {
		from = "absent"
	}
	if ev.Deleted {
		to = "absent"
	}
	return from, to
}

// EventFromTable renders an event.
func EventFromTable(ev table.Event) Event {
	from, to := eventStates(ev)
	return Event{
		Time:      ev.Time.UTC().Format(time.RFC3339Nano),
		Interface: ev.Interface,
		Family:    ev.Family.String(),
		IP:        ev.IP.String(),
		Kind:      string(ev.Kind),
		From:      from,
		To:        to,
		LLAddr:    ev.LLAddr.String(),
		OldLLAddr: ev.OldLLAddr.String(),
		Cause:     string(ev.Cause),
		Class:     ev.Class.String(),
		Detail:    ev.Detail,
	}
}

// TracerStatus is GET /v1/tracer: how bypass packets are counted, each
// program the tracer tried and whether the kernel took it, each feature,
// and where detection is blind.
type TracerStatus struct {
	// Running is false when no tracer runs: Disabled says why.
	Running  bool   `json:"running"`
	Disabled string `json:"disabled,omitempty"`
	// Mode counts bypass packets: fentry, xmit, or off.
	Mode      string           `json:"mode"`
	Fallback  string           `json:"fallback,omitempty"`
	Features  []TracerFeature  `json:"features"`
	Programs  []TracerProgram  `json:"programs"`
	Detection []DetectionEntry `json:"detection"`
}

// TracerFeature is one feature of the tracer: whether it works, how, and
// why not.
type TracerFeature struct {
	Feature string `json:"feature"`
	Working bool   `json:"working"`
	Via     string `json:"via,omitempty"`
	Why     string `json:"why,omitempty"`
}

// TracerProgram is one eBPF program the tracer tried.
type TracerProgram struct {
	Program string `json:"program"`
	Hook    string `json:"hook"`
	Feature string `json:"feature"`
	Loaded  bool   `json:"loaded"`
	Refusal string `json:"refusal,omitempty"`
	Error   string `json:"error,omitempty"`
	// Needs is the kernel the program's hook needs.
	Needs string `json:"needs,omitempty"`
}

// DetectionEntry says whether a feature the configuration asks for works
// on an interface (neighwatch_detection_working).
type DetectionEntry struct {
	Interface string `json:"interface"`
	Feature   string `json:"feature"`
	Working   bool   `json:"working"`
	Why       string `json:"why,omitempty"`
}
