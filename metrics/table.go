package metrics

import (
	"log/slog"
	"net"
	"net/netip"

	"github.com/neighwatch/neighwatch/table"
	"github.com/prometheus/client_golang/prometheus"
)

// TableReader is what the table collector reads: the aggregates and
// the event stream's drop count, which a *table.Table is.
type TableReader interface {
	Stats(stuckCap int) table.Stats
	Events() *table.Broadcaster
}

// SegmentsReader reads, at a scrape that names stuck entries, which
// segment a neighbour on an interface is on (monitor/addrs: the subnet
// its node reaches it through). nil: every segment "".
type SegmentsReader func() (segmentOf func(ifindex int32, addr netip.Addr) string, err error)

// NewTableCollector exposes the table: entries by state, classes,
// transitions and evidence, and at most stuckCap info series naming stuck
// entries, each with its segment (segments). Its cost does not depend on
// the number of entries: the table keeps every aggregate current.
func NewTableCollector(t TableReader, stuckCap int, segments SegmentsReader, log *slog.Logger) prometheus.Collector {
	s := newSubsystem("table", log)
	var (
		neighbours    = s.gauge("neighbours", "Neighbour entries by interface, family and NUD state.", "interface", "family", "state")
		staleLong     = s.gauge("neighbours_stale_long", "Entries STALE for at least the stale threshold, whatever their class.", "interface", "family")
		atRisk        = s.gauge("neighbours_at_risk", "Stale-long entries that traffic reaches without the neighbour subsystem, so the kernel never re-validates them; nothing says their host is gone.", "interface", "family")
		stuck         = s.gauge("neighbours_stuck", "Stale-long entries whose host is not at the entry's MAC: seen at another MAC while the entry's MAC stayed silent, confirmed by an unanswered unicast probe or by silence for the window.", "interface", "family")
		conflict      = s.gauge("neighbours_conflict", "Entries whose MAC is one of two answering for their IP in turn (a duplicate address or a spoofer), in any dynamic state: a warning, not a black hole.", "interface", "family")
		multiMAC      = s.gauge("neighbours_multi_mac", "Entries whose host is known at other MACs than the entry's: seen there while the entry's MAC kept answering (a bond, ARP flux, a router relaying it).", "interface", "family")
		mismatched    = s.gauge("neighbours_mismatched", "Entries whose host was seen (ARP, NDP or its own packets) at a MAC other than the kernel's lladdr, unexplained: the entry's MAC not heard since.", "interface", "family")
		oldestStale   = s.gauge("neighbour_oldest_stale_age_seconds", "Age of the oldest STALE entry; absent when none is STALE.", "interface", "family")
		transitions   = s.counter("neighbour_transitions_total", "NUD state transitions seen; from or to is \"absent\" for creation and deletion.", "family", "from", "to")
		lladdrChanges = s.counter("neighbour_lladdr_changes_total", "Changes of an entry's link-layer address.", "interface", "family")
		bypass        = s.counter("neighbour_bypass_packets_total", "Packets sent to STALE entries without passing the neighbour subsystem, as counted by the tracer.", "interface", "family")
		stuckInfo     = s.gauge("stuck_neighbour_info", "One series per stuck entry (capped), naming it for alerts; segment is the subnet of the interface that holds the neighbour's address (else its first), which tells apart two hosts with one address and MAC on two segments.", "interface", "family", "ip", "lladdr", "seen_lladdr", "segment")
		stuckDropped  = s.gauge("stuck_neighbour_info_dropped", "Stuck entries over --metrics.stuck-info-limit, named in no neighwatch_stuck_neighbour_info series now (the same at every scrape).")
		tableBytes    = s.gauge("table_bytes", "Memory the table's entries take: their records and index, which live outside the Go heap (go_memstats_* do not count them), and the evidence kept of the few that have some.")
		eventsDropped = s.counter("events_dropped_total", "Events lost by slow subscribers, by subscriber: events (a client of neighwatch events), managed (the managed entries' recovery tracker), action (a remediation action waiting for the kernel), other; the table itself loses none, nor do the move checks, which see every event.", "subscriber")
		managed       = s.gauge("managed_neighbours", "Managed entries (the kernel re-validates them itself) by owner: neighwatch (its manage strategy) or other; only non-zero series.", "interface", "family", "owner", "state")
	)
	s.update = func(ch chan<- prometheus.Metric) error {
		st := t.Stats(stuckCap)
		names := make(map[int32]string, len(st.Interfaces))
		for _, is := range st.Interfaces {
			names[is.Ifindex] = is.Name
		}
		for _, is := range byName(st.Interfaces) {
			for _, fs := range is.Families {
				total := 0
				for _, n := range fs.States {
					total += n
				}
				if total == 0 && fs.LLAddrChanges == 0 && fs.Bypass == 0 {
					continue
				}
				fam := fs.Family.String()
				for _, state := range table.AllStates() {
					ch <- neighbours.with(float64(fs.Count(state)), is.Name, fam, state.String())
				}
				ch <- staleLong.with(float64(fs.StaleLong), is.Name, fam)
				ch <- atRisk.with(float64(fs.AtRisk), is.Name, fam)
				ch <- stuck.with(float64(fs.Stuck), is.Name, fam)
				ch <- conflict.with(float64(fs.Conflict), is.Name, fam)
				ch <- multiMAC.with(float64(fs.MultiMAC), is.Name, fam)
				ch <- mismatched.with(float64(fs.Mismatched), is.Name, fam)
				ch <- lladdrChanges.with(float64(fs.LLAddrChanges), is.Name, fam)
				ch <- bypass.with(float64(fs.Bypass), is.Name, fam)
				if fs.HasStale {
					ch <- oldestStale.with(fs.OldestStale.Seconds(), is.Name, fam)
				}
				for _, o := range []table.Owner{table.OwnerNeighwatch, table.OwnerOther} {
					for _, state := range table.AllStates() {
						if n := fs.CountManaged(o, state); n > 0 {
							ch <- managed.with(float64(n), is.Name, fam, o.String(), state.String())
						}
					}
				}
			}
		}
		for _, tr := range st.Transitions {
			ch <- transitions.with(float64(tr.Count), tr.Family.String(), tr.From, tr.To)
		}
		segErr := sendStuck(ch, stuckInfo, st.Stuck, names, segments)
		ch <- stuckDropped.with(float64(max(st.StuckTotal-len(st.Stuck), 0)))
		by := t.Events().DroppedBy()
		for _, who := range table.Subscribers() {
			ch <- eventsDropped.with(float64(by[who]), string(who))
		}
		ch <- tableBytes.with(float64(st.Bytes))
		return segErr
	}
	return s
}

// sendStuck sends one series per stuck entry, its segment among its
// labels. The interfaces' addresses are read only when an entry is
// stuck; unread, every segment is "" and the error says why (the
// collector says it failed, after sending the rest).
func sendStuck(ch chan<- prometheus.Metric, info metric, stuck []table.Entry, names map[int32]string, segments SegmentsReader) error {
	var segmentOf func(int32, netip.Addr) string
	var err error
	if len(stuck) > 0 && segments != nil {
		segmentOf, err = segments()
	}
	seen := make(map[[6]string]bool, len(stuck))
	for _, e := range stuck {
		seg := ""
		if segmentOf != nil {
			seg = segmentOf(e.Ifindex, e.Addr)
		}
		lv := [6]string{names[e.Ifindex], e.Family().String(), e.Addr.String(), e.HardwareAddr().String(), macString(e.DisputingMAC()), seg}
		if seen[lv] { // the same entry on a deleted link and its successor of the same name
			continue
		}
		seen[lv] = true
		ch <- info.with(1, lv[:]...)
	}
	return err
}

// byName merges the aggregates of interfaces that share a name: a link
// deleted and re-created with the same name is two interfaces until the
// deletion is processed, and metrics are keyed by name, so two series
// would collide. Counts add up; the oldest STALE age is the larger.
func byName(in []table.InterfaceStats) []table.InterfaceStats {
	out := make([]table.InterfaceStats, 0, len(in))
	at := make(map[string]int, len(in))
	for _, is := range in {
		i, ok := at[is.Name]
		if !ok {
			at[is.Name] = len(out)
			out = append(out, is)
			continue
		}
		m := &out[i]
		for f := range m.Families {
			a, b := &m.Families[f], &is.Families[f]
			for k := range a.States {
				a.States[k] += b.States[k]
			}
			a.StaleLong += b.StaleLong
			a.AtRisk += b.AtRisk
			a.Stuck += b.Stuck
			a.Conflict += b.Conflict
			a.MultiMAC += b.MultiMAC
			a.Mismatched += b.Mismatched
			a.LLAddrChanges += b.LLAddrChanges
			a.Bypass += b.Bypass
			for o := range a.Managed {
				for k := range a.Managed[o] {
					a.Managed[o][k] += b.Managed[o][k]
				}
			}
			if b.HasStale && (!a.HasStale || b.OldestStale > a.OldestStale) {
				a.OldestStale, a.HasStale = b.OldestStale, true
			}
		}
	}
	return out
}

func macString(s string) string {
	if s == "" {
		return ""
	}
	return net.HardwareAddr(s).String()
}
