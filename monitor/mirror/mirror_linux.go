package mirror

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jpillora/backoff"

	"github.com/neighwatch/neighwatch/monitor/internal/nsenter"
	"github.com/neighwatch/neighwatch/monitor/internal/pace"
	"github.com/neighwatch/neighwatch/monitor/internal/rtnl"
	"github.com/neighwatch/neighwatch/table"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sync/errgroup"
	"golang.org/x/sys/unix"
)

// Config configures a Mirror.
type Config struct {
	// NetNS is the namespace to watch; nil means the caller's.
	NetNS *netns.NsHandle
	// Interfaces selects the interfaces whose entries are mirrored.
	Interfaces table.Selector
	// ReceiveBuffer is the netlink socket's receive buffer in bytes.
	ReceiveBuffer int
	// ResyncInterval is how often a full dump reconciles the table even
	// without errors: the kernel creates some entries (IPv6 multicast,
	// NOARP) without telling netlink. Zero disables it.
	ResyncInterval time.Duration
	// OnLink, if set, is told about every interface when it is first seen
	// and whenever it changes, and with l == nil once it is deleted. It is
	// called without any of the mirror's locks held.
	OnLink func(ifindex int32, l *Link)
	Logger *slog.Logger
}

// DefaultReceiveBuffer holds a burst of about 20,000 notifications.
const DefaultReceiveBuffer = 16 << 20

// Defaults is the mirror's configuration on the agent's defaults. New
// fills a zero ReceiveBuffer from it; a zero ResyncInterval turns the
// periodic resync off.
func Defaults() Config {
	return Config{ReceiveBuffer: DefaultReceiveBuffer, ResyncInterval: 5 * time.Minute}
}

// Link is what the mirror knows of an interface.
type Link struct {
	Name         string
	HardwareAddr net.HardwareAddr
	MTU          int
	Up           bool
	// Watched says the interface is selected: its entries are mirrored.
	Watched bool
	// Ethernet says it can carry ARP and NDP: a 6-byte address, not
	// loopback, not NOARP.
	Ethernet bool
	// XDP says an XDP program is attached: frames it redirects leave
	// without the transmit path the xmit tracer watches.
	XDP bool
}

// Mirror keeps a table equal to the neighbour tables of one namespace.
type Mirror struct {
	cfg     Config
	log     *slog.Logger
	table   Sink
	entries Entries
	c       counters

	ready      chan struct{} // the first dump is in the table
	linksReady chan struct{} // the first link list is known

	*linkWatcher // the interfaces (links_linux.go)

	resyncReq atomic.Bool
	// lastResync is what the last dump after the first cost (ns): its wall
	// time or the CPU spent meanwhile, the longer (pace.Meter).
	lastResync atomic.Int64
	sockMu     sync.Mutex
	sock       *nlSocket
	rcvbuf     atomic.Int64
	forced     atomic.Bool
}

// New builds a Mirror that writes to t. It opens nothing until Run.
func New(cfg Config, t Table) *Mirror {
	if cfg.ReceiveBuffer == 0 {
		cfg.ReceiveBuffer = Defaults().ReceiveBuffer
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	m := &Mirror{
		cfg:        cfg,
		log:        cfg.Logger,
		table:      t,
		entries:    t,
		ready:      make(chan struct{}),
		linksReady: make(chan struct{}),
	}
	m.linkWatcher = &linkWatcher{
		sel: cfg.Interfaces, onLink: cfg.OnLink, table: t, log: cfg.Logger, cnt: &m.c, ns: m.ns, resync: m.Resync,
		links: make(map[int32]*Link), gone: make(map[int32]struct{}),
	}
	return m
}

// Ready is closed once the first dump is in the table.
func (m *Mirror) Ready() <-chan struct{} { return m.ready }

// LinksReady is closed once the interfaces present at start are known (and
// OnLink was told about each).
func (m *Mirror) LinksReady() <-chan struct{} { return m.linksReady }

// Counters returns the mirror's counters.
func (m *Mirror) Counters() Counters { return m.c.snapshot() }

// ReceiveBuffer returns the effective receive buffer of the current socket
// and whether it was forced past rmem_max.
func (m *Mirror) ReceiveBuffer() (int, bool) { return int(m.rcvbuf.Load()), m.forced.Load() }

func (m *Mirror) ns() netns.NsHandle {
	if m.cfg.NetNS == nil {
		return netns.None()
	}
	return *m.cfg.NetNS
}

// Run follows the neighbour tables and links until ctx ends.
func (m *Mirror) Run(ctx context.Context) error {
	var err error
	m.handle, err = nsenter.Open(m.ns(), func() (*netlink.Handle, error) { return netlink.NewHandle(unix.NETLINK_ROUTE) })
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
	close(m.linksReady)
	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error { return m.runNeigh(ctx) })
	g.Go(func() error { return m.runLinks(ctx) })
	if m.cfg.ResyncInterval > 0 {
		g.Go(func() error { return m.resyncPeriodically(ctx) })
	}
	return g.Wait()
}

// resyncPeriodically asks for a resync every ResyncInterval, or every
// pace.Factor times the last resync's cost when that is longer (a dump
// of a million entries, about 2 s of CPU: some 35 minutes, not 5), so the
// periodic dump costs at most 0.1 % of a core whatever the table's size.
func (m *Mirror) resyncPeriodically(ctx context.Context) error {
	wait := m.cfg.ResyncInterval
	t := time.NewTimer(wait)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		m.c.add(ResyncPeriodic)
		m.Resync()
		took := time.Duration(m.lastResync.Load())
		next := pace.Wait(m.cfg.ResyncInterval, took)
		if (next > m.cfg.ResyncInterval) != (wait > m.cfg.ResyncInterval) {
			m.log.Info("periodic resync paced by its cost", "every", next.Round(time.Second), "interval", m.cfg.ResyncInterval,
				"last_took", took.Round(time.Millisecond), "entries", m.entries.Len())
		}
		wait = next
		t.Reset(wait)
	}
}

// ResyncAfterHooks asks for a second dump once the tracer's neigh_create
// hook is attached: the kernel creates some entries without a netlink
// message (NOARP, IPv6 multicast, INCOMPLETE), and one created between
// the first dump and the hook would wait for the periodic resync.
func (m *Mirror) ResyncAfterHooks() {
	m.c.add(ResyncHooks)
	m.Resync()
}

// Resync asks for a fresh dump; entries it does not confirm are deleted.
func (m *Mirror) Resync() {
	m.resyncReq.Store(true)
	m.sockMu.Lock()
	if m.sock != nil {
		m.sock.interrupt()
	}
	m.sockMu.Unlock()
}

// runNeigh owns the neighbour socket. Any receive error, ENOBUFS above
// all, closes the socket, opens a new one and resyncs against a dump.
func (m *Mirror) runNeigh(ctx context.Context) error {
	initial := true
	// A failed socket is opened again after 100 ms, then up to twice as
	// long each time in a row, at most 5 s, jittered; a session that ran
	// longer than that was healthy and starts the count afresh.
	b := backoff.Backoff{Min: 100 * time.Millisecond, Max: 5 * time.Second, Factor: 2, Jitter: true}
	for ctx.Err() == nil {
		began := time.Now()
		err := m.session(ctx, initial)
		if ctx.Err() != nil {
			return nil
		}
		var perm permanentError
		if errors.As(err, &perm) {
			return err
		}
		initial = initial && !m.loaded()
		if errors.Is(err, unix.ENOBUFS) {
			m.c.add(ErrENOBUFS)
			m.c.add(ResyncENOBUFS)
			m.log.Debug("neighbour socket overflowed, resyncing", "rcvbuf", m.rcvbuf.Load())
			continue // no backoff: the overflow is over, the dump is the cure
		}
		m.c.add(ErrSocket)
		m.c.add(ResyncError)
		wait := retryWait(&b, time.Since(began))
		m.log.Warn("neighbour socket failed, resyncing", "err", err, "retry_in", wait)
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return nil
		}
	}
	return nil
}

// retryWait is the wait before the next session after one that ran for
// ran and failed: a session that outlived the longest wait was healthy,
// and the failures in a row start again from the shortest.
func retryWait(b *backoff.Backoff, ran time.Duration) time.Duration {
	if ran > b.Max {
		b.Reset()
	}
	return b.Duration()
}

func (m *Mirror) loaded() bool {
	select {
	case <-m.ready:
		return true
	default:
		return false
	}
}

type permanentError struct{ error }

func (e permanentError) Unwrap() error { return e.error }

// session runs one socket from subscription to failure.
func (m *Mirror) session(ctx context.Context, initial bool) error {
	sock, err := nsenter.Open(m.ns(), func() (*nlSocket, error) { return openNeighSocket(m.cfg.ReceiveBuffer) })
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

	s := &dumpState{m: m, sock: sock, initial: initial}
	m.resyncReq.Store(false)
	if err := s.start(); err != nil {
		return err
	}
	batch := make([]table.Update, 0, 256)
	for {
		b, err := sock.recv()
		if err != nil {
			if !isInterrupt(err) {
				return err
			}
			sock.clearInterrupt()
			if m.resyncReq.Swap(false) {
				if s.dumping {
					s.redump = true
				} else if err := s.start(); err != nil {
					return err
				}
			}
			continue
		}
		done, intr, err := m.processDatagram(b, s.seq, s.dumping, &batch)
		if err != nil {
			return err
		}
		s.redump = s.redump || intr
		if done {
			if err := s.ended(); err != nil {
				return err
			}
		}
	}
}

// dumpState is where a session's dumps are.
type dumpState struct {
	m               *Mirror
	sock            *nlSocket
	seq             uint32
	dumping, redump bool
	cost            pace.Meter // since the dump began: its wall time, and its cost for the periodic resync's pace
	initial         bool       // the first dump of the agent's life
}

// start asks for a full dump; entries it does not confirm are deleted
// when it ends.
func (s *dumpState) start() error {
	m := s.m
	s.seq++
	s.dumping = true
	s.cost = pace.Start()
	m.table.BeginSync(s.initial)
	if err := s.sock.requestDump(s.seq); err != nil {
		return fmt.Errorf("request neighbour dump: %w", err)
	}
	return nil
}

// ended ends the sync of a dump that ended, says so, and starts another
// when the kernel interrupted this one or a resync is asked for.
func (s *dumpState) ended() error {
	m := s.m
	s.dumping = false
	deleted := m.table.EndSync()
	m.c.add(Dumps)
	if s.initial {
		s.initial = false
		m.log.Info("neighbour table loaded", "entries", m.entries.Len(), "took", s.cost.Wall(), "rcvbuf", s.sock.rcvbuf)
	} else {
		took := s.cost.Took()
		m.lastResync.Store(int64(took))
		m.log.Debug("neighbour table resynced", "entries", m.entries.Len(), "deleted", deleted, "took", took)
	}
	if !m.loaded() {
		close(m.ready)
	}
	if !s.redump && !m.resyncReq.Swap(false) {
		return nil
	}
	if s.redump {
		m.c.add(ResyncInterrupt)
	}
	s.redump = false
	return s.start()
}

// processDatagram decodes one datagram and applies its neighbour messages.
// It reports whether the datagram ended the dump with sequence seq, and
// whether the kernel flagged the dump as interrupted (inconsistent).
func (m *Mirror) processDatagram(b []byte, seq uint32, dumping bool, batch *[]table.Update) (done, interrupted bool, err error) {
	*batch = (*batch)[:0]
	// A datagram holds either replies to the dump (its sequence number)
	// or notifications (sequence 0). What a dump finds different was
	// missed by the notifications: the table records it as a resync's.
	cause := table.CauseNetlink
	perr := rtnl.ParseDatagram(b, func(msg rtnl.Message) error {
		h := msg.Header
		switch h.Type {
		case unix.NLMSG_DONE:
			if h.Seq == seq && dumping {
				done = true
			}
			return nil
		case unix.NLMSG_ERROR:
			if len(msg.Body) >= 4 {
				if code := int32(binary.NativeEndian.Uint32(msg.Body)); code != 0 && h.Seq == seq {
					err = fmt.Errorf("neighbour dump refused: %w", unix.Errno(-code))
				}
			}
			return nil
		case unix.RTM_NEWNEIGH, unix.RTM_DELNEIGH:
		default:
			return nil
		}
		if h.Flags&unix.NLM_F_DUMP_INTR != 0 {
			interrupted = true
		}
		if dumping && h.Seq == seq {
			cause = table.CauseResync
		}
		u, derr := DecodeNeigh(h.Type, msg.Body)
		if derr != nil {
			m.c.add(ErrDecode)
			return nil
		}
		*batch = append(*batch, u)
		return nil
	})
	if perr != nil {
		m.c.add(ErrDecode)
	}
	if err != nil {
		return false, false, err
	}
	m.applyBatch(cause, *batch)
	return done, interrupted, nil
}

// applyBatch filters one datagram's updates and applies them under a
// single lock, with the cause of the datagram (netlink, or resync for
// a dump's replies). Dump replies and notifications are applied alike:
// each carries the entry's full state.
func (m *Mirror) applyBatch(cause table.Cause, batch []table.Update) {
	if len(batch) == 0 {
		return
	}
	m.applyMu.Lock()
	defer m.applyMu.Unlock()
	kept := batch[:0]
	for _, u := range batch {
		if (u.Family != table.FamilyInet && u.Family != table.FamilyInet6) || u.Flags&table.FlagProxy != 0 || !m.watchedIndex(u.Ifindex) {
			m.c.add(Ignored)
			continue
		}
		kept = append(kept, u)
	}
	m.table.Apply(cause, kept...)
	m.c[Messages].Add(uint64(len(kept)))
}
