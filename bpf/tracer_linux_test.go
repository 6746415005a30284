package bpf

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/neighwatch/neighwatch/internal/lab"
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
		return tr.objs.NeighMirror.Lookup(k, &v) == nil && v.State == unix.NUD_STALE
	})
	mk := tracerMkey{Ifindex: idx, Family: k.Family, Mac: [6]byte{2, 0, 0, 0, 7, 1}}
	var mv tracerMval
	if err := tr.objs.StaleMacs.Lookup(mk, &mv); err != nil || mv.Count != 1 {
		t.Fatalf("STALE MAC not recorded for ifindex %d: %v %+v", idx, err, mv)
	}
	// Unwatched again: new entries there are not mirrored.
	if err := tr.SetWatched(nil, false); err != nil {
		t.Fatal(err)
	}
	ns.MustIP(t, "neigh", "add", "10.7.0.2", "lladdr", "02:00:00:00:07:02", "dev", "big0", "nud", "stale")
	time.Sleep(200 * time.Millisecond)
	if tr.objs.NeighMirror.Lookup(nkeyOf(idx, netip.MustParseAddr("10.7.0.2")), &v) == nil {
		t.Fatal("an entry of an unwatched interface was mirrored")
	}
}
