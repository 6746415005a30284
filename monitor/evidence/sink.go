package evidence

import (
	"net"
	"net/netip"
	"time"

	"github.com/neighwatch/neighwatch/table"
)

// Sink is what the watcher reports ARP and NDP sightings and conflicts
// to, which a *table.Table is.
type Sink interface {
	ObserveMAC(ifindex int32, ip netip.Addr, mac net.HardwareAddr, when time.Time) bool
	// AnnounceMAC is ObserveMAC for a gratuitous ARP or an unsolicited
	// NA: the sender announcing itself, which any sender can do for any
	// address, is not its answering.
	AnnounceMAC(ifindex int32, ip netip.Addr, mac net.HardwareAddr, when time.Time) bool
	ReportConflict(k table.Key, old, now net.HardwareAddr, when time.Time, cause table.Cause, detail string) bool
}
