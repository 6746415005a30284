package evidence

import (
	"errors"
	"net"

	"github.com/mdlayher/packet"
	"github.com/neighwatch/neighwatch/internal/nsenter"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

func (w *Watcher) ns() netns.NsHandle {
	if w.cfg.NetNS == nil {
		return netns.None()
	}
	return *w.cfg.NetNS
}

// startLocked starts the listeners of an interface that are not running.
func (w *Watcher) startLocked(ifindex int32, li Link) {
	if w.disabled != nil {
		return
	}
	w.countersLocked(ifindex)
	ifi := &net.Interface{Index: int(ifindex), Name: li.Name, HardwareAddr: li.HardwareAddr, MTU: li.MTU}
	for _, v6 := range []bool{false, true} {
		k := listenerKey{ifindex, v6}
		if w.listeners[k] != nil {
			continue
		}
		proto, parse, what := unix.ETH_P_ARP, ParseARP, "ARP"
		var cfg *packet.Config
		if v6 {
			filter, err := ndpFilter()
			if err != nil {
				w.log.Error("NDP socket filter does not assemble", "err", err)
				continue
			}
			proto, parse, what, cfg = unix.ETH_P_IPV6, ParseNDP, "NDP", &packet.Config{Filter: filter}
		}
		var conn net.PacketConn
		err := nsenter.Run(w.ns(), func() error {
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
				w.log.Warn("ARP listener disabled: opening a packet socket was refused; mismatch detection is off", "interface", li.Name, "err", err)
				return
			}
			w.log.Warn(what+" listener not started", "interface", li.Name, "err", err)
			continue
		}
		l := &listener{conn: conn, done: make(chan struct{}), parse: parse}
		w.listeners[k] = l
		go w.read(k, li.HardwareAddr, l)
	}
}
