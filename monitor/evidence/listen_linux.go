package evidence

import (
	"net"

	"github.com/mdlayher/packet"
	"github.com/neighwatch/neighwatch/monitor/internal/nsenter"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// readBuffer is each listener socket's receive buffer (the kernel caps it
// at net.core.rmem_max): room for bursts of ARP and NDP, whose drops
// neighwatch_arp_socket_drops_total counts.
const readBuffer = 1 << 20

// openListener opens one listener socket (ARP, or NDP with v6) on an
// interface, in namespace ns (nil: the caller's).
func openListener(ns *netns.NsHandle, ifindex int32, li Link, v6 bool) (*listener, error) {
	ifi := &net.Interface{Index: int(ifindex), Name: li.Name, HardwareAddr: li.HardwareAddr, MTU: li.MTU}
	proto, parse := unix.ETH_P_ARP, ParseARP
	var cfg *packet.Config
	if v6 {
		filter, err := ndpFilter()
		if err != nil {
			return nil, err
		}
		proto, parse, cfg = unix.ETH_P_IPV6, ParseNDP, &packet.Config{Filter: filter}
	}
	conn, err := nsenter.Open(handle(ns), func() (*packet.Conn, error) { return packet.Listen(ifi, packet.Raw, proto, cfg) })
	if err != nil {
		return nil, err
	}
	if rc, err := conn.SyscallConn(); err == nil {
		_ = rc.Control(func(fd uintptr) {
			_ = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF, readBuffer)
		})
	}
	return &listener{conn: conn, link: li, done: make(chan struct{}), parse: parse}, nil
}

// handle is ns, or the caller's namespace for nil.
func handle(ns *netns.NsHandle) netns.NsHandle {
	if ns == nil {
		return netns.None()
	}
	return *ns
}
