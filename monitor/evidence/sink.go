package evidence

import (
	"net"
	"net/netip"
	"time"

	"github.com/neighwatch/neighwatch/table"
)

// Sink is what the watcher reports ARP and NDP sightings to, and the
// stream it tells of moves and conflicts on. *table.Table is one.
type Sink interface {
	ObserveMAC(ifindex int32, ip netip.Addr, mac net.HardwareAddr, when time.Time) bool
	ObserveConflict(k table.Key, a, b net.HardwareAddr, when time.Time) bool
	Lookup(k table.Key) (table.Entry, bool)
	Events() *table.Broadcaster
	Publish(ev table.Event)
}
