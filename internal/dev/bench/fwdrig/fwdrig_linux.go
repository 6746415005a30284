// Package fwdrig is the forwarding benchmarks' rig, shared by the bpf
// package's (the datapath and the tracer's hooks alone) and the
// end-to-end one (the agent as deployed): 64-byte UDP frames injected
// into a lab node's backend-facing veth with XDP live frames from one
// pinned CPU, forwarded to the client, where a tcx program drops and
// counts them. And the per-round series the benchmarks report.
package fwdrig

import (
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/netip"
	"sort"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/neighwatch/neighwatch/internal/dev/bench/progs"
	"github.com/neighwatch/neighwatch/internal/dev/lab"
	"github.com/neighwatch/neighwatch/internal/dev/pkt"
	"golang.org/x/sys/unix"
)

// Rig injects frames into a lab's node.
type Rig struct {
	L     *lab.Lab
	Progs *progs.Objects
	// N0 and N1 are the node's client- and backend-facing interfaces.
	N0, N1 int
	n1mac  net.HardwareAddr
}

// New readies l for injection: no IPv6 on the path (router
// solicitations would create STALE link-local entries at random
// moments and make rounds differ), the client's entry PERMANENT so the
// neighbour state stays still, the programs loaded and the client's
// drop program attached; frames aimed at the client.
func New(tb testing.TB, l *lab.Lab) *Rig {
	tb.Helper()
	r := &Rig{L: l}
	var err error
	if r.N0, err = l.Node.Ifindex(lab.NodeClientIf); err != nil {
		tb.Fatal(err)
	}
	if r.N1, err = l.Node.Ifindex(lab.NodeBackendIf); err != nil {
		tb.Fatal(err)
	}
	cmac, _ := l.Client.MAC(lab.ClientIf)
	r.n1mac, _ = l.Node.MAC(lab.NodeBackendIf)
	for _, ns := range []struct {
		n   lab.NS
		dev string
	}{{l.Client, lab.ClientIf}, {l.Node, lab.NodeClientIf}, {l.Node, lab.NodeBackendIf}} {
		if err := ns.n.Sysctl("net.ipv6.conf."+ns.dev+".disable_ipv6", "1"); err != nil {
			tb.Fatal(err)
		}
	}
	if err := l.Node.SetNeigh(lab.NodeClientIf, lab.ClientIP, cmac, "permanent"); err != nil {
		tb.Fatal(err)
	}
	if r.Progs, err = progs.Load(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { r.Progs.Close() })
	c0, _ := l.Client.Ifindex(lab.ClientIf)
	if err := l.Client.Do(func() error {
		drop, err := link.AttachTCX(link.TCXOptions{Interface: c0, Program: r.Progs.TcDropBench, Attach: ebpf.AttachTCXIngress})
		if err == nil {
			tb.Cleanup(func() { drop.Close() })
		}
		return err
	}); err != nil {
		tb.Fatal(err)
	}
	r.Aim(tb, lab.ClientIP)
	return r
}

// Aim points the injected frames at dst and returns the frame (60
// bytes): the XDP program writes its Ethernet, IPv4 and UDP headers over
// each frame it injects.
func (r *Rig) Aim(tb testing.TB, dst netip.Addr) []byte {
	tb.Helper()
	frame := pkt.UDP4(r.n1mac, net.HardwareAddr{2, 0, 0, 0, 0xb0, 1}, lab.BackendIP, dst, 64, 0, 18)
	var tmpl [42]byte
	copy(tmpl[:], frame)
	if err := r.Progs.Tmpl.Set(tmpl); err != nil {
		tb.Fatal(err)
	}
	return frame
}

// Inject sends n frames into N1 from CPU 0 and returns how long the
// run took. Every frame must come out at the client's drop program.
func (r *Rig) Inject(tb testing.TB, frame []byte, n uint32) time.Duration {
	tb.Helper()
	// struct xdp_md: data, data_end (must equal the frame's length),
	// data_meta, ingress_ifindex, rx_queue_index, egress_ifindex.
	ctx := make([]byte, 24)
	binary.NativeEndian.PutUint32(ctx[4:], uint32(len(frame)))
	binary.NativeEndian.PutUint32(ctx[12:], uint32(r.N1))
	var before, after uint64
	_ = r.Progs.Dropped.Get(&before)
	var d time.Duration
	if err := r.L.Node.Do(func() error {
		var set unix.CPUSet
		set.Set(0)
		if err := unix.SchedSetaffinity(0, &set); err != nil {
			return err
		}
		start := time.Now()
		_, err := r.Progs.XdpPass.Run(&ebpf.RunOptions{Data: frame, Repeat: n, Flags: unix.BPF_F_TEST_XDP_LIVE_FRAMES, Context: ctx})
		d = time.Since(start)
		return err
	}); err != nil {
		// This rig needs BPF_PROG_RUN's live frames (5.18 on); a kernel
		// that refuses them (EPERM on one boot of this machine's 6.18,
		// cause not found) cannot run it.
		tb.Fatalf("injecting %d frames with XDP live frames (BPF_PROG_RUN, BPF_F_TEST_XDP_LIVE_FRAMES): %v: the kernel refuses the rig's injection, so no forwarding benchmark can run here", n, err)
	}
	_ = r.Progs.Dropped.Get(&after)
	if got := after - before; got < uint64(n)*99/100 {
		tb.Fatalf("only %d of %d injected frames were forwarded to the client", got, n)
	}
	return d
}

// Series are a benchmark's figures by name, one a round.
type Series map[string][]float64

// Add appends a round's figure.
func (s Series) Add(k string, v float64) { s[k] = append(s[k], v) }

// Last is the latest round's figure.
func (s Series) Last(k string) float64 { return s[k][len(s[k])-1] }

// Stats returns the median, min and max of v.
func Stats(v []float64) (med, lo, hi float64) {
	x := append([]float64(nil), v...)
	sort.Float64s(x)
	return x[len(x)/2], x[0], x[len(x)-1]
}

// Report writes each series' figures, sorted by name, as median (min,
// max); packets a second (figures over 1,000) in Mpps.
func Report(w io.Writer, ss ...Series) {
	for _, s := range ss {
		keys := make([]string, 0, len(s))
		for k := range s {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			m, lo, hi := Stats(s[k])
			if s[k][0] > 1000 {
				m, lo, hi = m/1e6, lo/1e6, hi/1e6
			}
			fmt.Fprintf(w, "  %-52s median %.4f  (min %.4f, max %.4f)\n", k, m, lo, hi)
		}
	}
}
