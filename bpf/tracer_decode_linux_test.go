package bpf

import (
	"encoding/binary"
	"errors"
	"net/netip"
	"testing"
)

func TestNoBTF(t *testing.T) {
	_, err := LoadTracer(TracerOptions{Mode: TracerXmit, vmlinux: "/nonexistent/vmlinux"})
	if !errors.Is(err, ErrNoBTF) {
		t.Fatalf("err = %v, want ErrNoBTF", err)
	}
	if _, err := LoadTracer(TracerOptions{Mode: TracerOff}); err == nil {
		t.Fatal("mode off loaded a tracer")
	}
}

func TestParseModes(t *testing.T) {
	if _, err := ParseTracerMode("kprobe"); err == nil {
		t.Error("tracer mode kprobe accepted")
	}
	if _, err := ParseMode("xdp"); err == nil {
		t.Error("datapath mode xdp accepted")
	}
}

// rawEvent lays out a struct tp_event by hand, as tracer.h defines it, so
// the test catches a generated type that drifts from the C struct.
func rawEvent(ifindex uint32, family uint8, addr []byte, from, to, src uint8, mac []byte) []byte {
	b := make([]byte, 36)
	binary.NativeEndian.PutUint32(b[0:], ifindex)
	b[4] = family
	copy(b[8:24], addr)
	b[24], b[25], b[26] = from, to, src
	copy(b[28:34], mac)
	return b
}

// TestGeneratedEnums: every value of the C enums has a Go name, and the
// sizes agree with the C structs.
func TestGeneratedEnums(t *testing.T) {
	for _, d := range Decisions() {
		if _, ok := decisionNames[d]; !ok {
			t.Errorf("datapath decision %d has no name", d)
		}
	}
	if len(decisionNames) != int(numDecisions) {
		t.Errorf("%d decision names for %d decisions", len(decisionNames), numDecisions)
	}
	for _, h := range Helpers() {
		if _, ok := helperNames[h]; !ok {
			t.Errorf("helper %d has no name", h)
		}
	}
	for s := tracerTpSource(0); s <= tracerTpSourceSRC_CLEANUP; s++ {
		if sources[s] == "" {
			t.Errorf("tracepoint source %d has no name", s)
		}
	}
	if n := binary.Size(tracerTpEvent{}); n != 36 {
		t.Errorf("struct tp_event is %d bytes in Go, 36 in C", n)
	}
}

func TestDecodeTransition(t *testing.T) {
	st, err := decodeTransition(rawEvent(7, 2, []byte{10, 0, 1, 2}, 0x04, 0x08, 1, []byte{2, 0, 0, 0, 0, 1}))
	if err != nil {
		t.Fatal(err)
	}
	if st.Key.Ifindex != 7 || st.Key.Addr != netip.MustParseAddr("10.0.1.2") || st.From != 0x04 || st.To != 0x08 ||
		st.Source != "neigh_event_send_done" || st.MAC.String() != "02:00:00:00:00:01" {
		t.Fatalf("decoded %+v", st)
	}
	v6 := netip.MustParseAddr("fd00::2").As16()
	st, _ = decodeTransition(rawEvent(3, 10, v6[:], 0x02, 0x08, 2, nil))
	if st.Key.Addr != netip.MustParseAddr("fd00::2") || st.Source != "neigh_timer_handler" {
		t.Fatalf("decoded %+v", st)
	}
	if _, err := decodeTransition(make([]byte, 20)); err == nil {
		t.Fatal("short record accepted")
	}
	if _, err := decodeTransition(rawEvent(3, 7, nil, 4, 8, 1, nil)); err == nil {
		t.Fatal("record of address family 7 accepted")
	}
}

// FuzzDecodeTransition: ring buffer records come from the kernel, but the
// decoder must survive anything.
func FuzzDecodeTransition(f *testing.F) {
	f.Add(rawEvent(7, 2, []byte{10, 0, 1, 2}, 4, 8, 1, []byte{2, 0, 0, 0, 0, 1}))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		st, err := decodeTransition(b)
		if err == nil && !st.Key.Addr.IsValid() {
			t.Fatalf("decoded an invalid address from %x", b)
		}
	})
}

// TestNextEpochSkipsLowByteZero: candidates keep the epoch's low byte and
// start at 0, so no epoch may have 0 there, or a new candidate's first
// sighting in it would go unannounced.
func TestNextEpochSkipsLowByteZero(t *testing.T) {
	for e, want := range map[uint32]uint32{1: 2, 254: 255, 255: 257, 0x1ff: 0x201, 0xffffffff: 1} {
		if got := nextEpoch(e); got != want {
			t.Errorf("nextEpoch(%#x) = %#x, want %#x", e, got, want)
		}
	}
}
