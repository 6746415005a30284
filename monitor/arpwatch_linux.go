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

// ARPWatcher runs one ARP listener per watched Ethernet interface and keeps
// arpwatch-style evidence: the last MAC seen for each sender IP.
type ARPWatcher struct {
	m       *Monitor
	started chan struct{}

	mu        sync.Mutex
	running   bool
	ctx       context.Context
	listeners map[int32]*arpListener
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

type arpListener struct {
	conn net.PacketConn
	done chan struct{}
}

func newARPWatcher(m *Monitor) *ARPWatcher {
	return &ARPWatcher{
		m:         m,
		started:   make(chan struct{}),
		listeners: make(map[int32]*arpListener),
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

// Listening returns the interfaces with a running listener.
func (w *ARPWatcher) Listening() []int32 {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]int32, 0, len(w.listeners))
	for k := range w.listeners {
		out = append(out, k)
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
	w.listeners = make(map[int32]*arpListener)
	w.mu.Unlock()
	for _, l := range ls {
		l.conn.Close()
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
		if l := w.listeners[idx]; l != nil {
			delete(w.listeners, idx)
			l.conn.Close()
		}
		return
	}
	w.wanted[idx] = li
	if l := w.listeners[idx]; l != nil {
		return
	}
	if w.running {
		w.startLocked(idx, li)
	}
}

func (w *ARPWatcher) startLocked(idx int32, li *linkInfo) {
	if w.disabled != nil {
		return
	}
	ifi := &net.Interface{Index: int(idx), Name: li.name, HardwareAddr: li.hw, MTU: li.mtu}
	var conn net.PacketConn
	err := inNetns(w.m.ns(), func() error {
		c, err := packet.Listen(ifi, packet.Raw, unix.ETH_P_ARP, nil)
		if err != nil {
			return err
		}
		conn = c
		return nil
	})
	if err != nil {
		if errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES) {
			w.disabled = errors.New("ARP listeners need CAP_NET_RAW (run as root or grant the capability)")
			w.m.log.Warn("ARP listener disabled: opening a packet socket was refused; mismatch detection is off", "interface", li.name, "err", err)
			return
		}
		w.m.log.Warn("ARP listener not started", "interface", li.name, "err", err)
		return
	}
	if w.counters[idx] == nil {
		w.counters[idx] = &ARPCounters{}
	}
	l := &arpListener{conn: conn, done: make(chan struct{})}
	w.listeners[idx] = l
	go w.read(idx, li.hw, l, w.counters[idx])
}

func (w *ARPWatcher) read(idx int32, own net.HardwareAddr, l *arpListener, c *ARPCounters) {
	defer close(l.done)
	buf := make([]byte, 2048)
	failures := 0
	for {
		n, _, err := l.conn.ReadFrom(buf)
		if err != nil {
			// A packet socket reports ENETDOWN once when its interface is
			// or goes down, and works again when it comes up.
			if errors.Is(err, unix.ENETDOWN) {
				continue
			}
			if failures++; failures < 100 && !errors.Is(err, net.ErrClosed) && !errors.Is(err, os.ErrClosed) {
				time.Sleep(10 * time.Millisecond)
				continue
			}
			w.mu.Lock()
			if w.listeners[idx] == l {
				delete(w.listeners, idx)
			}
			w.mu.Unlock()
			l.conn.Close()
			return
		}
		failures = 0
		o, err := ParseARP(buf[:n], own)
		if err != nil {
			if !errors.Is(err, ErrOwnFrame) && !errors.Is(err, ErrNoSenderIP) {
				w.Malformed.Add(1)
			}
			continue
		}
		w.Observe(idx, o, time.Now())
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
				Time: now, Ifindex: idx, Interface: t.linkName(idx), Family: FamilyInet, IP: o.SenderIP,
				LLAddr: o.SenderMAC, OldLLAddr: net.HardwareAddr(prev.mac), Cause: CauseARP, Kind: "conflict",
				Detail: "answered from " + net.HardwareAddr(prev.mac).String() + " and " + o.SenderMAC.String() + " within " + w.m.cfg.ConflictWindow.String(),
			})
		}
	}
	if t.ObserveARP(idx, o.SenderIP, o.SenderMAC, now) {
		c.Mismatches.Add(1)
	}
}
