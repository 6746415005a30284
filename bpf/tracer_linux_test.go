package bpf

import (
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/neighwatch/neighwatch/internal/dev/lab"
	"golang.org/x/sys/unix"
)

// TestFentryFallback forces the fentry programs to fail to load and checks
// that the tracer says why and runs in xmit mode.
func TestFentryFallback(t *testing.T) {
	lab.Require(t)
	t.Parallel()
	refuse := func() (*ebpf.CollectionSpec, error) {
		spec, err := loadFentry()
		if err != nil {
			return nil, err
		}
		// An instruction stream the verifier must reject: read R2 uninitialised.
		p := spec.Programs["fe_redirect"]
		p.Instructions = asm.Instructions{asm.Mov.Reg(asm.R0, asm.R2), asm.Return()}
		return spec, nil
	}
	tr, err := LoadTracer(TracerOptions{Mode: TracerAuto, fentrySpec: refuse})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	if tr.Mode() != TracerXmit || tr.Fallback() == nil || !strings.Contains(tr.Fallback().Error(), "fentry") {
		t.Fatalf("mode %s, fallback %v; want xmit and a reason naming fentry", tr.Mode(), tr.Fallback())
	}
	// The real fentry object on this kernel: either it loads, or the
	// refusal is reported the same way.
	tr2, err := LoadTracer(TracerOptions{Mode: TracerFentry})
	if err != nil {
		t.Fatal(err)
	}
	defer tr2.Close()
	if tr2.Mode() == TracerXmit && tr2.Fallback() == nil {
		t.Fatal("xmit mode without a fallback reason")
	}
	t.Logf("this kernel: fentry mode %s, fallback reason: %v", tr2.Mode(), tr2.Fallback())
}

// TestTracerWatchesLargeIfindex: interfaces with an index beyond the
// watched bitmap (65536 and up, common on long-lived Kubernetes nodes) are
// watched through the hash map; the mirror follows their entries.
func TestTracerWatchesLargeIfindex(t *testing.T) {
	lab.Require(t)
	t.Parallel()
	ns := lab.NewNS(t, "big")
	const idx = 70001
	ns.MustIP(t, "link", "add", "big0", "index", "70001", "type", "veth", "peer", "name", "big1")
	ns.MustIP(t, "link", "set", "big0", "up")
	ino, err := NetNSInode("/run/netns/" + ns.Name)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := LoadTracer(TracerOptions{Mode: TracerXmit, NetNSIno: ino})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	if err := tr.SetWatched([]int{idx}, false); err != nil {
		t.Fatal(err)
	}
	ns.MustIP(t, "neigh", "add", "10.7.0.1", "lladdr", "02:00:00:00:07:01", "dev", "big0", "nud", "stale")
	k := nkeyOf(idx, netip.MustParseAddr("10.7.0.1"))
	var v tracerNval
	lab.WaitFor(t, 2*time.Second, "the entry in the mirror", func() bool {
		return tr.core.objs.NeighMirror.Lookup(k, &v) == nil && v.State == unix.NUD_STALE
	})
	if n, err := tr.StaleCounted(); err != nil || n != 1 || v.StaleOk != 1 {
		t.Fatalf("STALE entry of ifindex %d not counted: %d (%v), %+v", idx, n, err, v)
	}
	// Unwatched again: new entries there are not mirrored.
	if err := tr.SetWatched(nil, false); err != nil {
		t.Fatal(err)
	}
	ns.MustIP(t, "neigh", "add", "10.7.0.2", "lladdr", "02:00:00:00:07:02", "dev", "big0", "nud", "stale")
	time.Sleep(200 * time.Millisecond)
	if tr.core.objs.NeighMirror.Lookup(nkeyOf(idx, netip.MustParseAddr("10.7.0.2")), &v) == nil {
		t.Fatal("an entry of an unwatched interface was mirrored")
	}
}

// TestTracerPastCapacity: with a mirror of 16 entries and 40 STALE entries
// on one interface, the entries that do not fit are counted as dropped and
// never counted as STALE; once all are deleted no STALE accounting is left
// (the interface's bucket and the MAC filter back to zero), so no packet
// can later be blamed on an entry the mirror never held. An LRU mirror, which evicts behind the tracer's back, fails this.
func TestTracerPastCapacity(t *testing.T) {
	lab.Require(t)
	t.Parallel()
	const capacity, n = 16, 40
	ns, idx, tr := watchedVeth(t, "cap", TracerOptions{MirrorSize: capacity})
	var lines []string
	for i := range n {
		lines = append(lines, "neigh add "+lab.HostIP(8, i).String()+" lladdr "+lab.HostMAC(i, 8).String()+" dev cap0 nud stale")
	}
	if err := ns.Batch(lines); err != nil {
		t.Fatal(err)
	}
	lab.WaitFor(t, 10*time.Second, "the entries past capacity to be counted as dropped", func() bool {
		st, err := tr.Stats()
		return err == nil && st.MirrorDropped >= n-capacity
	})
	bloomSum := func() uint32 {
		var bloom [16384]uint32
		if err := tr.core.objs.MacBloom.Get(&bloom); err != nil {
			t.Fatal(err)
		}
		sum := uint32(0)
		for _, v := range bloom {
			sum += v
		}
		return sum
	}
	bucket := func() uint32 {
		var b [4096]uint32
		if err := tr.core.objs.StaleOnIf.Get(&b); err != nil {
			t.Fatal(err)
		}
		return b[idx%len(b)]
	}
	if m, b, held := bloomSum(), bucket(), countKeys(tr.core.objs.NeighMirror); int(m) != held || int(b) != held || held > capacity {
		t.Fatalf("%d entries in the mirror (capacity %d), MAC filter %d, bucket %d: accounting does not match the mirror", held, capacity, m, b)
	}
	ns.MustIP(t, "neigh", "flush", "dev", "cap0")
	lab.WaitFor(t, 10*time.Second, "every STALE count to go back to zero", func() bool {
		return bucket() == 0 && bloomSum() == 0 && countKeys(tr.core.objs.NeighMirror) == 0
	})
	st, _ := tr.Stats()
	t.Logf("%d entries against a mirror of %d: %d mirror updates dropped, nothing left counted after the flush", n, capacity, st.MirrorDropped)
}

// TestDeletedCandidateStaysUntilRemoved: the kernel deletes an entry that
// is a source-MAC candidate. Where candidates live in the mirror's values
// (tr_candidates, 6.0 on), the value stays, marked gone and not STALE,
// until the candidate is removed, which deletes it; had the hook deleted
// it, the removal would find nothing (CAND_ABSENT) and the interface would
// count the candidate forever. Before 6.0, source_candidates keeps the
// candidate the same way. Either way the removal counts it out.
func TestDeletedCandidateStaysUntilRemoved(t *testing.T) {
	lab.Require(t)
	t.Parallel()
	ns, idx, tr := watchedVeth(t, "gone", TracerOptions{})
	addr, mac := netip.MustParseAddr("10.7.1.1"), [6]byte{2, 0, 0, 0, 7, 0x11}
	k := nkeyOf(idx, addr)
	ns.MustIP(t, "neigh", "add", addr.String(), "lladdr", "02:00:00:00:07:11", "dev", "gone0", "nud", "stale")
	var v tracerNval
	lab.WaitFor(t, 5*time.Second, "the entry in the mirror", func() bool {
		return tr.core.objs.NeighMirror.Lookup(k, &v) == nil && v.State == unix.NUD_STALE
	})
	if n, err := tr.UpdateCandidates([]Candidate{{Ifindex: idx, Addr: addr, MAC: mac[:]}}); n != 0 || err != nil {
		t.Fatalf("candidate not watched (%d): %v", n, err)
	}
	if n := tr.Candidates(); n != 1 {
		t.Fatalf("%d candidates, want 1", n)
	}
	var c tracerCand
	if ok, err := tr.lookupCandidate(k, &c); !ok || err != nil {
		t.Fatalf("candidate %v in the maps: %v %+v", ok, err, c)
	}

	ns.MustIP(t, "neigh", "del", addr.String(), "dev", "gone0")
	if tr.core.candInMirror {
		lab.WaitFor(t, 5*time.Second, "the deleted candidate's value marked gone", func() bool {
			return tr.core.objs.NeighMirror.Lookup(k, &v) == nil && v.C.Gone == 1
		})
		if v.State != 0 || v.StaleOk != 0 || v.C.On != 1 {
			t.Fatalf("the deleted candidate's value: %+v; want state 0, not counted STALE, still a candidate", v)
		}
	} else {
		lab.WaitFor(t, 5*time.Second, "the entry out of the mirror", func() bool {
			return tr.core.objs.NeighMirror.Lookup(k, &v) != nil
		})
	}
	if n, err := tr.StaleCounted(); err != nil || n != 0 {
		t.Fatalf("STALE entries counted after the delete: %d (%v)", n, err)
	}

	if n, err := tr.UpdateCandidates([]Candidate{{Ifindex: idx, Addr: addr}}); n != 0 || err != nil {
		t.Fatalf("removing the candidate: %d, %v", n, err)
	}
	if n := tr.Candidates(); n != 0 {
		t.Fatalf("%d candidates after the removal, want 0", n)
	}
	if ok, err := tr.lookupCandidate(k, &c); ok || err != nil {
		t.Fatalf("the removed candidate is still in the maps (%v): %+v", err, c)
	}
	if err := tr.core.objs.NeighMirror.Lookup(k, &v); err == nil {
		t.Fatalf("the removed candidate's value is still in the mirror: %+v", v)
	}
}

// TestRoutedTrafficAsksForItsGateway: frames leave an interface for a
// STALE entry's MAC with a destination address that has no entry: routed
// through that entry, the gateway. The transmit hook asks user space once
// an epoch which STALE entry has the MAC, and counts nothing until it is
// told; then it counts every frame for the gateway; it stops, and asks
// again, once the gateway leaves STALE; after an answer of "none" it asks
// again only some epochs later, or as soon as an entry with the MAC turns
// STALE.
func TestRoutedTrafficAsksForItsGateway(t *testing.T) {
	lab.Require(t)
	t.Parallel()
	ns, idx, tr := watchedVeth(t, "via", TracerOptions{})
	if err := tr.SetPerPacket(true); err != nil {
		t.Fatal(err)
	}
	mac := net.HardwareAddr{2, 0, 0, 0, 9, 1}
	gw, other, third := netip.MustParseAddr("10.9.0.1"), netip.MustParseAddr("10.9.0.2"), netip.MustParseAddr("10.9.0.3")
	stale := func(a netip.Addr) {
		ns.MustIP(t, "neigh", "replace", a.String(), "lladdr", mac.String(), "dev", "via0", "nud", "stale")
		var v tracerNval
		lab.WaitFor(t, 5*time.Second, a.String()+" STALE in the mirror", func() bool {
			return tr.core.objs.NeighMirror.Lookup(nkeyOf(idx, a), &v) == nil && v.State == unix.NUD_STALE
		})
	}
	// Two STALE entries share the MAC, so that the MAC filter still
	// passes its frames once the gateway leaves STALE.
	stale(gw)
	stale(other)

	// Raw frames from a packet socket: dst the MAC, IPv4 to 10.9.9.9,
	// which has no entry.
	var fd int
	if err := ns.Do(func() (err error) {
		fd, err = unix.Socket(unix.AF_PACKET, unix.SOCK_RAW, 0)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	frame := make([]byte, 14+20+8)
	copy(frame, mac)
	copy(frame[6:], []byte{2, 0, 0, 0, 9, 0xee})
	frame[12], frame[13] = 0x08, 0x00
	frame[14], frame[22], frame[23] = 0x45, 64, 17
	copy(frame[26:], []byte{10, 9, 0, 254})
	copy(frame[30:], []byte{10, 9, 9, 9})
	to := &unix.SockaddrLinklayer{Ifindex: idx, Halen: 6}
	copy(to.Addr[:], mac)
	stats := func() TracerStats {
		st, err := tr.Stats()
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	// send hands n frames to the interface and waits for the hook to
	// have looked every one up, so that what follows sees their effect.
	send := func(n int) {
		t.Helper()
		before := stats().XmitLookups
		for range n {
			if err := unix.Sendto(fd, frame, 0, to); err != nil {
				t.Fatal(err)
			}
		}
		lab.WaitFor(t, 5*time.Second, "the transmit hook to look the frames up", func() bool { return stats().XmitLookups >= before+uint64(n) })
	}
	hits := func() uint64 {
		var per []tracerHitv
		if err := tr.core.objs.Hits.Lookup(nkeyOf(idx, gw), &per); err != nil {
			return 0
		}
		return sumHits(per)
	}

	send(5)
	if a, h := stats().RoutedAsks, hits(); a != 1 || h != 0 {
		t.Fatalf("5 routed frames, nobody named: %d asks, %d hits on the gateway; want 1 and 0", a, h)
	}
	if err := tr.NameGateway(idx, gw, mac, gw); err != nil {
		t.Fatal(err)
	}
	send(5)
	if a, h := stats().RoutedAsks, hits(); a != 1 || h != 5 {
		t.Fatalf("5 routed frames, the gateway named: %d asks, %d hits; want 1 and 5", a, h)
	}

	// The gateway leaves STALE: blamed for nothing, and asked again.
	ns.MustIP(t, "neigh", "replace", gw.String(), "lladdr", mac.String(), "dev", "via0", "nud", "reachable")
	var v tracerNval
	lab.WaitFor(t, 5*time.Second, "the gateway REACHABLE in the mirror", func() bool {
		return tr.core.objs.NeighMirror.Lookup(nkeyOf(idx, gw), &v) == nil && v.State == unix.NUD_REACHABLE
	})
	send(3)
	if a, h := stats().RoutedAsks, hits(); a != 2 || h != 0 {
		t.Fatalf("3 routed frames, the named gateway REACHABLE: %d asks, %d hits; want 2 and 0", a, h)
	}

	// None has it (as far as user space knows): not asked again for
	// some epochs...
	if err := tr.NameGateway(idx, gw, mac, netip.Addr{}); err != nil {
		t.Fatal(err)
	}
	send(3)
	for range 2 {
		if err := tr.BumpEpoch(); err != nil {
			t.Fatal(err)
		}
	}
	send(3)
	if a := stats().RoutedAsks; a != 2 {
		t.Fatalf("answered none, 2 epochs on: %d asks, want 2", a)
	}
	// ... unless an entry with the MAC turns STALE.
	stale(third)
	send(3)
	if a := stats().RoutedAsks; a != 3 {
		t.Fatalf("answered none, then an entry with the MAC turned STALE: %d asks, want 3", a)
	}
	if err := tr.NameGateway(idx, gw, mac, netip.Addr{}); err != nil {
		t.Fatal(err)
	}
	for range 6 {
		if err := tr.BumpEpoch(); err != nil {
			t.Fatal(err)
		}
	}
	send(3)
	if a := stats().RoutedAsks; a != 4 {
		t.Fatalf("answered none, 6 epochs on: %d asks, want 4", a)
	}
}

// watchedVeth makes a namespace with a veth pair, prefix0 and prefix1,
// both up, and loads an xmit tracer for that namespace (opts give the
// sizes) watching prefix0; the tracer is closed when the test ends.
func watchedVeth(t *testing.T, prefix string, opts TracerOptions) (lab.NS, int, *Tracer) {
	t.Helper()
	ns := lab.NewNS(t, prefix)
	dev, peer := prefix+"0", prefix+"1"
	ns.MustIP(t, "link", "add", dev, "type", "veth", "peer", "name", peer)
	ns.MustIP(t, "link", "set", peer, "up")
	ns.MustIP(t, "link", "set", dev, "up")
	idx, err := ns.Ifindex(dev)
	if err != nil {
		t.Fatal(err)
	}
	if opts.NetNSIno, err = NetNSInode("/run/netns/" + ns.Name); err != nil {
		t.Fatal(err)
	}
	opts.Mode = TracerXmit
	if opts.InNetNS == nil {
		opts.InNetNS = ns.Do // the source-MAC program attaches there
	}
	tr, err := LoadTracer(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	if err := tr.SetWatched([]int{idx}, false); err != nil {
		t.Fatal(err)
	}
	return ns, idx, tr
}

// TestSightingsInEitherPath sends frames into an interface from a
// source-MAC candidate's address, at another MAC and at its own, with the
// candidate where the kernel keeps it: in the mirror's value (6.0 on) and
// in source_candidates (tr_candidates refused). Each frame from the other
// MAC is counted, none from its own, and SightingsOf returns the count
// with the MAC the announcement named.
func TestSightingsInEitherPath(t *testing.T) {
	lab.Require(t)
	t.Parallel()
	for i, refuse := range [][]string{nil, {"tr_candidates"}} {
		prefix := "sgt" + string(rune('a'+i))
		ns, idx, tr := watchedVeth(t, prefix, TracerOptions{Refuse: refuse})
		if refuse != nil && tr.core.candInMirror {
			t.Fatalf("tr_candidates refused, and the candidates in the mirror")
		}
		addr := netip.MustParseAddr("10.7.2.1")
		own, other := net.HardwareAddr{2, 0, 0, 0, 7, 0x21}, net.HardwareAddr{2, 0, 0, 0, 7, 0xbb}
		ns.MustIP(t, "neigh", "add", addr.String(), "lladdr", own.String(), "dev", prefix+"0", "nud", "stale")
		var v tracerNval
		lab.WaitFor(t, 5*time.Second, "the entry in the mirror", func() bool {
			return tr.core.objs.NeighMirror.Lookup(nkeyOf(idx, addr), &v) == nil && v.State == unix.NUD_STALE
		})
		if n, err := tr.UpdateCandidates([]Candidate{{Ifindex: idx, Addr: addr, MAC: own}}); n != 0 || err != nil {
			t.Fatalf("refused %v: candidate not watched (%d): %v", refuse, n, err)
		}
		if err := tr.SetPerPacket(true); err != nil {
			t.Fatal(err)
		}
		peerIdx, err := ns.Ifindex(prefix + "1")
		if err != nil {
			t.Fatal(err)
		}
		var fd int
		if err := ns.Do(func() (err error) {
			fd, err = unix.Socket(unix.AF_PACKET, unix.SOCK_RAW, 0)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		defer unix.Close(fd)
		// send hands n IPv4 frames from addr at src to the peer, which
		// delivers them to the watched interface, and waits for the
		// source hook to have looked each up.
		send := func(src net.HardwareAddr, n int) {
			t.Helper()
			frame := make([]byte, 14+20+8)
			copy(frame, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
			copy(frame[6:], src)
			frame[12], frame[13] = 0x08, 0x00
			frame[14], frame[22], frame[23] = 0x45, 64, 17
			copy(frame[26:], addr.AsSlice())
			copy(frame[30:], []byte{10, 7, 2, 254})
			to := &unix.SockaddrLinklayer{Ifindex: peerIdx, Halen: 6}
			copy(to.Addr[:], frame[:6])
			before, err := perCPUCounter(tr.core.objs.TrStats, uint32(tracerTrStatST_SOURCE_LOOKUPS))
			if err != nil {
				t.Fatal(err)
			}
			for range n {
				if err := unix.Sendto(fd, frame, 0, to); err != nil {
					t.Fatal(err)
				}
			}
			lab.WaitFor(t, 5*time.Second, "the source hook to look the frames up", func() bool {
				after, err := perCPUCounter(tr.core.objs.TrStats, uint32(tracerTrStatST_SOURCE_LOOKUPS))
				return err == nil && after >= before+uint64(n)
			})
		}
		hk := HitKey{Ifindex: idx, Addr: addr}
		sightings := func() Sighting {
			out := map[HitKey]Sighting{}
			if err := tr.SightingsOf(map[HitKey]net.HardwareAddr{hk: other}, out); err != nil {
				t.Fatal(err)
			}
			return out[hk]
		}

		send(own, 2)
		if s := sightings(); s.Packets != 0 {
			t.Fatalf("refused %v: 2 frames from the candidate's own MAC counted as %d from another", refuse, s.Packets)
		}
		send(other, 3)
		if s := sightings(); s.Packets != 3 || s.MAC.String() != other.String() {
			t.Fatalf("refused %v: 3 frames from %v: sighting %+v, want 3 packets at %v", refuse, other, s, other)
		}
		send(own, 2)
		send(other, 1)
		if s := sightings(); s.Packets != 1 {
			t.Fatalf("refused %v: then 2 frames from its own MAC and 1 from %v: %d packets since, want 1", refuse, other, s.Packets)
		}
	}
}
