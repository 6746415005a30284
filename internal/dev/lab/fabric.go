package lab

import (
	"fmt"
	"net"
	"net/netip"
	"testing"
	"time"
)

// Fabric is the lab of the precision scenarios: the node's client side is
// a bridge, FabricBridge, an Ethernet segment that hosts plug any number
// of interfaces into (a bond's two slaves, a host's two NICs, a router
// and the host behind it, two VRRP peers, an old and a new VM). The
// backend side is as in a Lab, with a second backend address, so a host
// can route to one over one interface and to the other over another.
type Fabric struct {
	Node, Backend NS
	ports         int
}

// FabricBridge is the node's interface on the segment; it holds
// NodeClientIP.
const FabricBridge = "br0"

// FabricNodeMAC is the node's MAC on the segment (the bridge's).
var FabricNodeMAC = net.HardwareAddr{0x02, 0x4e, 0x57, 0, 0, 0x01}

// BackendIP2 is the backend's second address.
var BackendIP2 = netip.MustParseAddr("10.0.2.3")

// NewFabric builds the node and the backend; hosts are added with Host
// and Plug. Cleanup is registered on tb.
func NewFabric(tb testing.TB, prefix string) *Fabric {
	tb.Helper()
	f := &Fabric{Node: NewNS(tb, prefix+"n"), Backend: NewNS(tb, prefix+"b")}
	f.Backend.MustIP(tb, "link", "add", BackendIf, "type", "veth", "peer", "name", NodeBackendIf, "netns", f.Node.Name)
	for _, s := range []struct {
		ns   NS
		args []string
	}{
		// A MAC of its own: a bridge otherwise takes its ports' lowest,
		// so a host plugged later can change it under the entries that
		// hosts plugged earlier pinned (PinNode), and the node's IP
		// stack drops what they send to the old one (seen: a host
		// whose every request vanished, one run in several).
		{f.Node, []string{"link", "add", FabricBridge, "address", FabricNodeMAC.String(), "type", "bridge"}},
		{f.Node, []string{"addr", "add", NodeClientIP.String() + "/24", "dev", FabricBridge}},
		{f.Node, []string{"addr", "add", NodeBackendIP.String() + "/24", "dev", NodeBackendIf}},
		{f.Backend, []string{"addr", "add", BackendIP.String() + "/24", "dev", BackendIf}},
		{f.Backend, []string{"addr", "add", BackendIP2.String() + "/24", "dev", BackendIf}},
		{f.Node, []string{"link", "set", FabricBridge, "up"}},
		{f.Node, []string{"link", "set", NodeBackendIf, "up"}},
		{f.Backend, []string{"link", "set", BackendIf, "up"}},
		{f.Backend, []string{"route", "add", "default", "via", NodeBackendIP.String()}},
	} {
		s.ns.MustIP(tb, s.args...)
	}
	if err := f.Node.Sysctl("net.ipv4.ip_forward", "1"); err != nil {
		tb.Fatal(err)
	}
	// The node's entries for the segment's hosts must rest in STALE:
	// short timers (problem.md's lab pitfall), and no garbage collection.
	for k, v := range map[string]string{"base_reachable_time_ms": "3000", "delay_first_probe_time": "1", "gc_stale_time": "3600"} {
		if err := f.Node.Sysctl("net.ipv4.neigh."+FabricBridge+"."+k, v); err != nil {
			tb.Fatal(err)
		}
	}
	// The backend knows the node before any reply must leave.
	if err := f.Backend.Ping(NodeBackendIP, 1, Patience(2*time.Second)); err != nil {
		tb.Fatal(err)
	}
	return f
}

// Host makes a namespace for a host of the segment.
func (f *Fabric) Host(tb testing.TB, name string) NS {
	tb.Helper()
	return NewNS(tb, name)
}

// Plug adds an interface named dev with mac to h, plugged into the
// segment (a veth whose other end is a port of the bridge), and brings
// it up.
func (f *Fabric) Plug(tb testing.TB, h NS, dev string, mac net.HardwareAddr) {
	tb.Helper()
	f.ports++
	port := fmt.Sprintf("fp%d", f.ports)
	h.MustIP(tb, "link", "add", dev, "address", mac.String(), "type", "veth", "peer", "name", port, "netns", f.Node.Name)
	f.Node.MustIP(tb, "link", "set", port, "master", FabricBridge)
	f.Node.MustIP(tb, "link", "set", port, "up")
	h.MustIP(tb, "link", "set", dev, "up")
}

// PinNode makes h's entry for the node static on dev: h sends no ARP for
// the node from there, as behind switches that suppress ARP.
func (f *Fabric) PinNode(tb testing.TB, h NS, dev string) {
	tb.Helper()
	mac, err := f.Node.MAC(FabricBridge)
	if err != nil {
		tb.Fatal(err)
	}
	if err := h.SetNeigh(dev, NodeClientIP, mac, "permanent"); err != nil {
		tb.Fatal(err)
	}
}
