package evidence

import (
	"bytes"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/neighwatch/neighwatch/table"
	"github.com/vishvananda/netns"
)

// Config configures a Watcher.
type Config struct {
	// NetNS is the namespace whose interfaces are listened to; nil means
	// the caller's.
	NetNS *netns.NsHandle
	// ConflictWindow: two answers for one IP from different MACs within it
	// are a conflict.
	ConflictWindow time.Duration
	// MaxHosts bounds the evidence kept (one record per IP and interface);
	// past it the least recently seen host is evicted.
	MaxHosts int
	// HostTTL: a host not seen for this long is forgotten.
	HostTTL time.Duration
	Logger  *slog.Logger
}

// DefaultMaxHosts is how many hosts (IP and interface) the evidence map
// keeps when Config.MaxHosts is not set; docs/detection.md names it.
const DefaultMaxHosts = 65536

// Defaults is the watcher's configuration on the agent's defaults; New
// fills zero fields from it.
func Defaults() Config {
	return Config{ConflictWindow: 5 * time.Second, MaxHosts: DefaultMaxHosts, HostTTL: time.Hour}
}

// Link is an interface to listen on.
type Link struct {
	Name         string
	HardwareAddr net.HardwareAddr
	MTU          int
}

func (l Link) same(o Link) bool {
	return l.Name == o.Name && bytes.Equal(l.HardwareAddr, o.HardwareAddr) && l.MTU == o.MTU
}

// Counters are one interface's counters at one moment.
type Counters struct {
	Packets    [numKinds]uint64 // by Kind
	Mismatches uint64
	Moves      uint64
	Conflicts  uint64
	// Drops are frames the kernel dropped before the listeners read them
	// (PACKET_STATISTICS: the socket's buffer was full).
	Drops uint64
}

// Add adds o's counts to c.
func (c *Counters) Add(o Counters) {
	for k := range c.Packets {
		c.Packets[k] += o.Packets[k]
	}
	c.Mismatches += o.Mismatches
	c.Moves += o.Moves
	c.Conflicts += o.Conflicts
	c.Drops += o.Drops
}

type ifCounters struct {
	packets    [numKinds]atomic.Uint64
	mismatches atomic.Uint64
	moves      atomic.Uint64
	conflicts  atomic.Uint64
	drops      atomic.Uint64
}

// HostStats are the evidence map's counts.
type HostStats struct {
	Hosts                    int    // hosts kept now
	EvictedFull, EvictedAged uint64 // forgotten: to make room, or not seen for HostTTL
	ListenerFailures         uint64 // listener starts that failed (retried with backoff)
	ListenersRunning, Wanted int    // listeners open, and wanted
}

// Watcher runs, per interface it is given, one ARP listener and one NDP
// listener (Neighbor Solicitations and Advertisements), and keeps
// arpwatch-style evidence: the last MAC seen for each sender IP.
//
// SetLink and ForgetLink only record what is wanted; a worker opens and
// closes the packet sockets, outside the lock: opening and closing one
// waits for an RCU grace period in the kernel, and an interface that
// comes and goes quickly must not hold up the caller (the mirror's link
// loop) or the readers.
type Watcher struct {
	cfg   Config
	log   *slog.Logger
	table Sink
	ready chan struct{}
	wake  chan struct{}

	mu        sync.Mutex
	running   bool
	links     map[int32]Link        // interfaces to listen on
	dirty     map[int32]bool        // links whose listeners may not match
	retries   map[listenerKey]retry // per listener: ARP and NDP fail and recover apart
	listeners map[listenerKey]*listener
	hosts     *hostLRU
	counters  map[int32]*ifCounters
	disabled  error

	evictedFull, evictedAged, failures atomic.Uint64
	malformed                          atomic.Uint64
}

// New returns a watcher that reports to t. It listens on nothing until
// Run, and then on the interfaces SetLink names.
func New(cfg Config, t Sink) *Watcher {
	d := Defaults()
	if cfg.ConflictWindow <= 0 {
		cfg.ConflictWindow = d.ConflictWindow
	}
	if cfg.MaxHosts <= 0 {
		cfg.MaxHosts = d.MaxHosts
	}
	if cfg.HostTTL <= 0 {
		cfg.HostTTL = d.HostTTL
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Watcher{
		cfg:       cfg,
		log:       cfg.Logger,
		table:     t,
		ready:     make(chan struct{}),
		wake:      make(chan struct{}, 1),
		links:     make(map[int32]Link),
		dirty:     make(map[int32]bool),
		retries:   make(map[listenerKey]retry),
		listeners: make(map[listenerKey]*listener),
		hosts:     newHostLRU(cfg.MaxHosts),
		counters:  make(map[int32]*ifCounters),
	}
}

// Ready is closed once Run has started the listeners of every interface it
// was given before.
func (w *Watcher) Ready() <-chan struct{} { return w.ready }

// Disabled returns why the listeners cannot run, or nil.
func (w *Watcher) Disabled() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.disabled
}

// Counters returns the counters of each interface that has had a listener.
// It reads the kernel's drop counts of the open sockets first.
func (w *Watcher) Counters() map[int32]Counters {
	w.mu.Lock()
	ls := make([]*listener, 0, len(w.listeners))
	keys := make([]listenerKey, 0, len(w.listeners))
	for k, l := range w.listeners {
		ls, keys = append(ls, l), append(keys, k)
	}
	w.mu.Unlock()
	for i, l := range ls {
		w.collectDrops(keys[i].ifindex, l)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make(map[int32]Counters, len(w.counters))
	for idx, c := range w.counters {
		var s Counters
		for k := range s.Packets {
			s.Packets[k] = c.packets[k].Load()
		}
		s.Mismatches, s.Moves, s.Conflicts, s.Drops = c.mismatches.Load(), c.moves.Load(), c.conflicts.Load(), c.drops.Load()
		out[idx] = s
	}
	return out
}

// Malformed returns how many frames did not parse.
func (w *Watcher) Malformed() uint64 { return w.malformed.Load() }

// HostStats returns the evidence map's counts.
func (w *Watcher) HostStats() HostStats {
	w.mu.Lock()
	defer w.mu.Unlock()
	return HostStats{
		Hosts: w.hosts.len(), EvictedFull: w.evictedFull.Load(), EvictedAged: w.evictedAged.Load(),
		ListenerFailures: w.failures.Load(), ListenersRunning: len(w.listeners), Wanted: 2 * len(w.links),
	}
}

// Listening returns the interfaces with a running ARP listener; ndp
// selects the NDP listeners instead.
func (w *Watcher) Listening(ndp bool) []int32 {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]int32, 0, len(w.listeners))
	for k := range w.listeners {
		if k.ndp == ndp {
			out = append(out, k.ifindex)
		}
	}
	return out
}

// Seen returns the last MAC seen for an IP on an interface.
func (w *Watcher) Seen(ifindex int32, ip netip.Addr) (net.HardwareAddr, time.Time, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	h := w.hosts.lookup(table.Key{Ifindex: ifindex, Addr: ip})
	if h == nil {
		return nil, time.Time{}, false
	}
	return net.HardwareAddr(h.mac), time.Unix(0, h.at), true
}

// SetLink starts listening on an interface (l != nil) or stops (l == nil,
// the interface left scope or cannot carry ARP). What was seen there is
// kept until ForgetLink. It returns at once; the worker does the rest.
func (w *Watcher) SetLink(ifindex int32, l *Link) {
	w.mu.Lock()
	if l == nil {
		delete(w.links, ifindex)
	} else {
		w.links[ifindex] = *l
	}
	delete(w.retries, listenerKey{ifindex, false})
	delete(w.retries, listenerKey{ifindex, true})
	w.dirty[ifindex] = true
	w.mu.Unlock()
	w.poke()
}

// ForgetLink stops listening on a deleted interface and forgets its
// counters and evidence.
func (w *Watcher) ForgetLink(ifindex int32) {
	w.mu.Lock()
	delete(w.links, ifindex)
	delete(w.retries, listenerKey{ifindex, false})
	delete(w.retries, listenerKey{ifindex, true})
	delete(w.counters, ifindex)
	w.hosts.forgetLink(ifindex)
	w.dirty[ifindex] = true
	w.mu.Unlock()
	w.poke()
}

// countersLocked returns an interface's counters, creating them.
func (w *Watcher) countersLocked(ifindex int32) *ifCounters {
	c := w.counters[ifindex]
	if c == nil {
		c = &ifCounters{}
		w.counters[ifindex] = c
	}
	return c
}

// expire forgets the hosts not seen for HostTTL.
func (w *Watcher) expire(now time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.evictedAged.Add(uint64(w.hosts.expire(now.Add(-w.cfg.HostTTL).UnixNano())))
}

// Observe records one observation: counts it, detects conflicts and hands
// it to the table for mismatch detection.
func (w *Watcher) Observe(ifindex int32, o Observation, now time.Time) {
	k := table.Key{Ifindex: ifindex, Addr: o.SenderIP}
	mac := string(o.SenderMAC)
	nanos := now.UnixNano()
	w.mu.Lock()
	c := w.countersLocked(ifindex)
	c.packets[o.Kind].Add(1)
	h, evicted := w.hosts.get(k)
	if evicted {
		w.evictedFull.Add(1)
	}
	was := h.mac
	verdict := h.observe(mac, nanos, int64(w.cfg.ConflictWindow))
	w.mu.Unlock()
	switch verdict {
	case Move:
		c.moves.Add(1)
	case Conflict:
		c.conflicts.Add(1)
		w.table.ReportConflict(k, net.HardwareAddr(was), o.SenderMAC, now, table.CauseARP,
			"answered from "+net.HardwareAddr(was).String()+" and "+o.SenderMAC.String()+" in turn within "+w.cfg.ConflictWindow.String())
	}
	observe := w.table.ObserveMAC
	if o.Kind.Announces() {
		observe = w.table.AnnounceMAC
	}
	if observe(ifindex, o.SenderIP, o.SenderMAC, now) {
		c.mismatches.Add(1)
	}
}
