package bpf

import (
	"errors"
	"fmt"
	"maps"
	"time"

	"golang.org/x/sys/unix"
)

// SetPerPacket attaches (on) or detaches the hooks that run for every
// packet: the transmit hook (xmit mode) or the fentry programs (fentry
// mode), and the source-MAC program on the interfaces with candidates.
// Detached, no program of the tracer runs per packet; the neighbour
// tracepoints, which run per neighbour event, stay. The agent attaches
// them only while some entry needs watching, and then in windows.
func (t Hooks) SetPerPacket(on bool) error {
	return t.SetHooks(on, on)
}

// SetHooks attaches the bypass hooks (transmit or fentry) and the
// source-MAC program separately: entries neighwatch manages need only
// the second, stale-long ones both.
func (t Hooks) SetHooks(bypass, source bool) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.setHooksLocked(bypass, source)
}

func (t Hooks) setHooksLocked(on, source bool) error {
	if any := on || source; any != t.perPacket {
		if any {
			t.since = time.Now()
		} else {
			t.attached += time.Since(t.since)
		}
		t.perPacket = any
	}
	t.sourceOn = source
	var errs []error
	switch {
	case t.mode == TracerFentry && t.fentryKept != nil:
		// Attached for good: nothing to switch.
	case t.mode == TracerFentry && on && t.fentryLinks == nil:
		errs = append(errs, t.attachFentry())
	case t.mode == TracerFentry && !on:
		errs = append(errs, closeAll(t.fentryLinks))
		t.fentryLinks = nil
	case t.mode == TracerXmit && on && t.xmitLink == nil:
		l, err := attachTracing(t.objs.TrXmit, "")
		if err != nil {
			errs = append(errs, fmt.Errorf("attach transmit hook: %w", err))
		} else {
			t.xmitLink = l
		}
	case t.mode == TracerXmit && !on && t.xmitLink != nil:
		errs = append(errs, t.xmitLink.Close())
		t.xmitLink = nil
	}
	errs = append(errs, t.syncSourceLinksLocked())
	return errors.Join(errs...)
}

// syncSourceLinksLocked attaches tr_source where it should run (hooks on,
// interface with candidates) and detaches it elsewhere. An interface that
// is gone is forgotten; one where it does not attach is remembered, with
// why, for the blind-spot metric.
func (t Hooks) syncSourceLinksLocked() error {
	var errs []error
	for idx, l := range t.sourceLinks {
		if !t.sourceOn || !t.sourceIfaces[idx] {
			errs = append(errs, t.inNetNS(l.Close))
			delete(t.sourceLinks, idx)
		}
	}
	for idx := range t.sourceFailed {
		if !t.sourceIfaces[idx] {
			delete(t.sourceFailed, idx)
		}
	}
	if !t.sourceOn || t.objs.TrSource == nil {
		return errors.Join(errs...)
	}
	for idx := range t.sourceIfaces {
		if t.sourceLinks[idx] != nil {
			continue
		}
		var l ingress
		err := t.inNetNS(func() error {
			var err error
			// At the head of the chain: a datapath program later in it
			// may redirect the packet away.
			l, err = attachIngress(idx, t.objs.TrSource, true, slotSource)
			return err
		})
		if errors.Is(err, unix.ENODEV) {
			delete(t.sourceIfaces, idx)
			delete(t.sourceFailed, idx)
			continue
		}
		if err != nil {
			t.sourceFailed[idx] = oneLine(err)
			errs = append(errs, fmt.Errorf("attach source-MAC program to interface %d: %w", idx, err))
			continue
		}
		delete(t.sourceFailed, idx)
		t.sourceLinks[idx] = l
		if st := t.features[FeatureSourceMAC]; st.Via != string(l.Method()) {
			st.Via = string(l.Method())
			t.features[FeatureSourceMAC] = st
		}
	}
	return errors.Join(errs...)
}

// PerPacket reports whether the per-packet hooks are attached, and for how
// long in all they have been since load.
func (t Hooks) PerPacket() (bool, time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	d := t.attached
	if t.perPacket {
		d += time.Since(t.since)
	}
	return t.perPacket, d
}

// SourceFailures returns the interfaces where the source-MAC program
// could not be attached, and why.
func (t Hooks) SourceFailures() map[int]string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return maps.Clone(t.sourceFailed)
}

// SetWatched limits the tracer to interfaces; all=true watches every one.
func (t Hooks) SetWatched(ifindexes []int, all bool) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	var bits [1024]uint64
	want := make(map[int]bool, len(ifindexes))
	for _, i := range ifindexes {
		want[i] = true
		if i >= 0 && i < len(bits)*64 {
			bits[i/64] |= 1 << (i % 64)
		} else if !t.watched[i] {
			if err := t.objs.WatchedBig.Put(uint32(i), uint8(1)); err != nil {
				return fmt.Errorf("watch interface %d: %w", i, err)
			}
		}
	}
	for i := range t.watched {
		if !want[i] && (i < 0 || i >= len(bits)*64) {
			_ = t.objs.WatchedBig.Delete(uint32(i))
		}
	}
	t.watched = want
	if err := t.objs.WatchedBits.Set(bits); err != nil {
		return fmt.Errorf("set watched interfaces: %w", err)
	}
	var a uint32
	if all {
		a = 1
	}
	return t.objs.WatchAll.Set(a)
}
