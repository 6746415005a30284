package bpf

import (
	"context"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/neighwatch/neighwatch/internal/dev/lab"
	"github.com/neighwatch/neighwatch/internal/dev/lab/fwd"
	"github.com/neighwatch/neighwatch/internal/kver"
)

// Kernel-contract tests: the kernel matrix (make test-kernels) runs these
// on Debian's kernels, amd64 and arm64, and on the machine's own kernel.

// fentryRefused reports whether the kernel refuses fentry programs
// (FentryAllowed), and logs why.
func fentryRefused(t *testing.T) bool {
	t.Helper()
	ok, why := FentryAllowed()
	if !ok {
		t.Logf("this kernel refuses fentry: %s", why)
	}
	return !ok
}

// TestTracerLoadsOnThisKernel: every feature has a way in on every kernel
// from 5.10: a program the verifier refuses (neigh_create's tp_btf before
// 6.18) is replaced by its raw tracepoint twin, and bypass packets are
// counted by fentry where the kernel allows it (no lockdown), else at
// transmit with the reason named. XDP redirects are counted exactly when
// fentry runs. With the default map sizes and with the ones the agent
// sizes from a node's default gc_thresh3 (fentry's object shares the
// maps, so its spec must take their sizes).
func TestTracerLoadsOnThisKernel(t *testing.T) {
	lab.Require(t)
	n := MapSizeFor(2048)
	for name, opts := range map[string]TracerOptions{
		"default-sizes": {Mode: TracerAuto},
		"sized":         {Mode: TracerAuto, MirrorSize: n, HitsSize: n, CandidatesSize: n},
	} {
		t.Run(name, func(t *testing.T) { tracerLoads(t, opts) })
	}
}

func tracerLoads(t *testing.T, opts TracerOptions) {
	tr, err := LoadTracer(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	features := map[Feature]FeatureStatus{}
	for _, f := range tr.Features() {
		features[f.Feature] = f
		t.Logf("%-16s working=%v via=%s %s", f.Feature, f.Working, f.Via, f.Why)
	}
	for _, p := range tr.Programs() {
		if !p.Loaded {
			t.Logf("refused: %s (%s, %s): %s", p.Program, p.Hook, p.Refusal, p.Error)
		}
	}
	// The maps' kernel memory, as neighwatch_tracer_map_bytes reports it:
	// every per-entry map named, each taking something (at least its
	// buckets: the kernel reports what a map uses since 6.4, its full
	// size before). The ring buffer is left out: 6.1 reports 0 for it.
	mem, err := tr.MapMemory()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("map memory: %v", mem)
	for _, name := range []string{"hits", "neigh_mirror", "via_macs", "source_candidates"} {
		if mem[name] == 0 {
			t.Errorf("map %s: no memory reported (%v)", name, mem)
		}
	}
	// The agent's memory plan goes by the release, the loader by what
	// loads: they must agree on where the source-MAC candidates live.
	if planned, rel, err := kver.AtLeast(CandidatesInMirrorFrom[0], CandidatesInMirrorFrom[1]); err != nil || planned != tr.core.candInMirror || (tr.core.seed.cand != nil) != tr.core.candInMirror {
		t.Errorf("kernel %s: candidates in the mirror's values: planned %v, loaded %v (tr_candidates loaded %v; %v)", rel, planned, tr.core.candInMirror, tr.core.seed.cand != nil, err)
	}
	for _, f := range []Feature{FeatureStates, FeatureCreated, FeatureBypass, FeatureSourceMAC} {
		if st := features[f]; !st.Working || st.Why != "" {
			t.Errorf("%s: working=%v (%s); every kernel from 5.10 has a way in", f, st.Working, st.Why)
		}
	}
	if fentryRefused(t) {
		if tr.Mode() != TracerXmit || tr.Fallback() == nil || !strings.Contains(tr.Fallback().Error(), "fentry") {
			t.Errorf("a kernel that refuses fentry: mode %s, fallback %v; want xmit and the fentry refusal named", tr.Mode(), tr.Fallback())
		}
		if features[FeatureXDPBypass].Working || features[FeatureXDPBypass].Why == "" {
			t.Errorf("xdp-bypass without fentry: %+v; want off, with why", features[FeatureXDPBypass])
		}
		return
	}
	if tr.Mode() != TracerFentry {
		t.Errorf("the kernel takes fentry: mode %s (fallback %v); want fentry", tr.Mode(), tr.Fallback())
	}
	if x := features[FeatureXDPBypass]; !x.Working || x.Why != "" {
		t.Errorf("xdp-bypass with fentry: %+v; want working, bpf_redirect_map included", x)
	}
}

// TestTracerDegradesProgramByProgram takes programs away and checks that
// each costs its own feature and nothing else.
func TestTracerDegradesProgramByProgram(t *testing.T) {
	lab.Require(t)
	for _, tc := range []struct {
		refuse []string
		off    []Feature
		mode   TracerMode // "" when it depends on the kernel
	}{
		{refuse: []string{"tr_create", "tr_create_raw"}, off: []Feature{FeatureCreated}},
		// Where the tp_btf one is refused, the raw tracepoint takes over.
		// (Not for the state hooks: before 6.1 the verifier warns on a
		// raw tracepoint using the mirror, allocated at run time, and
		// the kernel matrix fails a guest that warns.)
		{refuse: []string{"tr_create"}},
		{refuse: []string{"tr_source"}, off: []Feature{FeatureSourceMAC}},
		{refuse: []string{"tr_update_done", "tr_update_done_raw"}, off: []Feature{FeatureStates, FeatureBypass, FeatureXDPBypass}, mode: TracerOff},
		{refuse: []string{"fe_skb_fib", "tr_xmit"}, off: []Feature{FeatureBypass, FeatureXDPBypass}, mode: TracerOff},
		{refuse: []string{"fe_skb_fib"}, off: []Feature{FeatureXDPBypass}, mode: TracerXmit},
	} {
		t.Run(strings.Join(tc.refuse, "+"), func(t *testing.T) {
			tr, err := LoadTracer(TracerOptions{Mode: TracerAuto, Refuse: tc.refuse})
			if err != nil {
				t.Fatal(err)
			}
			defer tr.Close()
			off := map[Feature]bool{}
			for _, f := range tc.off {
				off[f] = true
			}
			// Every feature has a status: one refused program does not
			// stop the others from being tried.
			said := map[Feature]bool{}
			for _, f := range tr.Features() {
				said[f.Feature] = true
			}
			for _, f := range Features() {
				if !said[f] {
					t.Errorf("%s has no status with %v refused: not tried", f, tc.refuse)
				}
			}
			for _, f := range tr.Features() {
				switch {
				case off[f.Feature] && f.Working && f.Why == "":
					t.Errorf("%s still works fully with %v refused", f.Feature, tc.refuse)
				case off[f.Feature] && f.Why == "":
					t.Errorf("%s off without a reason", f.Feature)
				case !off[f.Feature] && f.Feature != FeatureXDPBypass && !f.Working:
					t.Errorf("%s off (%s); refusing %v must not cost it", f.Feature, f.Why, tc.refuse)
				}
			}
			if tc.mode != "" && tr.Mode() != tc.mode {
				t.Errorf("bypass counted by %s, want %s", tr.Mode(), tc.mode)
			}
			refused := 0
			for _, p := range tr.Programs() {
				if p.Refusal == RefusedDisabled {
					refused++
				}
			}
			if refused == 0 {
				t.Errorf("no program reported as refused: %+v", tr.Programs())
			}
		})
	}
}

// helperCase is one forwarder in TestTracerCountsEachHelper and what the
// fentry programs must count for n packets through it.
type helperCase struct {
	name string
	// attach attaches the forwarder to the node's n1 (backend side) and
	// returns how to remove it.
	attach func(t *testing.T, l *lab.Lab) func()
	helper Helper
	// bypass: every packet goes to the STALE entry past the neighbour
	// subsystem (a hit per packet); otherwise none does.
	bypass bool
	// stale: the lookup before the helper resolved to the STALE entry
	// every time (false: only the total over both next-hop states is
	// known, as when the helper re-validates the entry after the first
	// packet).
	stale    bool
	xmitSees bool // the transmit hook sees the redirected frames
}

func attachFwd(kind fwd.Kind, o fwd.Options) func(t *testing.T, l *lab.Lab) func() {
	return func(t *testing.T, l *lab.Lab) func() {
		var f *fwd.Forwarder
		if err := l.Node.Do(func() (err error) { f, err = fwd.AttachWith(lab.NodeBackendIf, kind, o); return err }); err != nil {
			t.Fatal(err)
		}
		return func() { f.Close() }
	}
}

func attachProject(mode Mode) func(t *testing.T, l *lab.Lab) func() {
	return func(t *testing.T, l *lab.Lab) func() {
		dp, err := LoadDatapath()
		if err != nil {
			t.Fatal(err)
		}
		n1, err := l.Node.Ifindex(lab.NodeBackendIf)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Node.Do(func() error { return dp.Attach(n1, mode) }); err != nil {
			t.Fatal(err)
		}
		return func() { _ = l.Node.Do(dp.Close) }
	}
}

// TestTracerCountsEachHelper sends a known number of packets through each
// kind of forwarder on the node and checks what the tracer counted: in
// fentry mode, each redirect helper's calls by the state of the neighbour
// the lookup before it resolved, and a bypass hit for each packet sent to
// the STALE entry past the neighbour subsystem; in xmit mode, the same
// hits for what leaves through the transmit path. The packets go in two
// halves with a new epoch between them, and the hits are announced in
// each (the agent reads only announced counters). On a kernel that
// refuses fentry the fallback is named and xmit mode is checked alone.
func TestTracerCountsEachHelper(t *testing.T) {
	lab.Require(t)
	const n = 200
	cases := []helperCase{
		{name: "project-legacy", attach: attachProject(ModeLegacy), helper: HelperRedirect, bypass: true, stale: true, xmitSees: true},
		{name: "tc-redirect", attach: attachFwd(fwd.TC, fwd.Options{}), helper: HelperRedirect, bypass: true, stale: true, xmitSees: true},
		{name: "xdp-redirect", attach: attachFwd(fwd.XDP, fwd.Options{}), helper: HelperXDPRedirect, bypass: true, stale: true},
		{name: "xdp-redirect-map", attach: attachFwd(fwd.XDPMap, fwd.Options{}), helper: HelperXDPRedirectMap, bypass: true, stale: true},
		{name: "tc-redirect-peer", attach: attachFwd(fwd.Peer, fwd.Options{Peer: lab.NodeClientIf}), helper: HelperRedirectPeer},
		// Last: bpf_redirect_neigh re-validates the entry, which leaves
		// STALE after the first packet.
		{name: "project-neigh", attach: attachProject(ModeNeigh), helper: HelperRedirectNeigh},
	}
	modes := []TracerMode{TracerXmit}
	if !fentryRefused(t) {
		modes = append(modes, TracerFentry)
	}
	var report []string
	for _, mode := range modes {
		t.Run(string(mode), func(t *testing.T) {
			hl := newHelperLab(t, mode)
			for _, hc := range cases {
				t.Run(hc.name, func(t *testing.T) {
					got := hl.count(t, hc, n)
					report = append(report, fmt.Sprintf("%-6s %-17s %s", mode, hc.name, got))
				})
			}
		})
	}
	if fentryRefused(t) {
		tr, err := LoadTracer(TracerOptions{Mode: TracerFentry})
		if err != nil {
			t.Fatal(err)
		}
		defer tr.Close()
		if tr.Mode() != TracerXmit || tr.Fallback() == nil {
			t.Errorf("a kernel that refuses fentry: mode %s, fallback %v; want xmit, the refusal named", tr.Mode(), tr.Fallback())
		}
		report = append(report, "fentry refused, fallback named: "+tr.Fallback().Error())
	}
	t.Logf("what each mode counted for %d packets:\n%s", n, strings.Join(report, "\n"))
}

// helperLab is a lab with a tracer in one mode on its node, the node's
// entry for the client STALE.
type helperLab struct {
	*lab.Lab
	mode TracerMode
	tr   *Tracer
	mac  net.HardwareAddr
	key  HitKey

	mu        sync.Mutex
	announced int // SRC_HIT announcements of key
}

func newHelperLab(t *testing.T, mode TracerMode) *helperLab {
	l := lab.New(t, "hlp")
	h := &helperLab{Lab: l, mode: mode}
	// The counts are of the test's IPv4 packets. The backend's IPv6
	// (MLD reports, router solicitations) would reach the forwarders
	// too, at times of the kernel's choosing: the peer forwarder hands
	// every IP packet over, and a slow guest's late reports added 2 calls
	// to its 200 (6.12 under emulation).
	for _, k := range []string{"net.ipv6.conf.all.disable_ipv6", "net.ipv6.conf." + lab.BackendIf + ".disable_ipv6"} {
		if err := l.Backend.Sysctl(k, "1"); err != nil {
			t.Fatal(err)
		}
	}
	var err error
	if h.mac, err = l.Client.MAC(lab.ClientIf); err != nil {
		t.Fatal(err)
	}
	// The backend knows the node, so nothing waits on resolution there.
	if err := l.Backend.Ping(lab.NodeBackendIP, 1, 2*time.Second); err != nil {
		t.Fatal(err)
	}
	ino, err := NetNSInode("/run/netns/" + l.Node.Name)
	if err != nil {
		t.Fatal(err)
	}
	h.tr, err = LoadTracer(TracerOptions{Mode: mode, NetNSIno: ino, InNetNS: l.Node.Do})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.tr.Close() })
	if h.tr.Mode() != mode {
		t.Fatalf("asked for %s, runs %s (fallback %v)", mode, h.tr.Mode(), h.tr.Fallback())
	}
	if err := h.tr.SetWatched(nil, true); err != nil {
		t.Fatal(err)
	}
	if err := h.tr.SetPerPacket(true); err != nil {
		t.Fatal(err)
	}
	n0, err := l.Node.Ifindex(lab.NodeClientIf)
	if err != nil {
		t.Fatal(err)
	}
	h.key = HitKey{Ifindex: n0, Addr: lab.ClientIP}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = h.tr.ReadTransitions(ctx, func(tr SilentTransition) {
			if tr.Source == SourceHit && tr.Key == h.key {
				h.mu.Lock()
				h.announced++
				h.mu.Unlock()
			}
		}, func(error) {})
	}()
	t.Cleanup(func() { cancel(); <-done })
	return h
}

func (h *helperLab) announcements() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.announced
}

// count runs one forwarder and returns what the tracer counted.
func (h *helperLab) count(t *testing.T, hc helperCase, n int) string {
	// STALE again (a forwarder before may have had it re-validated),
	// set after the tracer is loaded: the tracepoints put it in the
	// in-kernel mirror.
	if err := h.Node.SetNeigh(lab.NodeClientIf, lab.ClientIP, h.mac, "stale"); err != nil {
		t.Fatal(err)
	}
	detach := hc.attach(t, h.Lab)
	defer detach()
	hits0, err := h.tr.Hits()
	if err != nil {
		t.Fatal(err)
	}
	before, err := h.tr.Redirects()
	if err != nil {
		t.Fatal(err)
	}
	announced0 := h.announcements()
	for half := range 2 {
		// A new epoch for each half: the entry's counter may have been
		// announced in the current one already (by the case before).
		if err := h.tr.BumpEpoch(); err != nil {
			t.Fatal(err)
		}
		sent, err := h.Backend.SendUDP(lab.ClientIP, 9, n/2)
		if err != nil || sent != n/2 {
			t.Fatalf("sent %d of %d: %v", sent, n/2, err)
		}
		// Every packet of this half counted (and announced) before the
		// epoch changes.
		lab.WaitFor(t, lab.Patience(5*time.Second), "the half counted", func() bool {
			hs, err := h.tr.Hits()
			return err == nil && (hs[h.key] >= hits0[h.key]+uint64(n/2*(half+1)) || !hc.bypass || (h.mode != TracerFentry && !hc.xmitSees))
		})
	}
	wantHits := 0
	if hc.bypass && (h.mode == TracerFentry || hc.xmitSees) {
		wantHits = n
	}
	var hits uint64
	var after RedirectCounts
	// Counted in softirq as the packets pass; wait until the counts
	// settle at what is expected, or time out and report what they are.
	deadline := time.Now().Add(lab.Patience(5 * time.Second))
	for {
		hs, err := h.tr.Hits()
		if err != nil {
			t.Fatal(err)
		}
		// The counters belong to one STALE period: a datapath that
		// re-validates the entry ends it, and they start again.
		hits = hs[h.key]
		if hits >= hits0[h.key] {
			hits -= hits0[h.key]
		}
		if after, err = h.tr.Redirects(); err != nil {
			t.Fatal(err)
		}
		if (hits == uint64(wantHits) && (h.mode != TracerFentry || calls(after, before, hc.helper) == uint64(n))) || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if hits != uint64(wantHits) {
		t.Errorf("%d bypass hits for the STALE entry, want %d", hits, wantHits)
	}
	if wantHits > 0 {
		// At least once in each of the two epochs.
		lab.WaitFor(t, lab.Patience(5*time.Second), "the hits announced in both epochs", func() bool { return h.announcements()-announced0 >= 2 })
	}
	if h.mode != TracerFentry {
		return fmt.Sprintf("hits %d", hits)
	}
	var parts []string
	for _, hp := range Helpers() {
		d := struct{ Stale, Other uint64 }{after[hp].Stale - before[hp].Stale, after[hp].Other - before[hp].Other}
		want := struct{ Stale, Other uint64 }{}
		if hp == hc.helper {
			want.Other = uint64(n)
			if hc.stale {
				want = struct{ Stale, Other uint64 }{uint64(n), 0}
			}
		}
		switch {
		case hp == hc.helper && !hc.stale && d.Stale+d.Other != uint64(n):
			t.Errorf("%s: %d calls (%d after a STALE lookup), want %d", hp, d.Stale+d.Other, d.Stale, n)
		case (hp != hc.helper || hc.stale) && d != want:
			t.Errorf("%s: stale %d other %d, want stale %d other %d", hp, d.Stale, d.Other, want.Stale, want.Other)
		}
		if d.Stale+d.Other > 0 {
			parts = append(parts, fmt.Sprintf("%s stale=%d other=%d", hp, d.Stale, d.Other))
		}
	}
	return fmt.Sprintf("hits %d; %s", hits, strings.Join(parts, ", "))
}

// olderGuest reports whether the test runs in a guest of the kernel
// matrix other than the newest kernel's (nwkernels names the kernel).
func olderGuest() bool {
	k := os.Getenv("NEIGHWATCH_KERNEL")
	return k != "" && k != "host" && k != "newest"
}

func calls(after, before RedirectCounts, h Helper) uint64 {
	return after[h].Stale + after[h].Other - before[h].Stale - before[h].Other
}

// TestTracerIgnoresOtherNamespaces: ifindexes and addresses repeat across
// namespaces, so the tracer counts only packets of the namespace it
// mirrors. Two labs made alike have the same keys; traffic through a
// bpf_redirect() forwarder to the STALE entry of the second lab's node is
// not a hit on the first's, in xmit and (where the kernel allows it)
// fentry mode.
func TestTracerIgnoresOtherNamespaces(t *testing.T) {
	lab.Require(t)
	modes := []TracerMode{TracerXmit}
	if !fentryRefused(t) {
		modes = append(modes, TracerFentry)
		if olderGuest() {
			// The mode the agent runs here. Both modes filter by the
			// same read of the device's namespace (in_netns); xmit's is
			// held on the newest guest and the host. Two labs a mode
			// cost an older guest about 50 s.
			modes = []TracerMode{TracerFentry}
		}
	}
	for _, mode := range modes {
		t.Run(string(mode), func(t *testing.T) {
			mirrored := newHelperLab(t, mode) // the tracer mirrors this lab's node
			other := lab.New(t, "ons")
			n0, err := other.Node.Ifindex(lab.NodeClientIf)
			if err != nil {
				t.Fatal(err)
			}
			if n0 != mirrored.key.Ifindex {
				t.Fatalf("the labs' client interfaces are %d and %d: the test needs equal keys", mirrored.key.Ifindex, n0)
			}
			mac, err := other.Client.MAC(lab.ClientIf)
			if err != nil {
				t.Fatal(err)
			}
			if err := other.Backend.Ping(lab.NodeBackendIP, 1, 2*time.Second); err != nil {
				t.Fatal(err)
			}
			for _, l := range []struct {
				l   *lab.Lab
				mac net.HardwareAddr
			}{{mirrored.Lab, mirrored.mac}, {other, mac}} {
				if err := l.l.Node.SetNeigh(lab.NodeClientIf, lab.ClientIP, l.mac, "stale"); err != nil {
					t.Fatal(err)
				}
			}
			if !mirrored.tr.Mirrored(mirrored.key) {
				t.Fatal("the mirrored lab's STALE entry is not in the in-kernel mirror")
			}
			detach := attachFwd(fwd.TC, fwd.Options{})(t, other)
			defer detach()
			before, err := mirrored.tr.Redirects()
			if err != nil {
				t.Fatal(err)
			}
			_, tx0, err := other.Node.LinkStats(lab.NodeClientIf)
			if err != nil {
				t.Fatal(err)
			}
			const n = 100
			if sent, err := other.Backend.SendUDP(lab.ClientIP, 9, n); err != nil || sent != n {
				t.Fatalf("sent %d of %d: %v", sent, n, err)
			}
			// Every packet has left the other node (the transmit hook has
			// run for each) and, in fentry mode, every bpf_redirect() call
			// was seen (fe_redirects counts them all): the hits are final.
			lab.WaitFor(t, lab.Patience(5*time.Second), "the packets forwarded", func() bool {
				_, tx, err := other.Node.LinkStats(lab.NodeClientIf)
				if err != nil || tx < tx0+n {
					return false
				}
				if mode != TracerFentry {
					return true
				}
				after, err := mirrored.tr.Redirects()
				return err == nil && calls(after, before, HelperRedirect) >= n
			})
			hs, err := mirrored.tr.Hits()
			if err != nil {
				t.Fatal(err)
			}
			if hs[mirrored.key] != 0 {
				t.Errorf("%d hits on the mirrored lab's entry for another namespace's traffic", hs[mirrored.key])
			}
		})
	}
}
