package evidence

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/neighwatch/neighwatch/internal/table"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// Config configures a Watcher.
type Config struct {
	// NetNS is the namespace whose interfaces are listened to; nil means
	// the caller's.
	NetNS *netns.NsHandle
	// ConflictWindow: two answers for one IP from different MACs within it
	// are a conflict.
	ConflictWindow time.Duration
	// MaxHosts bounds the evidence kept (one record per IP and interface).
	MaxHosts int
	Logger   *slog.Logger
}

// Link is an interface to listen on.
type Link struct {
	Name         string
	HardwareAddr net.HardwareAddr
	MTU          int
}

// Counters are one interface's counters at one moment.
type Counters struct {
	Packets    [numKinds]uint64 // by Kind
	Mismatches uint64
	Moves      uint64
	Conflicts  uint64
}

type ifCounters struct {
	packets    [numKinds]atomic.Uint64
	mismatches atomic.Uint64
	moves      atomic.Uint64
	conflicts  atomic.Uint64
}

// host is what was seen of one IP on one interface: the MAC it last
// answered from, and the one before it.
type host struct {
	mac     string
	at      int64 // last seen at mac
	prev    string
	changed int64 // when mac replaced prev
}

// Verdict is what one observation says about its host.
type Verdict uint8

// Verdicts.
const (
	Same     Verdict = iota // the MAC it was last seen at, or the first sighting
	Move                    // a new MAC: the host moved (one change is a move, not a duplicate)
	Conflict                // back to the MAC it left within the window: two MACs answering in turn
)

func (v Verdict) String() string {
	switch v {
	case Move:
		return "move"
	case Conflict:
		return "conflict"
	}
	return "same"
}

// observe applies one sighting of mac at now to h. Two MACs that answer in
// turn within window (A, B, A: arpwatch's "flip flop"), or both keep
// answering, are a conflict; a single change is a move.
func (h *host) observe(mac string, now, window int64) Verdict {
	switch {
	case h.mac == "" || mac == h.mac:
		h.mac, h.at = mac, now
		return Same
	case mac == h.prev && now-h.changed < window:
		h.prev, h.mac, h.at, h.changed = h.mac, mac, now, now
		return Conflict
	}
	h.prev, h.mac, h.at, h.changed = h.mac, mac, now, now
	return Move
}

type listenerKey struct {
	ifindex int32
	ndp     bool
}

// listener is one packet socket and its reader goroutine.
type listener struct {
	conn    net.PacketConn
	done    chan struct{}
	parse   func(frame []byte, own net.HardwareAddr) (Observation, error)
	closing atomic.Bool
}

// close stops the listener; its reader sees closing and exits at once.
func (l *listener) close() {
	l.closing.Store(true)
	l.conn.Close()
}

// Watcher runs, per interface it is given, one ARP listener and one NDP
// listener (Neighbor Solicitations and Advertisements), and keeps
// arpwatch-style evidence: the last MAC seen for each sender IP.
type Watcher struct {
	cfg   Config
	log   *slog.Logger
	table *table.Table
	ready chan struct{}

	mu        sync.Mutex
	ctx       context.Context // set while Run runs
	links     map[int32]Link  // interfaces to listen on
	listeners map[listenerKey]*listener
	hosts     map[table.Key]host
	counters  map[int32]*ifCounters
	disabled  error

	hostsDropped atomic.Uint64
	malformed    atomic.Uint64
}

// New returns a watcher that reports to t. It listens on nothing until
// Run, and then on the interfaces SetLink names.
func New(cfg Config, t *table.Table) *Watcher {
	if cfg.ConflictWindow <= 0 {
		cfg.ConflictWindow = 5 * time.Second
	}
	if cfg.MaxHosts <= 0 {
		cfg.MaxHosts = 65536
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Watcher{
		cfg:       cfg,
		log:       cfg.Logger,
		table:     t,
		ready:     make(chan struct{}),
		links:     make(map[int32]Link),
		listeners: make(map[listenerKey]*listener),
		hosts:     make(map[table.Key]host),
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
func (w *Watcher) Counters() map[int32]Counters {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make(map[int32]Counters, len(w.counters))
	for idx, c := range w.counters {
		var s Counters
		for k := range s.Packets {
			s.Packets[k] = c.packets[k].Load()
		}
		s.Mismatches, s.Moves, s.Conflicts = c.mismatches.Load(), c.moves.Load(), c.conflicts.Load()
		out[idx] = s
	}
	return out
}

// Malformed returns how many frames did not parse.
func (w *Watcher) Malformed() uint64 { return w.malformed.Load() }

// HostsDropped returns the observations not kept because MaxHosts was
// reached.
func (w *Watcher) HostsDropped() uint64 { return w.hostsDropped.Load() }

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
	h, ok := w.hosts[table.Key{Ifindex: ifindex, Addr: ip}]
	if !ok {
		return nil, time.Time{}, false
	}
	return net.HardwareAddr(h.mac), time.Unix(0, h.at), true
}

// SetLink starts listening on an interface (l != nil) or stops (l == nil,
// the interface left scope or cannot carry ARP). What was seen there is
// kept until ForgetLink.
func (w *Watcher) SetLink(ifindex int32, l *Link) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if l == nil {
		delete(w.links, ifindex)
		w.stopLocked(ifindex)
		return
	}
	w.links[ifindex] = *l
	if w.ctx != nil {
		w.startLocked(ifindex, *l)
	}
}

// ForgetLink stops listening on a deleted interface and forgets its
// counters and evidence.
func (w *Watcher) ForgetLink(ifindex int32) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.links, ifindex)
	w.stopLocked(ifindex)
	delete(w.counters, ifindex)
	for k := range w.hosts {
		if k.Ifindex == ifindex {
			delete(w.hosts, k)
		}
	}
}

func (w *Watcher) stopLocked(ifindex int32) {
	for _, v6 := range []bool{false, true} {
		k := listenerKey{ifindex, v6}
		if l := w.listeners[k]; l != nil {
			delete(w.listeners, k)
			l.close()
		}
	}
}

// Run listens until ctx ends.
func (w *Watcher) Run(ctx context.Context) error {
	w.mu.Lock()
	w.ctx = ctx
	for idx, l := range w.links {
		w.startLocked(idx, l)
	}
	w.mu.Unlock()
	close(w.ready)
	<-ctx.Done()
	w.mu.Lock()
	w.ctx = nil
	ls := w.listeners
	w.listeners = make(map[listenerKey]*listener)
	w.mu.Unlock()
	for _, l := range ls {
		l.close()
		<-l.done
	}
	return nil
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

// Observe records one observation: counts it, detects conflicts and hands
// it to the table for mismatch detection.
func (w *Watcher) Observe(ifindex int32, o Observation, now time.Time) {
	k := table.Key{Ifindex: ifindex, Addr: o.SenderIP}
	mac := string(o.SenderMAC)
	nanos := now.UnixNano()
	w.mu.Lock()
	c := w.countersLocked(ifindex)
	c.packets[o.Kind].Add(1)
	h, had := w.hosts[k]
	was := h.mac
	verdict := h.observe(mac, nanos, int64(w.cfg.ConflictWindow))
	if had || len(w.hosts) < w.cfg.MaxHosts {
		w.hosts[k] = h
	} else {
		w.hostsDropped.Add(1)
	}
	w.mu.Unlock()
	switch verdict {
	case Move:
		c.moves.Add(1)
	case Conflict:
		c.conflicts.Add(1)
		w.table.ObserveConflict(k, net.HardwareAddr(was), o.SenderMAC, now)
		if w.table.Events().Active() {
			w.table.Publish(table.Event{
				Time: now, Ifindex: ifindex, Family: table.FamilyOf(o.SenderIP), IP: o.SenderIP,
				LLAddr: o.SenderMAC, OldLLAddr: net.HardwareAddr(was), Cause: table.CauseARP, Kind: table.KindConflict,
				Detail: "answered from " + net.HardwareAddr(was).String() + " and " + o.SenderMAC.String() + " in turn within " + w.cfg.ConflictWindow.String(),
			})
		}
	}
	if w.table.ObserveMAC(ifindex, o.SenderIP, o.SenderMAC, now) {
		c.mismatches.Add(1)
	}
}

// read runs one listener until it is closed or its socket fails for good.
func (w *Watcher) read(k listenerKey, own net.HardwareAddr, l *listener) {
	defer close(l.done)
	buf := make([]byte, 2048)
	failures := 0
	for {
		n, _, err := l.conn.ReadFrom(buf)
		if err != nil {
			if l.closing.Load() {
				return
			}
			// A packet socket reports ENETDOWN once when its interface is
			// or goes down, and works again when it comes up.
			if errors.Is(err, unix.ENETDOWN) {
				continue
			}
			if failures++; failures < 100 && !errors.Is(err, net.ErrClosed) && !errors.Is(err, os.ErrClosed) && !errors.Is(err, unix.EBADF) {
				time.Sleep(10 * time.Millisecond)
				continue
			}
			w.mu.Lock()
			if w.listeners[k] == l {
				delete(w.listeners, k)
			}
			w.mu.Unlock()
			l.conn.Close()
			return
		}
		failures = 0
		o, err := l.parse(buf[:n], own)
		if err != nil {
			if !errors.Is(err, ErrOwnFrame) && !errors.Is(err, ErrNoSenderIP) && !errors.Is(err, ErrNoLinkLayer) {
				w.malformed.Add(1)
			}
			continue
		}
		w.Observe(k.ifindex, o, time.Now())
	}
}
