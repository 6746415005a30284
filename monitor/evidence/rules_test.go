package evidence

import (
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/mdlayher/arp"
	"github.com/mdlayher/ndp"
	"github.com/neighwatch/neighwatch/table"
)

// The tests in this file pin the evidence rules at their edges: each
// kills a mutant that the scenario tests let live (make mutation,
// docs/mutants.md).

// TestWatcherDefaults: zero fields take the documented defaults (a 5 s
// conflict window, 65,536 hosts, an hour), set ones are kept.
func TestWatcherDefaults(t *testing.T) {
	tb := table.New(time.Minute, nil)
	w := New(Config{}, tb)
	if w.cfg.ConflictWindow != 5*time.Second || w.cfg.MaxHosts != 65536 || w.cfg.HostTTL != time.Hour {
		t.Errorf("defaults: %+v", w.cfg)
	}
	w = New(Config{ConflictWindow: 2 * time.Second, MaxHosts: 10, HostTTL: time.Minute}, tb)
	if w.cfg.ConflictWindow != 2*time.Second || w.cfg.MaxHosts != 10 || w.cfg.HostTTL != time.Minute {
		t.Errorf("set values not kept: %+v", w.cfg)
	}
}

// TestExpireForgetsOnlyTheOld: hosts not seen for HostTTL are forgotten,
// the others kept.
func TestExpireForgetsOnlyTheOld(t *testing.T) {
	tb := table.New(time.Minute, nil)
	w := New(Config{HostTTL: time.Hour}, tb)
	now := time.Unix(1_700_000_000, 0)
	old, young := netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2")
	w.Observe(1, Observation{Kind: ARPReply, SenderIP: old, SenderMAC: macA}, now)
	w.Observe(1, Observation{Kind: ARPReply, SenderIP: young, SenderMAC: macA}, now.Add(30*time.Minute))
	w.expire(now.Add(time.Hour + time.Minute))
	if _, _, ok := w.Seen(1, old); ok {
		t.Error("a host not seen for more than HostTTL is kept")
	}
	if _, _, ok := w.Seen(1, young); !ok {
		t.Error("a host seen 31 minutes ago was forgotten")
	}
	if st := w.HostStats(); st.Hosts != 1 || st.EvictedAged != 1 {
		t.Errorf("host stats %+v", st)
	}
}

// TestTruncatedNDP: every truncation of a valid advertisement is refused
// with an error, never read past its end.
func TestTruncatedNDP(t *testing.T) {
	host := netip.MustParseAddr("fd00::2")
	f := ndFrame(t, macB, host, 255, &ndp.NeighborAdvertisement{Override: true, TargetAddress: host,
		Options: []ndp.Option{&ndp.LinkLayerAddress{Direction: ndp.Target, Addr: macB}}})
	if _, err := ParseNDP(f, ownMAC); err != nil {
		t.Fatalf("the whole frame: %v", err)
	}
	for n := range len(f) - 1 {
		if _, err := ParseNDP(f[:n], ownMAC); err == nil {
			t.Errorf("%d of %d bytes parsed", n, len(f))
		}
	}
}

// TestNDPOwnLinkLayerAddress: an advertisement that names this
// interface's MAC as the target's is ours (a proxy answer relayed back),
// whatever the frame's source.
func TestNDPOwnLinkLayerAddress(t *testing.T) {
	host := netip.MustParseAddr("fd00::2")
	f := ndFrame(t, macB, host, 255, &ndp.NeighborAdvertisement{TargetAddress: host,
		Options: []ndp.Option{&ndp.LinkLayerAddress{Direction: ndp.Target, Addr: ownMAC}}})
	if _, err := ParseNDP(f, ownMAC); err != ErrOwnFrame {
		t.Errorf("err = %v, want ErrOwnFrame", err)
	}
	if o, err := ParseNDP(f, nil); err != nil || o.SenderMAC.String() != ownMAC.String() {
		t.Errorf("with no own MAC: %+v, %v", o, err)
	}
}

// TestKindNames: each kind by its label, and anything past them unknown.
func TestKindNames(t *testing.T) {
	if ARPRequest.String() != "request" || NDPUnsolicitedAdv.String() != "unsolicited_advertisement" || numKinds.String() != "unknown" {
		t.Errorf("names: %q %q %q", ARPRequest, NDPUnsolicitedAdv, numKinds)
	}
}

// TestLinkSame: a link is the same only with the same name, MAC and MTU
// (a change restarts its listeners).
func TestLinkSame(t *testing.T) {
	l := Link{Name: "eth0", HardwareAddr: macA, MTU: 1500}
	for _, o := range []Link{{Name: "eth1", HardwareAddr: macA, MTU: 1500}, {Name: "eth0", HardwareAddr: macB, MTU: 1500}, {Name: "eth0", HardwareAddr: macA, MTU: 9000}} {
		if l.same(o) {
			t.Errorf("%+v is the same as %+v", o, l)
		}
	}
	if !l.same(Link{Name: "eth0", HardwareAddr: macA, MTU: 1500}) {
		t.Error("a link is not the same as itself")
	}
}

// TestListeningByProtocol: the ARP and the NDP listeners are listed apart.
func TestListeningByProtocol(t *testing.T) {
	w := New(Config{}, table.New(time.Minute, nil))
	w.listeners[listenerKey{ifindex: 2}] = &listener{}
	w.listeners[listenerKey{ifindex: 3, ndp: true}] = &listener{}
	if a, n := w.Listening(false), w.Listening(true); len(a) != 1 || a[0] != 2 || len(n) != 1 || n[0] != 3 {
		t.Errorf("ARP %v, NDP %v; want [2] and [3]", a, n)
	}
}

// TestSetLinkRecordsWhatIsWanted: SetLink with a link wants it listened
// to, with nil no longer.
func TestSetLinkRecordsWhatIsWanted(t *testing.T) {
	w := New(Config{}, table.New(time.Minute, nil))
	w.SetLink(2, &Link{Name: "eth0", HardwareAddr: macA, MTU: 1500})
	if l, ok := w.links[2]; !ok || l.Name != "eth0" || !w.dirty[2] {
		t.Fatalf("after SetLink: %+v, dirty %v", w.links, w.dirty)
	}
	w.SetLink(2, nil)
	if _, ok := w.links[2]; ok {
		t.Errorf("still wanted after SetLink(nil): %+v", w.links)
	}
}

// TestOwnARPFramesIgnored: a frame the host itself sent says nothing of
// its neighbours, whether its Ethernet source or its ARP sender is the
// receiving interface's MAC (a bridge relaying the host's own request;
// proxy ARP answered by the host for another address).
func TestOwnARPFramesIgnored(t *testing.T) {
	relayed := arpFrame(t, arp.OperationRequest, ownMAC, "10.0.0.5", "10.0.0.9", macB)
	copy(relayed[6:12], macA) // another Ethernet source, the host's ARP sender
	proxied := arpFrame(t, arp.OperationReply, macA, "10.0.0.7", "10.0.0.9", macB)
	copy(proxied[6:12], ownMAC) // the host's Ethernet source, another ARP sender
	for name, f := range map[string][]byte{"own ARP sender": relayed, "own Ethernet source": proxied} {
		if _, err := ParseARP(f, ownMAC); !errors.Is(err, ErrOwnFrame) {
			t.Errorf("%s: %v, want %v", name, err, ErrOwnFrame)
		}
	}
	if o, err := ParseARP(arpFrame(t, arp.OperationReply, macA, "10.0.0.7", "10.0.0.9", macB), ownMAC); err != nil || o.SenderMAC.String() != macA.String() {
		t.Errorf("another host's reply: %+v, %v; want it parsed", o, err)
	}
}
