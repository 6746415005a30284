package metrics

import (
	"log/slog"
	"net"
	"strconv"
	"sync/atomic"

	"github.com/neighwatch/neighwatch/monitor"
	"github.com/prometheus/client_golang/prometheus"
)

// Source is what the collector reads. *monitor.Monitor provides it through
// MonitorSource; tests provide their own.
type Source interface {
	Stats(stuckCap int) monitor.Stats
	Counters() *monitor.Counters
	ARPCounters() map[int32]*monitor.ARPCounters
	ARPMalformed() uint64
	EventsDropped() uint64
	TableParams() ([]monitor.TableParams, error)
}

// MonitorSource adapts a running monitor.
type MonitorSource struct{ M *monitor.Monitor }

func (s MonitorSource) Stats(n int) monitor.Stats                   { return s.M.Table().Stats(n) }
func (s MonitorSource) Counters() *monitor.Counters                 { return &s.M.Counters }
func (s MonitorSource) ARPCounters() map[int32]*monitor.ARPCounters { return s.M.ARP.Counters() }
func (s MonitorSource) ARPMalformed() uint64                        { return s.M.ARP.Malformed.Load() }
func (s MonitorSource) EventsDropped() uint64                       { return s.M.Table().Events().Dropped() }
func (s MonitorSource) TableParams() ([]monitor.TableParams, error) { return s.M.ReadTableParams() }

// Collector computes the neighbour metrics at scrape time. Its cost does not
// depend on the number of entries: the table keeps every aggregate current.
type Collector struct {
	src          Source
	stuckCap     int
	stuckDropped atomic.Uint64
	log          *slog.Logger

	neighbours, staleLong, stuck, mismatched, oldestStale *prometheus.Desc
	transitions, lladdrChanges, bypass                    *prometheus.Desc
	arpPackets, arpMismatches, arpConflicts, arpMalformed *prometheus.Desc
	ndpPackets                                            *prometheus.Desc
	resyncs, nlErrors, nlMessages, eventsDropped          *prometheus.Desc
	gcThresh, tblEntries, tblFulls, tblForcedGC           *prometheus.Desc
	stuckInfo, stuckInfoDropped                           *prometheus.Desc
}

func desc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc("neighwatch_"+name, help, labels, nil)
}

// NewCollector returns a collector over src exposing at most stuckCap
// stuck-entry info series per scrape.
func NewCollector(src Source, stuckCap int, log *slog.Logger) *Collector {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Collector{
		src:      src,
		stuckCap: stuckCap,
		log:      log,

		neighbours:    desc("neighbours", "Neighbour entries by interface, family and NUD state.", "interface", "family", "state"),
		staleLong:     desc("neighbours_stale_long", "Entries STALE for at least the stale threshold.", "interface", "family"),
		stuck:         desc("neighbours_stuck", "Stale-long entries with evidence that traffic still uses them or that the host moved.", "interface", "family"),
		mismatched:    desc("neighbours_mismatched", "Entries whose IP was last seen in ARP from a MAC other than the kernel's lladdr.", "interface", "family"),
		oldestStale:   desc("neighbour_oldest_stale_age_seconds", "Age of the oldest STALE entry; absent when none is STALE.", "interface", "family"),
		transitions:   desc("neighbour_transitions_total", "NUD state transitions seen; from or to is \"absent\" for creation and deletion.", "family", "from", "to"),
		lladdrChanges: desc("neighbour_lladdr_changes_total", "Changes of an entry's link-layer address.", "interface", "family"),
		bypass:        desc("neighbour_bypass_packets_total", "Packets sent to STALE entries without passing the neighbour subsystem, as counted by the tracer.", "interface", "family"),
		arpPackets:    desc("arp_packets_total", "ARP packets seen by the listeners.", "interface", "kind"),
		ndpPackets:    desc("ndp_packets_total", "Neighbor Solicitations and Advertisements seen by the NDP listeners.", "interface", "kind"),
		arpMismatches: desc("arp_mismatches_total", "Times an ARP or NDP packet showed an entry's IP at a MAC other than the kernel's lladdr.", "interface"),
		arpConflicts:  desc("arp_conflicts_total", "Times one IP answered from two MACs within the conflict window (ARP or NDP).", "interface"),
		arpMalformed:  desc("arp_malformed_frames_total", "Frames on ARP and NDP listeners that did not parse."),
		resyncs:       desc("netlink_resyncs_total", "Full dumps that reconciled the table, by reason.", "reason"),
		nlErrors:      desc("netlink_errors_total", "Netlink receive and decode errors, by kind.", "kind"),
		nlMessages:    desc("netlink_messages_total", "Neighbour messages applied to the table."),
		eventsDropped: desc("events_dropped_total", "Events lost by slow subscribers; the table itself loses none."),
		gcThresh:      desc("neighbour_table_gc_threshold", "Kernel neighbour table GC thresholds (host-wide).", "family", "threshold"),
		tblEntries:    desc("neighbour_table_entries", "Entries in the kernel neighbour table, all namespaces.", "family"),
		tblFulls:      desc("neighbour_table_fulls_total", "Times the kernel neighbour table was full (\"neighbor table overflow\").", "family"),
		tblForcedGC:   desc("neighbour_table_forced_gc_runs_total", "Forced garbage collections of the kernel neighbour table.", "family"),
		stuckInfo:     desc("stuck_neighbour_info", "One series per stuck entry (capped), naming it for alerts.", "interface", "family", "ip", "lladdr", "seen_lladdr"),
		stuckInfoDropped: desc("stuck_neighbour_info_dropped_total",
			"Stuck-entry info series left out because of the cap, summed over scrapes."),
	}
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.neighbours, c.staleLong, c.stuck, c.mismatched, c.oldestStale,
		c.transitions, c.lladdrChanges, c.bypass, c.arpPackets, c.ndpPackets, c.arpMismatches, c.arpConflicts, c.arpMalformed,
		c.resyncs, c.nlErrors, c.nlMessages, c.eventsDropped, c.gcThresh, c.tblEntries, c.tblFulls, c.tblForcedGC,
		c.stuckInfo, c.stuckInfoDropped} {
		ch <- d
	}
}

func gauge(d *prometheus.Desc, v float64, l ...string) prometheus.Metric {
	return prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, l...)
}

func counter(d *prometheus.Desc, v float64, l ...string) prometheus.Metric {
	return prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, l...)
}

// Collect implements prometheus.Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	st := c.src.Stats(c.stuckCap)
	names := make(map[int32]string, len(st.Interfaces))
	for _, is := range st.Interfaces {
		names[is.Ifindex] = is.Name
		for _, fs := range is.Families {
			total := 0
			for _, n := range fs.States {
				total += n
			}
			if total == 0 && fs.LLAddrChanges == 0 && fs.Bypass == 0 {
				continue
			}
			fam := fs.Family.String()
			for _, s := range monitor.AllStates() {
				ch <- gauge(c.neighbours, float64(fs.Count(s)), is.Name, fam, s.String())
			}
			ch <- gauge(c.staleLong, float64(fs.StaleLong), is.Name, fam)
			ch <- gauge(c.stuck, float64(fs.Stuck), is.Name, fam)
			ch <- gauge(c.mismatched, float64(fs.Mismatched), is.Name, fam)
			ch <- counter(c.lladdrChanges, float64(fs.LLAddrChanges), is.Name, fam)
			ch <- counter(c.bypass, float64(fs.Bypass), is.Name, fam)
			if fs.HasStale {
				ch <- gauge(c.oldestStale, fs.OldestStale.Seconds(), is.Name, fam)
			}
		}
	}
	for _, tr := range st.Transitions {
		ch <- counter(c.transitions, float64(tr.Count), tr.Family.String(), tr.From, tr.To)
	}
	for _, e := range st.Stuck {
		ch <- gauge(c.stuckInfo, 1, names[e.Ifindex], e.Family().String(), e.Addr.String(), e.HardwareAddr().String(), macString(e.SeenMAC))
	}
	if d := st.StuckTotal - len(st.Stuck); d > 0 {
		c.stuckDropped.Add(uint64(d))
	}
	ch <- counter(c.stuckInfoDropped, float64(c.stuckDropped.Load()))

	for idx, ac := range c.src.ARPCounters() {
		name, ok := names[idx]
		if !ok {
			name = strconv.Itoa(int(idx))
		}
		for _, k := range monitor.ARPKinds() {
			ch <- counter(c.arpPackets, float64(ac.Packets[k].Load()), name, k.String())
		}
		for _, k := range monitor.NDPKinds() {
			ch <- counter(c.ndpPackets, float64(ac.Packets[k].Load()), name, k.String())
		}
		ch <- counter(c.arpMismatches, float64(ac.Mismatches.Load()), name)
		ch <- counter(c.arpConflicts, float64(ac.Conflicts.Load()), name)
	}
	ch <- counter(c.arpMalformed, float64(c.src.ARPMalformed()))

	k := c.src.Counters()
	for reason, v := range map[string]uint64{
		"enobufs": k.ResyncENOBUFS.Load(), "dump_interrupted": k.ResyncInterrupt.Load(),
		"link": k.ResyncLink.Load(), "error": k.ResyncError.Load(), "periodic": k.ResyncPeriodic.Load(),
	} {
		ch <- counter(c.resyncs, float64(v), reason)
	}
	for kind, v := range map[string]uint64{
		"enobufs": k.ErrENOBUFS.Load(), "decode": k.ErrDecode.Load(), "socket": k.ErrSocket.Load(),
	} {
		ch <- counter(c.nlErrors, float64(v), kind)
	}
	ch <- counter(c.nlMessages, float64(k.Messages.Load()))
	ch <- counter(c.eventsDropped, float64(c.src.EventsDropped()))

	params, err := c.src.TableParams()
	if err != nil {
		c.log.Debug("reading neighbour table parameters failed", "err", err)
	}
	for _, p := range params {
		fam := p.Family.String()
		ch <- gauge(c.gcThresh, float64(p.Thresh1), fam, "1")
		ch <- gauge(c.gcThresh, float64(p.Thresh2), fam, "2")
		ch <- gauge(c.gcThresh, float64(p.Thresh3), fam, "3")
		if p.HasConfig {
			ch <- gauge(c.tblEntries, float64(p.Entries), fam)
		}
		if p.HasStats {
			ch <- counter(c.tblFulls, float64(p.TableFulls), fam)
			ch <- counter(c.tblForcedGC, float64(p.ForcedGCRuns), fam)
		}
	}
}

func macString(s string) string {
	if s == "" {
		return ""
	}
	return net.HardwareAddr(s).String()
}
