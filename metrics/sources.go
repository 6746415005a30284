package metrics

import (
	"log/slog"
	"strconv"

	"github.com/neighwatch/neighwatch/monitor/evidence"
	"github.com/neighwatch/neighwatch/monitor/mirror"
	"github.com/neighwatch/neighwatch/monitor/neightbl"
	"github.com/prometheus/client_golang/prometheus"
)

// EvidenceSource is what the evidence collector reads: the ARP/NDP
// watcher.
type EvidenceSource interface {
	Counters() map[int32]evidence.Counters
	Malformed() uint64
	HostStats() evidence.HostStats
}

// NewEvidenceCollector exposes the ARP and NDP listeners. names gives an
// interface's name (the table's).
func NewEvidenceCollector(src EvidenceSource, names func(ifindex int32) string, log *slog.Logger) prometheus.Collector {
	s := newSubsystem("evidence", log)
	var (
		arpPackets = s.counter("arp_packets_total", "ARP packets seen by the listeners.", "interface", "kind")
		ndpPackets = s.counter("ndp_packets_total", "Neighbor Solicitations and Advertisements seen by the NDP listeners.", "interface", "kind")
		mismatches = s.counter("arp_mismatches_total", "Times an entry became mismatched: an ARP or NDP packet showed its IP at a MAC other than the kernel's lladdr, where it had not been mismatched (packets that keep showing it count in arp_packets_total, not here).", "interface")
		moves      = s.counter("arp_moves_total", "Times an IP was seen (ARP or NDP) at a new MAC: a host that moved.", "interface")
		conflicts  = s.counter("arp_conflicts_total", "Times two MACs answered for one IP in turn within the conflict window (ARP or NDP): a duplicate IP or a spoofer.", "interface")
		drops      = s.counter("arp_socket_drops_total", "Frames the kernel dropped before the ARP and NDP listeners read them (PACKET_STATISTICS: the socket buffer was full).", "interface")
		malformed  = s.counter("arp_malformed_frames_total", "Frames on ARP and NDP listeners that did not parse.")
		hosts      = s.gauge("arp_hosts", "Hosts (IP and interface) the ARP and NDP evidence map holds.")
		evicted    = s.counter("arp_hosts_evicted_total", "Hosts the evidence map forgot: the least recently seen to make room (full), or not seen for an hour (aged).", "reason")
		failures   = s.counter("arp_listener_failures_total", "ARP and NDP listeners that failed to start or failed while reading; each is retried with backoff.")
		listeners  = s.gauge("arp_listeners", "ARP and NDP listener sockets open; wanted: one of each per watched Ethernet interface.", "state")
	)
	s.update = func(ch chan<- prometheus.Metric) error {
		// Summed by name: a link re-created with the same name is two
		// interfaces until the deletion is processed.
		byName := make(map[string]*evidence.Counters)
		for idx, c := range src.Counters() {
			name := names(idx)
			if name == "" {
				name = strconv.Itoa(int(idx))
			}
			m := byName[name]
			if m == nil {
				m = &evidence.Counters{}
				byName[name] = m
			}
			m.Add(c)
		}
		for name, c := range byName {
			for _, k := range evidence.ARPKinds() {
				ch <- arpPackets.with(float64(c.Packets[k]), name, k.String())
			}
			for _, k := range evidence.NDPKinds() {
				ch <- ndpPackets.with(float64(c.Packets[k]), name, k.String())
			}
			ch <- mismatches.with(float64(c.Mismatches), name)
			ch <- moves.with(float64(c.Moves), name)
			ch <- conflicts.with(float64(c.Conflicts), name)
			ch <- drops.with(float64(c.Drops), name)
		}
		ch <- malformed.with(float64(src.Malformed()))
		hs := src.HostStats()
		ch <- hosts.with(float64(hs.Hosts))
		ch <- evicted.with(float64(hs.EvictedFull), "full")
		ch <- evicted.with(float64(hs.EvictedAged), "aged")
		ch <- failures.with(float64(hs.ListenerFailures))
		ch <- listeners.with(float64(hs.ListenersRunning), "open")
		ch <- listeners.with(float64(hs.Wanted), "wanted")
		return nil
	}
	return s
}

// NetlinkSource is what the netlink collector reads: the mirror.
type NetlinkSource interface {
	Counters() mirror.Counters
}

// NewNetlinkCollector exposes the netlink mirror's own work: messages,
// resyncs and errors, each counter as mirror.CounterInfo declares it.
func NewNetlinkCollector(src NetlinkSource, log *slog.Logger) prometheus.Collector {
	s := newSubsystem("netlink", log)
	send := s.counted(mirror.CounterInfo[:])
	s.update = func(ch chan<- prometheus.Metric) error {
		k := src.Counters()
		send(ch, k[:])
		return nil
	}
	return s
}

// KernelTableSource reads the kernel neighbour tables' parameters.
type KernelTableSource interface {
	Read() ([]neightbl.Params, error)
}

// NewKernelTableCollector exposes the kernel neighbour tables' GC
// thresholds and statistics, read at every scrape (RTM_GETNEIGHTBL).
func NewKernelTableCollector(src KernelTableSource, log *slog.Logger) prometheus.Collector {
	s := newSubsystem("kernel_table", log)
	var (
		thresh   = s.gauge("neighbour_table_gc_threshold", "Kernel neighbour table GC thresholds (host-wide).", "family", "threshold")
		entries  = s.gauge("neighbour_table_entries", "Entries in the kernel neighbour table, all namespaces.", "family")
		fulls    = s.counter("neighbour_table_fulls_total", "Times the kernel neighbour table was full (\"neighbor table overflow\").", "family")
		forcedGC = s.counter("neighbour_table_forced_gc_runs_total", "Forced garbage collections of the kernel neighbour table.", "family")
	)
	s.update = func(ch chan<- prometheus.Metric) error {
		params, err := src.Read()
		if err != nil {
			return err
		}
		for _, p := range params {
			fam := p.Family.String()
			ch <- thresh.with(float64(p.Thresh1), fam, "1")
			ch <- thresh.with(float64(p.Thresh2), fam, "2")
			ch <- thresh.with(float64(p.Thresh3), fam, "3")
			if p.HasConfig {
				ch <- entries.with(float64(p.Entries), fam)
			}
			if p.HasStats {
				ch <- fulls.with(float64(p.TableFulls), fam)
				ch <- forcedGC.with(float64(p.ForcedGCRuns), fam)
			}
		}
		return nil
	}
	return s
}
