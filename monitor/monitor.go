package monitor

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"regexp"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sync/errgroup"
	"golang.org/x/sys/unix"
)

// Config configures a Monitor.
type Config struct {
	// NetNS is the namespace to watch; nil means the caller's.
	NetNS *netns.NsHandle
	// Include and Exclude select interfaces by name. An interface is
	// watched when it matches any Include (or Include is empty) and no
	// Exclude.
	Include, Exclude []*regexp.Regexp
	// StaleThreshold is how long an entry must be STALE to be stale-long.
	StaleThreshold time.Duration
	// ReceiveBuffer is the netlink socket's receive buffer in bytes.
	ReceiveBuffer int
	// ARP enables the ARP listeners (needs CAP_NET_RAW).
	ARP bool
	// ConflictWindow: two ARP answers for one IP from different MACs within
	// it are a conflict.
	ConflictWindow time.Duration
	// ResyncInterval is how often a full dump reconciles the table even
	// without errors: the kernel creates some entries (IPv6 multicast,
	// NOARP) without telling netlink. Zero disables it.
	ResyncInterval time.Duration
	// MaxARPHosts bounds the ARP evidence kept for IPs without an entry.
	MaxARPHosts int
	Logger      *slog.Logger
}

// DefaultReceiveBuffer holds a burst of about 20,000 notifications.
const DefaultReceiveBuffer = 16 << 20

// Counters are the monitor's own operational counters.
type Counters struct {
	Messages        atomic.Uint64 // neighbour messages applied
	Dumps           atomic.Uint64 // full dumps completed
	ResyncENOBUFS   atomic.Uint64 // resyncs after the socket overflowed
	ResyncInterrupt atomic.Uint64 // dumps redone because the kernel flagged them inconsistent
	ResyncLink      atomic.Uint64 // resyncs after an interface came into scope
	ResyncError     atomic.Uint64 // resyncs after another socket error
	ResyncPeriodic  atomic.Uint64 // scheduled reconciliations
	ErrENOBUFS      atomic.Uint64
	ErrDecode       atomic.Uint64
	ErrSocket       atomic.Uint64
	LinkResubscribe atomic.Uint64
	Ignored         atomic.Uint64 // messages for unwatched interfaces or other families
}

// Monitor mirrors the neighbour tables of one namespace into a Table.
type Monitor struct {
	cfg      Config
	log      *slog.Logger
	table    *Table
	Counters Counters
	ARP      *ARPWatcher

	ready     chan struct{}
	readyOnce sync.Once

	linkMu sync.RWMutex
	links  map[int32]*linkInfo
	handle *netlink.Handle

	resyncReq atomic.Bool
	sockMu    sync.Mutex
	sock      *nlSocket
	rcvbuf    atomic.Int64
	forced    atomic.Bool
}

type linkInfo struct {
	name    string
	watched bool
	hw      net.HardwareAddr
	up      bool
	arp     bool // can carry ARP: Ethernet-like, not loopback, not NOARP
	mtu     int
}

// New builds a Monitor. It opens nothing until Run.
func New(cfg Config) (*Monitor, error) {
	if cfg.StaleThreshold <= 0 {
		cfg.StaleThreshold = 60 * time.Second
	}
	if cfg.ReceiveBuffer == 0 {
		cfg.ReceiveBuffer = DefaultReceiveBuffer
	}
	if cfg.ConflictWindow == 0 {
		cfg.ConflictWindow = 5 * time.Second
	}
	if cfg.MaxARPHosts == 0 {
		cfg.MaxARPHosts = 65536
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	m := &Monitor{
		cfg:   cfg,
		log:   cfg.Logger,
		table: NewTable(cfg.StaleThreshold, nil),
		ready: make(chan struct{}),
		links: make(map[int32]*linkInfo),
	}
	m.ARP = newARPWatcher(m)
	return m, nil
}

// Table returns the mirror.
func (m *Monitor) Table() *Table { return m.table }

// Ready is closed once the first dump is loaded and the listeners started.
func (m *Monitor) Ready() <-chan struct{} { return m.ready }

// ReceiveBuffer returns the effective receive buffer of the current socket
// and whether it was forced past rmem_max.
func (m *Monitor) ReceiveBuffer() (int, bool) { return int(m.rcvbuf.Load()), m.forced.Load() }

func (m *Monitor) ns() netns.NsHandle {
	if m.cfg.NetNS == nil {
		return netns.None()
	}
	return *m.cfg.NetNS
}

// watchedName applies the include/exclude regexes.
func (m *Monitor) watchedName(name string) bool {
	return Selected(name, m.cfg.Include, m.cfg.Exclude)
}

// Selected reports whether name matches any of include (or include is
// empty) and none of exclude.
func Selected(name string, include, exclude []*regexp.Regexp) bool {
	ok := len(include) == 0
	for _, re := range include {
		if re.MatchString(name) {
			ok = true
			break
		}
	}
	if !ok {
		return false
	}
	for _, re := range exclude {
		if re.MatchString(name) {
			return false
		}
	}
	return true
}

// Run follows the neighbour tables and links until ctx ends.
func (m *Monitor) Run(ctx context.Context) error {
	var err error
	err = inNetns(m.ns(), func() error {
		m.handle, err = netlink.NewHandle(unix.NETLINK_ROUTE)
		return err
	})
	if err != nil {
		return fmt.Errorf("open netlink handle: %w", err)
	}
	defer m.handle.Close()
	links, err := m.handle.LinkList()
	if err != nil {
		return fmt.Errorf("list interfaces: %w", err)
	}
	for _, l := range links {
		m.updateLink(l, false)
	}
	g, ctx := errgroup.WithContext(ctx)
	neighReady := make(chan struct{})
	g.Go(func() error { return m.runNeigh(ctx, neighReady) })
	g.Go(func() error { return m.runLinks(ctx) })
	g.Go(func() error { return m.runClassifier(ctx) })
	if m.cfg.ResyncInterval > 0 {
		g.Go(func() error {
			tick := time.NewTicker(m.cfg.ResyncInterval)
			defer tick.Stop()
			for {
				select {
				case <-ctx.Done():
					return nil
				case <-tick.C:
					m.Counters.ResyncPeriodic.Add(1)
					m.Resync()
				}
			}
		})
	}
	if m.cfg.ARP {
		g.Go(func() error { return m.ARP.run(ctx) })
	}
	g.Go(func() error {
		select {
		case <-neighReady:
		case <-ctx.Done():
			return nil
		}
		if m.cfg.ARP {
			select {
			case <-m.ARP.started:
			case <-ctx.Done():
				return nil
			}
		}
		m.readyOnce.Do(func() { close(m.ready) })
		return nil
	})
	return g.Wait()
}

// Resync asks for a fresh dump; entries it does not confirm are deleted.
func (m *Monitor) Resync() {
	m.resyncReq.Store(true)
	m.sockMu.Lock()
	if m.sock != nil {
		m.sock.interrupt()
	}
	m.sockMu.Unlock()
}

// runNeigh owns the neighbour socket. Any receive error, ENOBUFS above
// all, closes the socket, opens a new one and resyncs against a dump.
func (m *Monitor) runNeigh(ctx context.Context, ready chan struct{}) error {
	initial := true
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		err := m.session(ctx, initial, ready)
		if ctx.Err() != nil {
			return nil
		}
		var perm permanentError
		if errors.As(err, &perm) {
			return err
		}
		if errors.Is(err, unix.ENOBUFS) {
			m.Counters.ErrENOBUFS.Add(1)
			m.Counters.ResyncENOBUFS.Add(1)
			m.log.Debug("neighbour socket overflowed, resyncing", "rcvbuf", m.rcvbuf.Load())
			initial = initial && !m.loaded()
			continue // no backoff: the overflow is over, the dump is the cure
		}
		m.Counters.ErrSocket.Add(1)
		m.Counters.ResyncError.Add(1)
		m.log.Warn("neighbour socket failed, resyncing", "err", err, "retry_in", backoff)
		initial = initial && !m.loaded()
		select {
		case <-time.After(backoff):
		case <-ctx.Done():
			return nil
		}
		backoff = min(backoff*2, 5*time.Second)
	}
	return nil
}

func (m *Monitor) loaded() bool {
	select {
	case <-m.ready:
		return true
	default:
		return m.Counters.Dumps.Load() > 0
	}
}

type permanentError struct{ error }

func (e permanentError) Unwrap() error { return e.error }

// session runs one socket from subscription to failure.
func (m *Monitor) session(ctx context.Context, initial bool, ready chan struct{}) error {
	var sock *nlSocket
	err := inNetns(m.ns(), func() error {
		var err error
		sock, err = openNeighSocket(m.cfg.ReceiveBuffer)
		return err
	})
	if err != nil {
		if errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES) {
			return permanentError{err}
		}
		return err
	}
	m.rcvbuf.Store(int64(sock.rcvbuf))
	m.forced.Store(sock.forced)
	m.sockMu.Lock()
	m.sock = sock
	m.sockMu.Unlock()
	stop := context.AfterFunc(ctx, func() { sock.Close() })
	defer func() {
		stop()
		m.sockMu.Lock()
		m.sock = nil
		m.sockMu.Unlock()
		sock.Close()
	}()

	var seq uint32
	var dumping, redump bool
	var began time.Time
	// startDump asks for a full dump; entries it does not confirm are
	// deleted when it ends.
	startDump := func(initial bool) error {
		seq++
		dumping = true
		began = time.Now()
		m.table.beginSync(initial)
		if err := sock.requestDump(seq); err != nil {
			return fmt.Errorf("request neighbour dump: %w", err)
		}
		return nil
	}
	m.resyncReq.Store(false)
	if err := startDump(initial); err != nil {
		return err
	}
	batch := make([]Update, 0, 256)
	for {
		b, err := sock.recv()
		if err != nil {
			if isInterrupt(err) {
				sock.clearInterrupt()
				if m.resyncReq.Swap(false) {
					if dumping {
						redump = true
					} else if err := startDump(false); err != nil {
						return err
					}
				}
				continue
			}
			return err
		}
		done, intr, err := m.processDatagram(b, seq, dumping, &batch)
		if err != nil {
			return err
		}
		redump = redump || intr
		if done {
			dumping = false
			deleted := m.table.endSync()
			m.Counters.Dumps.Add(1)
			if initial {
				initial = false
				m.log.Info("neighbour table loaded", "entries", m.table.Len(), "took", time.Since(began), "rcvbuf", sock.rcvbuf)
			} else {
				m.log.Debug("neighbour table resynced", "entries", m.table.Len(), "deleted", deleted, "took", time.Since(began))
			}
			select {
			case <-ready:
			default:
				close(ready)
			}
			if redump || m.resyncReq.Swap(false) {
				if redump {
					m.Counters.ResyncInterrupt.Add(1)
				}
				redump = false
				if err := startDump(false); err != nil {
					return err
				}
			}
		}
	}
}

// processDatagram decodes one datagram and applies its neighbour messages.
// It reports whether the datagram ended the dump with sequence seq, and
// whether the kernel flagged the dump as interrupted (inconsistent).
func (m *Monitor) processDatagram(b []byte, seq uint32, dumping bool, batch *[]Update) (done, interrupted bool, err error) {
	*batch = (*batch)[:0]
	perr := parseDatagram(b, func(msg nlmsg) error {
		switch msg.Type {
		case unix.NLMSG_DONE:
			if msg.Seq == seq && dumping {
				done = true
			}
			return nil
		case unix.NLMSG_ERROR:
			if len(msg.Body) >= 4 {
				if code := int32(binary.NativeEndian.Uint32(msg.Body)); code != 0 && msg.Seq == seq {
					err = fmt.Errorf("neighbour dump refused: %w", unix.Errno(-code))
				}
			}
			return nil
		case unix.RTM_NEWNEIGH, unix.RTM_DELNEIGH:
		default:
			return nil
		}
		if msg.Flags&unix.NLM_F_DUMP_INTR != 0 {
			interrupted = true
		}
		u, derr := DecodeNeigh(msg.Type, msg.Body)
		if derr != nil {
			m.Counters.ErrDecode.Add(1)
			return nil
		}
		*batch = append(*batch, u)
		return nil
	})
	if perr != nil {
		m.Counters.ErrDecode.Add(1)
	}
	if err != nil {
		return false, false, err
	}
	m.applyBatch(*batch)
	return done, interrupted, nil
}

// applyBatch filters one datagram's updates and applies them under a
// single lock. Dump replies and notifications are applied alike: each
// carries the entry's full state.
func (m *Monitor) applyBatch(batch []Update) {
	if len(batch) == 0 {
		return
	}
	kept := batch[:0]
	for _, u := range batch {
		if (u.Family != unix.AF_INET && u.Family != unix.AF_INET6) || u.Flags&FlagProxy != 0 {
			m.Counters.Ignored.Add(1)
			continue
		}
		if !m.watchedIndex(u.Ifindex) {
			m.Counters.Ignored.Add(1)
			continue
		}
		kept = append(kept, u)
	}
	cause := CauseNetlink
	m.table.Apply(cause, kept...)
	m.Counters.Messages.Add(uint64(len(kept)))
}

// watchedIndex reports whether entries of an interface belong in the
// table, learning interfaces the link watcher has not reported yet.
func (m *Monitor) watchedIndex(ifindex int32) bool {
	m.linkMu.RLock()
	li := m.links[ifindex]
	m.linkMu.RUnlock()
	if li != nil {
		return li.watched
	}
	l, err := m.handle.LinkByIndex(int(ifindex))
	if err != nil {
		return false // gone already; its entries go with it
	}
	return m.updateLink(l, false).watched
}

// updateLink records a link's attributes; it returns the new info and
// starts or stops what depends on it.
func (m *Monitor) updateLink(l netlink.Link, announce bool) *linkInfo {
	a := l.Attrs()
	li := &linkInfo{
		name:    a.Name,
		watched: m.watchedName(a.Name),
		hw:      a.HardwareAddr,
		up:      a.Flags&net.FlagUp != 0,
		mtu:     a.MTU,
		arp:     len(a.HardwareAddr) == 6 && a.Flags&net.FlagLoopback == 0 && a.RawFlags&unix.IFF_NOARP == 0,
	}
	idx := int32(a.Index)
	m.linkMu.Lock()
	old := m.links[idx]
	m.links[idx] = li
	m.linkMu.Unlock()
	m.table.SetLinkName(idx, a.Name)
	if announce && old != nil && old.watched && !li.watched {
		n := m.table.DeleteLink(idx, CauseLink)
		m.table.SetLinkName(idx, a.Name)
		m.log.Info("interface left scope", "interface", a.Name, "entries_dropped", n)
	}
	if announce && old != nil && !old.watched && li.watched {
		m.Counters.ResyncLink.Add(1)
		m.Resync()
	}
	if m.cfg.ARP {
		m.ARP.linkChanged(idx, li)
	}
	return li
}

func (m *Monitor) deleteLink(idx int32) {
	m.linkMu.Lock()
	li := m.links[idx]
	delete(m.links, idx)
	m.linkMu.Unlock()
	n := m.table.DeleteLink(idx, CauseLink)
	if m.cfg.ARP {
		m.ARP.linkChanged(idx, nil)
	}
	if li != nil {
		m.log.Info("interface deleted", "interface", li.name, "entries_dropped", n)
	}
}

// Interfaces returns the known interfaces by index, with whether each is
// watched.
func (m *Monitor) Interfaces() map[int32]string {
	m.linkMu.RLock()
	defer m.linkMu.RUnlock()
	out := make(map[int32]string, len(m.links))
	for i, l := range m.links {
		if l.watched {
			out[i] = l.name
		}
	}
	return out
}

// runLinks follows RTM_NEWLINK/RTM_DELLINK, resubscribing when the
// subscription fails. After each subscription it lists the links and
// reconciles, so nothing that changed while unsubscribed is missed.
//
// The library's ListExisting option is not used: it sends the dump request
// to the multicast group address, which the kernel refuses without
// CAP_NET_ADMIN, and the agent must work unprivileged.
func (m *Monitor) runLinks(ctx context.Context) error {
	for ctx.Err() == nil {
		ch := make(chan netlink.LinkUpdate, 1024)
		done := make(chan struct{})
		var subErr atomic.Value
		ns := m.ns()
		opts := netlink.LinkSubscribeOptions{ErrorCallback: func(err error) { subErr.Store(err) }}
		if ns.IsOpen() {
			opts.Namespace = &ns
		}
		if err := netlink.LinkSubscribeWithOptions(ch, done, opts); err != nil {
			close(done)
			return fmt.Errorf("subscribe to link notifications: %w", err)
		}
		m.reconcileLinks()
	loop:
		for {
			select {
			case <-ctx.Done():
				close(done)
				for range ch { // the library's reader exits and closes ch
				}
				return nil
			case u, ok := <-ch:
				if !ok {
					break loop
				}
				if u.Header.Type == unix.RTM_DELLINK {
					m.deleteLink(int32(u.Attrs().Index))
					continue
				}
				m.updateLink(u.Link, true)
			}
		}
		close(done)
		m.Counters.LinkResubscribe.Add(1)
		if err, _ := subErr.Load().(error); err != nil {
			m.log.Warn("link subscription failed, resubscribing", "err", err)
		}
		select {
		case <-time.After(100 * time.Millisecond):
		case <-ctx.Done():
		}
	}
	return nil
}

// reconcileLinks lists the links, records each and forgets those gone.
func (m *Monitor) reconcileLinks() {
	links, err := m.handle.LinkList()
	if err != nil {
		m.log.Warn("listing interfaces failed", "err", err)
		return
	}
	present := make(map[int32]bool, len(links))
	for _, l := range links {
		present[int32(l.Attrs().Index)] = true
		m.updateLink(l, true)
	}
	m.linkMu.RLock()
	var gone []int32
	for idx := range m.links {
		if !present[idx] {
			gone = append(gone, idx)
		}
	}
	m.linkMu.RUnlock()
	for _, idx := range gone {
		m.deleteLink(idx)
	}
}

// runClassifier promotes entries that crossed the stale threshold, so
// events announce them even when nobody scrapes.
func (m *Monitor) runClassifier(ctx context.Context) error {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
			m.table.Advance()
		}
	}
}
