package monitor

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mdlayher/packet"
	"golang.org/x/sys/unix"
)

// ARPWatcher runs, per watched Ethernet interface, one ARP listener and one
// NDP listener (Neighbor Solicitations and Advertisements), and keeps
// arpwatch-style evidence: the last MAC seen for each sender IP.
type ARPWatcher struct {
	m       *Monitor
	started chan struct{}

	mu        sync.Mutex
	running   bool
	ctx       context.Context
	listeners map[listenerKey]*arpListener
	wanted    map[int32]*linkInfo
	hosts     map[Key]arpHost
	counters  map[int32]*ARPCounters
	disabled  error

	HostsDropped atomic.Uint64 // observations not kept because MaxARPHosts was reached
	Malformed    atomic.Uint64
}

// ARPCounters are per-interface ARP counters.
type ARPCounters struct {
	Packets    [numARPKinds]atomic.Uint64
	Mismatches atomic.Uint64
	Conflicts  atomic.Uint64
}

type arpHost struct {
	mac string
	at  int64
}

type listenerKey struct {
	ifindex int32
	ndp     bool
}

type arpListener struct {
	conn    net.PacketConn
	done    chan struct{}
	parse   func(frame []byte, own net.HardwareAddr) (ARPObservation, error)
	closing atomic.Bool
}

// close stops the listener; its reader sees closing and exits at once.
func (l *arpListener) close() {
	l.closing.Store(true)
	l.conn.Close()
}

func newARPWatcher(m *Monitor) *ARPWatcher {
	return &ARPWatcher{
		m:         m,
		started:   make(chan struct{}),
		listeners: make(map[listenerKey]*arpListener),
		wanted:    make(map[int32]*linkInfo),
		hosts:     make(map[Key]arpHost),
		counters:  make(map[int32]*ARPCounters),
	}
}

// Disabled returns why the listeners cannot run, or nil.
func (w *ARPWatcher) Disabled() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.disabled
}

// Counters returns the counters of each interface that has had a listener.
func (w *ARPWatcher) Counters() map[int32]*ARPCounters {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make(map[int32]*ARPCounters, len(w.counters))
	for k, v := range w.counters {
		out[k] = v
	}
	return out
}

// Listening returns the interfaces with a running ARP listener; ndp
// selects the NDP listeners instead.
func (w *ARPWatcher) Listening(ndp bool) []int32 {
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
func (w *ARPWatcher) Seen(ifindex int32, ip netip.Addr) (net.HardwareAddr, time.Time, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	h, ok := w.hosts[Key{Ifindex: ifindex, Addr: ip}]
	if !ok {
		return nil, time.Time{}, false
	}
	return net.HardwareAddr(h.mac), time.Unix(0, h.at), true
}

func (w *ARPWatcher) run(ctx context.Context) error {
	w.mu.Lock()
	w.ctx = ctx
	w.running = true
	for idx, li := range w.wanted {
		w.startLocked(idx, li)
	}
	w.mu.Unlock()
	close(w.started)
	<-ctx.Done()
	w.mu.Lock()
	w.running = false
	ls := w.listeners
	w.listeners = make(map[listenerKey]*arpListener)
	w.mu.Unlock()
	for _, l := range ls {
		l.close()
		<-l.done
	}
	return nil
}

// linkChanged starts or stops the listener of an interface; li nil means
// the interface is gone.
func (w *ARPWatcher) linkChanged(idx int32, li *linkInfo) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if li == nil || !li.watched || !li.arp {
		delete(w.wanted, idx)
		if li == nil {
			delete(w.counters, idx)
			for k := range w.hosts {
				if k.Ifindex == idx {
					delete(w.hosts, k)
				}
			}
		}
		for _, v6 := range []bool{false, true} {
			k := listenerKey{idx, v6}
			if l := w.listeners[k]; l != nil {
				delete(w.listeners, k)
				l.close()
			}
		}
		return
	}
	w.wanted[idx] = li
	if w.running {
		w.startLocked(idx, li)
	}
}

// startLocked starts the listeners of an interface that are not running.
func (w *ARPWatcher) startLocked(idx int32, li *linkInfo) {
	if w.disabled != nil {
		return
	}
	if w.counters[idx] == nil {
		w.counters[idx] = &ARPCounters{}
	}
	ifi := &net.Interface{Index: int(idx), Name: li.name, HardwareAddr: li.hw, MTU: li.mtu}
	for _, v6 := range []bool{false, true} {
		k := listenerKey{idx, v6}
		if w.listeners[k] != nil {
			continue
		}
		proto, parse, what := unix.ETH_P_ARP, ParseARP, "ARP"
		var cfg *packet.Config
		if v6 {
			filter, err := ndpFilter()
			if err != nil {
				w.m.log.Error("NDP socket filter does not assemble", "err", err)
				continue
			}
			proto, parse, what, cfg = unix.ETH_P_IPV6, ParseNDP, "NDP", &packet.Config{Filter: filter}
		}
		var conn net.PacketConn
		err := inNetns(w.m.ns(), func() error {
			c, err := packet.Listen(ifi, packet.Raw, proto, cfg)
			if err != nil {
				return err
			}
			conn = c
			return nil
		})
		if err != nil {
			if errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES) {
				w.disabled = errors.New("ARP and NDP listeners need CAP_NET_RAW (run as root or grant the capability)")
				w.m.log.Warn("ARP listener disabled: opening a packet socket was refused; mismatch detection is off", "interface", li.name, "err", err)
				return
			}
			w.m.log.Warn(what+" listener not started", "interface", li.name, "err", err)
			continue
		}
		l := &arpListener{conn: conn, done: make(chan struct{}), parse: parse}
		w.listeners[k] = l
		go w.read(k, li.hw, l, w.counters[idx])
	}
}

func (w *ARPWatcher) read(k listenerKey, own net.HardwareAddr, l *arpListener, c *ARPCounters) {
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
				w.Malformed.Add(1)
			}
			continue
		}
		w.Observe(k.ifindex, o, time.Now())
	}
}

// Observe records one observation: counts it, detects conflicts and hands
// it to the table for mismatch detection.
func (w *ARPWatcher) Observe(idx int32, o ARPObservation, now time.Time) {
	k := Key{Ifindex: idx, Addr: o.SenderIP}
	mac := string(o.SenderMAC)
	nanos := now.UnixNano()
	w.mu.Lock()
	c := w.counters[idx]
	if c == nil {
		c = &ARPCounters{}
		w.counters[idx] = c
	}
	c.Packets[o.Kind].Add(1)
	prev, had := w.hosts[k]
	conflict := had && prev.mac != mac && nanos-prev.at < int64(w.m.cfg.ConflictWindow)
	if had || len(w.hosts) < w.m.cfg.MaxARPHosts {
		w.hosts[k] = arpHost{mac: mac, at: nanos}
	} else {
		w.HostsDropped.Add(1)
	}
	w.mu.Unlock()
	t := w.m.table
	if conflict {
		c.Conflicts.Add(1)
		if t.events.Active() {
			t.events.publish(Event{
				Time: now, Ifindex: idx, Interface: t.linkName(idx), Family: familyOf(o.SenderIP), IP: o.SenderIP,
				LLAddr: o.SenderMAC, OldLLAddr: net.HardwareAddr(prev.mac), Cause: CauseARP, Kind: "conflict",
				Detail: "answered from " + net.HardwareAddr(prev.mac).String() + " and " + o.SenderMAC.String() + " within " + w.m.cfg.ConflictWindow.String(),
			})
		}
	}
	if t.ObserveARP(idx, o.SenderIP, o.SenderMAC, now) {
		c.Mismatches.Add(1)
	}
}
