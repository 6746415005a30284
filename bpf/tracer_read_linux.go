package bpf

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"reflect"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/ringbuf"
	"golang.org/x/sys/unix"
)

// Sighting is what the source-MAC program saw of a candidate: packets from
// its address at another MAC, and that MAC as it was announced.
type Sighting struct {
	MAC     net.HardwareAddr
	Packets uint64 // since the last call of SightingsOf
}

// SightingsOf returns, of the candidates the programs announced (keys,
// with the MAC each announcement named), those whose address was seen at
// another MAC since the last call, with the packets since then.
func (t Readout) SightingsOf(keys map[HitKey]net.HardwareAddr, out map[HitKey]Sighting) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	clear(out)
	var v tracerCand
	for hk, mac := range keys {
		k := nkeyOf(hk.Ifindex, hk.Addr)
		if ok, err := CandidateFilter(t).lookupCandidate(k, &v); err != nil {
			return fmt.Errorf("read source-MAC candidates: %w", err)
		} else if !ok {
			continue
		}
		// The kernel's count is 32 bits and wraps: the difference
		// does too, and is right while fewer than 2^32 packets come
		// between two reads.
		if d := v.Packets - t.sightings[k]; d > 0 {
			t.sightings[k] = v.Packets
			out[hk] = Sighting{MAC: mac, Packets: uint64(d)}
		}
	}
	return nil
}

// Hits returns the bypass packets counted per entry in its current STALE
// period, summed over CPUs, walking the whole map (tests; the feed asks
// for the entries the programs announced, HitsOf).
func (t Readout) Hits() (map[HitKey]uint64, error) {
	out := make(map[HitKey]uint64)
	var k tracerNkey
	var per []tracerHitv
	it := t.objs.Hits.Iterate()
	n := 0
	for it.Next(&k, &per) {
		out[k.hitKey()] += sumHits(per)
		n++
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("read tracer hits: %w", err)
	}
	t.hitEntries.Store(int64(n))
	return out, nil
}

// HitKeys appends to buf the entries the bypass hit counters' map holds
// a counter for, walking its keys alone, and notes how many for Stats.
// The programs delete keys meanwhile, and the kernel starts a walk over
// when its last key is gone: the walk stops at the map's capacity.
func (t Readout) HitKeys(buf []HitKey) ([]HitKey, error) {
	var k, next tracerNkey
	prev := any(nil)
	n := 0
	for limit := int(t.objs.Hits.MaxEntries()); n < limit; {
		if err := t.objs.Hits.NextKey(prev, &next); err != nil {
			if errors.Is(err, ebpf.ErrKeyNotExist) {
				break
			}
			return buf, fmt.Errorf("walk tracer hits: %w", err)
		}
		buf = append(buf, next.hitKey())
		n++
		k = next
		prev = &k
	}
	t.hitEntries.Store(int64(n))
	return buf, nil
}

// DropHits deletes the bypass counters of keys (those the programs
// already deleted are no error): the next packet to one starts it again
// from zero and announces it. It returns how many it deleted.
func (t Readout) DropHits(keys []HitKey) (int, error) {
	n := 0
	for _, hk := range keys {
		if err := t.objs.Hits.Delete(nkeyOf(hk.Ifindex, hk.Addr)); err != nil {
			if errors.Is(err, ebpf.ErrKeyNotExist) {
				continue
			}
			return n, fmt.Errorf("drop tracer hits: %w", err)
		}
		n++
	}
	t.hitEntries.Add(-int64(n))
	return n, nil
}

// HitsOf returns the bypass packets of some entries in their current
// STALE period, summed over CPUs; an entry without counters is absent.
func (t Readout) HitsOf(keys []HitKey, out map[HitKey]uint64) error {
	clear(out)
	per := t.hitBuf[:0]
	for _, hk := range keys {
		if err := t.objs.Hits.Lookup(nkeyOf(hk.Ifindex, hk.Addr), &per); err != nil {
			if errors.Is(err, ebpf.ErrKeyNotExist) {
				continue
			}
			return fmt.Errorf("read tracer hits: %w", err)
		}
		out[hk] = sumHits(per)
	}
	t.hitBuf = per
	return nil
}

func sumHits(per []tracerHitv) uint64 {
	var n uint64
	for _, v := range per {
		n += v.Packets
	}
	return n
}

// Stats reads the counters and how full the maps are.
func (t Readout) Stats() (TracerStats, error) {
	var s TracerStats
	for stat, dst := range map[tracerTrStat]*uint64{
		tracerTrStatST_HITS_DROPPED:   &s.HitsDropped,
		tracerTrStatST_MIRROR_DROPPED: &s.MirrorDropped,
		tracerTrStatST_EVENTS_DROPPED: &s.EventsDropped,
		tracerTrStatST_XMIT_LOOKUPS:   &s.XmitLookups,
		tracerTrStatST_XMIT_LOOKUPS6:  &s.XmitLookups6,
		tracerTrStatST_ROUTED_ASKS:    &s.RoutedAsks,
	} {
		v, err := perCPUCounter(t.objs.TrStats, uint32(stat))
		if err != nil {
			return s, fmt.Errorf("read tracer counters: %w", err)
		}
		*dst = v
	}
	s.XmitLookups += s.XmitLookups6
	s.HitCapacity = int(t.objs.Hits.MaxEntries())
	s.MirrorCapacity = int(t.objs.NeighMirror.MaxEntries())
	s.HitEntries = int(t.hitEntries.Load())
	s.MirrorEntries = int(t.mirrorEntries.Load())
	return s, nil
}

// Redirects returns, in fentry mode, the redirect helper calls counted
// per helper and next-hop state. It returns nil in xmit mode.
func (t Readout) Redirects() (RedirectCounts, error) {
	if t.feRedirects == nil {
		return nil, nil
	}
	out := make(RedirectCounts, numHelpers)
	slot := func(h Helper, nh fentryFeNexthop) uint32 {
		return uint32(h)*uint32(fentryFeNexthopNH_MAX) + uint32(nh)
	}
	for _, h := range Helpers() {
		stale, err := perCPUCounter(t.feRedirects, slot(h, fentryFeNexthopNH_STALE))
		if err != nil {
			return nil, fmt.Errorf("read fentry redirect counters: %w", err)
		}
		other, err := perCPUCounter(t.feRedirects, slot(h, fentryFeNexthopNH_OTHER))
		if err != nil {
			return nil, fmt.Errorf("read fentry redirect counters: %w", err)
		}
		out[h] = struct{ Stale, Other uint64 }{stale, other}
	}
	return out, nil
}

// sources name the tracepoints of enum tp_source.
var sources = map[tracerTpSource]string{
	tracerTpSourceSRC_UPDATE:     "neigh_update_done",
	tracerTpSourceSRC_EVENT_SEND: "neigh_event_send_done",
	tracerTpSourceSRC_TIMER:      "neigh_timer_handler",
	tracerTpSourceSRC_CREATE:     "neigh_create",
	tracerTpSourceSRC_CLEANUP:    "neigh_cleanup_and_release",
	tracerTpSourceSRC_HIT:        SourceHit,
	tracerTpSourceSRC_SIGHTING:   SourceSighting,
	tracerTpSourceSRC_UNMIRRORED: SourceUnmirrored,
	tracerTpSourceSRC_OWN:        SourceOwn,
	tracerTpSourceSRC_ROUTED:     SourceRouted,
}

// ReadTransitions calls fn for each silent transition the tracepoints
// report, until ctx ends or the tracer is closed. Records that do not
// decode go to bad.
func (t Readout) ReadTransitions(ctx context.Context, fn func(SilentTransition), bad func(error)) error {
	// Flush wakes a blocked read without the reader's lock, which a
	// blocked read holds (SetDeadline would wait for it).
	stop := context.AfterFunc(ctx, func() { _ = t.rd.Flush() })
	defer stop()
	var rec ringbuf.Record
	for {
		if err := t.rd.ReadInto(&rec); err != nil {
			if ctx.Err() != nil || errors.Is(err, ringbuf.ErrClosed) || errors.Is(err, os.ErrClosed) {
				return nil
			}
			if errors.Is(err, ringbuf.ErrFlushed) {
				continue
			}
			return fmt.Errorf("read tracer events: %w", err)
		}
		st, err := decodeTransition(rec.RawSample)
		if err != nil {
			bad(err)
			continue
		}
		fn(st)
	}
}

// decodeTransition decodes one ring buffer record, a struct tp_event.
func decodeTransition(b []byte) (SilentTransition, error) {
	var ev tracerTpEvent
	if err := binary.Read(bytes.NewReader(b), binary.NativeEndian, &ev); err != nil {
		return SilentTransition{}, fmt.Errorf("tracer event of %d bytes: %w", len(b), err)
	}
	if ev.Key.Family != unix.AF_INET && ev.Key.Family != unix.AF_INET6 {
		return SilentTransition{}, fmt.Errorf("tracer event for address family %d", ev.Key.Family)
	}
	return SilentTransition{
		Key:    ev.Key.hitKey(),
		From:   ev.From,
		To:     ev.To,
		MAC:    net.HardwareAddr(bytes.Clone(ev.Mac[:])),
		Source: sources[tracerTpSource(ev.Source)],
	}, nil
}

// MapMemory returns, by map name, the kernel memory each of the tracer's
// maps takes: the memlock the kernel reports for it (fdinfo), which
// kernels since 5.11 charge to the agent's memory cgroup. A map the
// kernel reports no figure for is left out.
func (t Readout) MapMemory() (map[string]uint64, error) {
	out := map[string]uint64{}
	add := func(name string, m *ebpf.Map) error {
		if m == nil {
			return nil
		}
		info, err := m.Info()
		if err != nil {
			return fmt.Errorf("read the %s map's info: %w", name, err)
		}
		if b, ok := info.Memlock(); ok {
			out[name] = b
		}
		return nil
	}
	v := reflect.ValueOf(t.objs.tracerMaps)
	for i := range v.NumField() {
		m, _ := v.Field(i).Interface().(*ebpf.Map)
		if err := add(v.Type().Field(i).Tag.Get("ebpf"), m); err != nil {
			return nil, err
		}
	}
	if err := add("fe_redirects", t.feRedirects); err != nil {
		return nil, err
	}
	return out, nil
}

// NameGateway answers the transmit hook's question (SourceRouted): bypass
// traffic on ifindex, of the family of family, was routed to mac, and addr
// is the STALE entry of that interface and family with that MAC, the
// gateway, or the zero Addr when none is (the hook asks again some
// epochs later, or as soon as an entry with the MAC turns STALE). The
// hook checks the answer against the mirror at every packet. A question
// the hook dropped meanwhile is not answered: it asks again.
func (t Readout) NameGateway(ifindex int, family netip.Addr, mac net.HardwareAddr, addr netip.Addr) error {
	if len(mac) != 6 {
		return fmt.Errorf("gateway MAC %v: not Ethernet", mac)
	}
	k := tracerMkey{Ifindex: uint32(ifindex), Family: nkeyOf(ifindex, family).Family, Mac: [6]byte(mac)}
	v := tracerVia{State: uint8(tracerViaStateVIA_NONE)}
	if addr.IsValid() {
		v.State, v.Addr = uint8(tracerViaStateVIA_STALE), nkeyOf(ifindex, addr).Addr
	}
	if err := t.objs.Epoch.Get(&v.Epoch); err != nil {
		return fmt.Errorf("read the tracer's epoch: %w", err)
	}
	err := t.objs.ViaMacs.Update(raw(&k), raw(&v), ebpf.UpdateExist)
	if err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
		return fmt.Errorf("name the gateway of %v on interface %d: %w", mac, ifindex, err)
	}
	return nil
}
