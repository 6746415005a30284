package mirror

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/jpillora/backoff"

	"github.com/neighwatch/neighwatch/monitor/internal/nsenter"
	"github.com/neighwatch/neighwatch/monitor/internal/rtnl"
	"github.com/neighwatch/neighwatch/table"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// linkWatcher is the mirror's part that follows the interfaces: what it
// knows of each, which it watches, and those deleted lately, under a
// lock of its own; an interface that leaves scope or is deleted takes
// its entries out of the table. The Mirror embeds it.
type linkWatcher struct {
	sel    table.Selector
	onLink func(ifindex int32, l *Link)
	table  Sink
	log    *slog.Logger
	cnt    *counters
	ns     func() netns.NsHandle
	resync func() // the mirror's: an interface entered scope

	linkMu sync.RWMutex
	links  map[int32]*Link
	// gone remembers recently deleted interfaces (the last maxGone), so
	// that a neighbour message still queued for one, looked up before
	// the deletion and applied after it, cannot bring it back: the two
	// subscriptions are separate sockets with no order between them.
	gone      map[int32]struct{}
	goneOrder []int32
	// applyMu makes "is this interface known" and "apply its entries"
	// one step with respect to an interface's deletion, which would
	// otherwise fall between them and leave the entries behind. The
	// mirror's neighbour side takes it too (applyBatch, Lookup).
	applyMu sync.Mutex
	handle  *netlink.Handle // opened by Mirror.Run
}

// watchedIndex reports whether entries of an interface belong in the
// table, learning interfaces the link watcher has not reported yet.
func (w *linkWatcher) watchedIndex(ifindex int32) bool {
	w.linkMu.RLock()
	li := w.links[ifindex]
	w.linkMu.RUnlock()
	if li != nil {
		return li.Watched
	}
	l, err := w.handle.LinkByIndex(int(ifindex))
	if err != nil {
		return false // gone already; its entries go with it
	}
	return w.updateLink(l, false).Watched
}

// updateLink records a link's attributes; it returns the new record and
// starts or stops what depends on it. With announce, an interface that
// leaves scope takes its entries with it and one that enters scope is
// loaded by a resync.
func (w *linkWatcher) updateLink(l netlink.Link, announce bool) *Link {
	a := l.Attrs()
	li := &Link{
		Name:         a.Name,
		HardwareAddr: a.HardwareAddr,
		MTU:          a.MTU,
		Up:           a.Flags&net.FlagUp != 0,
		Watched:      w.sel.Match(a.Name),
		Ethernet:     len(a.HardwareAddr) == 6 && a.Flags&net.FlagLoopback == 0 && a.RawFlags&unix.IFF_NOARP == 0,
		XDP:          a.Xdp != nil && a.Xdp.Attached,
	}
	idx := int32(a.Index)
	w.linkMu.Lock()
	if _, dead := w.gone[idx]; dead && !announce {
		// Learnt on demand from a neighbour message, but the link
		// watcher has seen it deleted since: ignore its entries.
		w.linkMu.Unlock()
		li.Watched = false
		return li
	}
	delete(w.gone, idx) // announced by the link watcher: the index lives again
	old := w.links[idx]
	w.links[idx] = li
	w.linkMu.Unlock()
	w.table.SetLinkName(idx, a.Name)
	if announce && old != nil && old.Watched && !li.Watched {
		w.applyMu.Lock() // announce: the link watcher, never inside applyBatch
		n := w.table.DeleteLink(idx, table.CauseLink)
		w.applyMu.Unlock()
		w.table.SetLinkName(idx, a.Name)
		w.log.Info("interface left scope", "interface", a.Name, "entries_dropped", n)
	}
	if announce && old != nil && !old.Watched && li.Watched {
		w.cnt.add(ResyncLink)
		w.resync()
	}
	if w.onLink != nil {
		cp := *li
		w.onLink(idx, &cp)
	}
	return li
}

func (w *linkWatcher) deleteLink(idx int32) {
	w.applyMu.Lock()
	defer w.applyMu.Unlock()
	w.linkMu.Lock()
	li := w.links[idx]
	delete(w.links, idx)
	if _, ok := w.gone[idx]; !ok {
		w.gone[idx] = struct{}{}
		w.goneOrder = append(w.goneOrder, idx)
		if len(w.goneOrder) > maxGone {
			delete(w.gone, w.goneOrder[0])
			w.goneOrder = w.goneOrder[1:]
		}
	}
	w.linkMu.Unlock()
	n := w.table.DeleteLink(idx, table.CauseLink)
	if w.onLink != nil {
		w.onLink(idx, nil)
	}
	if li != nil {
		w.log.Info("interface deleted", "interface", li.Name, "entries_dropped", n)
	}
}

// maxGone bounds the deleted interfaces the mirror remembers.
const maxGone = 4096

// Interfaces returns the watched interfaces by index.
func (w *linkWatcher) Interfaces() map[int32]string {
	w.linkMu.RLock()
	defer w.linkMu.RUnlock()
	out := make(map[int32]string, len(w.links))
	for i, l := range w.links {
		if l.Watched {
			out[i] = l.Name
		}
	}
	return out
}

// Links returns a copy of every link the mirror knows, by index.
func (w *linkWatcher) Links() map[int32]Link {
	w.linkMu.RLock()
	defer w.linkMu.RUnlock()
	out := make(map[int32]Link, len(w.links))
	for i, l := range w.links {
		out[i] = *l
	}
	return out
}

// XDPInterfaces returns the names of the interfaces with an XDP program
// attached, watched or not: a program there may redirect to any of them.
func (w *linkWatcher) XDPInterfaces() []string {
	w.linkMu.RLock()
	defer w.linkMu.RUnlock()
	var out []string
	for _, l := range w.links {
		if l.XDP {
			out = append(out, l.Name)
		}
	}
	return out
}

// runLinks follows RTM_NEWLINK/RTM_DELLINK on a socket of its own. After
// each subscription it lists the links and reconciles, so nothing that
// changed while unsubscribed is missed; whatever the socket then holds is
// newer than the list. When the socket overflows (ENOBUFS: notifications
// lost) or fails, it is closed with what it still holds, which is older
// than any list taken after, and a new one subscribes. The list is a
// request of its own rather than a dump on the subscribed socket, so it
// works unprivileged.
func (w *linkWatcher) runLinks(ctx context.Context) error {
	// A socket that cannot be opened (out of descriptors or memory) is
	// tried again after 100 ms, then up to twice as long each time in a
	// row, at most 5 s; only a refusal of permission ends the mirror.
	b := backoff.Backoff{Min: 100 * time.Millisecond, Max: 5 * time.Second, Factor: 2, Jitter: true}
	for ctx.Err() == nil {
		sock, err := nsenter.Open(w.ns(), openLinkSocket)
		if err != nil {
			if errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES) {
				return fmt.Errorf("subscribe to link notifications: %w", err)
			}
			wait := b.Duration()
			w.cnt.add(LinkResubscribe)
			w.log.Warn("subscribing to link notifications failed; trying again", "err", err, "in", wait.Round(time.Millisecond))
			select {
			case <-time.After(wait):
			case <-ctx.Done():
			}
			continue
		}
		b.Reset()
		err = w.followLinks(ctx, sock)
		sock.Close()
		if ctx.Err() != nil {
			return nil
		}
		if errors.Is(err, unix.ENOBUFS) {
			w.cnt.add(LinkENOBUFS)
			continue
		}
		w.cnt.add(LinkResubscribe)
		w.log.Warn("link subscription failed, subscribing again", "err", err)
		select {
		case <-time.After(100 * time.Millisecond):
		case <-ctx.Done():
		}
	}
	return nil
}

// followLinks lists the links, then applies the notifications sock
// receives until it fails or ctx ends.
func (w *linkWatcher) followLinks(ctx context.Context, sock *nlSocket) error {
	stop := context.AfterFunc(ctx, sock.interrupt)
	defer stop()
	w.reconcileLinks()
	for {
		b, err := sock.recv()
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			return err
		}
		err = rtnl.ParseDatagram(b, func(msg rtnl.Message) error {
			switch msg.Header.Type {
			case unix.RTM_DELLINK:
				if len(msg.Body) >= unix.SizeofIfInfomsg {
					w.deleteLink(int32(binary.NativeEndian.Uint32(msg.Body[4:8])))
				}
			case unix.RTM_NEWLINK:
				l, err := netlink.LinkDeserialize(&msg.Header, msg.Body)
				if err != nil {
					w.cnt.add(ErrDecode)
					return nil
				}
				w.updateLink(l, true)
			}
			return nil
		})
		if err != nil {
			w.cnt.add(ErrDecode)
		}
	}
}

// reconcileLinks lists the links, records each and forgets those gone.
func (w *linkWatcher) reconcileLinks() {
	links, err := w.handle.LinkList()
	if err != nil {
		w.log.Warn("listing interfaces failed", "err", err)
		return
	}
	present := make(map[int32]bool, len(links))
	for _, l := range links {
		present[int32(l.Attrs().Index)] = true
		w.updateLink(l, true)
	}
	w.linkMu.RLock()
	var gone []int32
	for idx := range w.links {
		if !present[idx] {
			gone = append(gone, idx)
		}
	}
	w.linkMu.RUnlock()
	for _, idx := range gone {
		w.deleteLink(idx)
	}
}
