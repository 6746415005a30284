package bpf

import (
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/neighwatch/neighwatch/internal/quote"
)

// Mode is a datapath variant.
type Mode string

// Datapath modes.
const (
	ModeLegacy Mode = "legacy" // bpf_fib_lookup + bpf_redirect (Cilium before PR 37725)
	ModeNeigh  Mode = "neigh"  // bpf_fib_lookup(SKIP_NEIGH) + bpf_redirect_neigh (after)
)

// ParseMode checks a --datapath.mode value.
func ParseMode(s string) (Mode, error) {
	switch Mode(s) {
	case ModeLegacy, ModeNeigh:
		return Mode(s), nil
	}
	return "", fmt.Errorf("datapath mode %s: want legacy or neigh", quote.Input(s))
}

// TracerMode selects how bypass packets are counted.
type TracerMode string

// Tracer modes. Auto tries fentry and falls back to xmit.
const (
	TracerOff    TracerMode = "off"
	TracerAuto   TracerMode = "auto"
	TracerXmit   TracerMode = "xmit"
	TracerFentry TracerMode = "fentry"
)

// ParseTracerMode checks a --tracer value.
func ParseTracerMode(s string) (TracerMode, error) {
	switch TracerMode(s) {
	case TracerOff, TracerAuto, TracerXmit, TracerFentry:
		return TracerMode(s), nil
	}
	return "", fmt.Errorf("tracer mode %s: want off, auto, xmit or fentry", quote.Input(s))
}

// ErrNoBTF means the kernel exposes no BTF (/sys/kernel/btf/vmlinux), which
// tp_btf and fentry programs need.
var ErrNoBTF = errors.New("kernel has no BTF (/sys/kernel/btf/vmlinux missing); the tracer needs CONFIG_DEBUG_INFO_BTF")

// Decision is what the datapath did with a packet: a value of the C enum
// dp_decision, whose constants bpf2go generates (datapathDpDecision*).
type Decision uint32

// Decisions of the datapath, in the values of datapath.c.
const (
	PassNotIP            = Decision(datapathDpDecisionDP_PASS_NOT_IP)
	PassTTL              = Decision(datapathDpDecisionDP_PASS_TTL)
	PassFragment         = Decision(datapathDpDecisionDP_PASS_FRAGMENT)
	PassLocal            = Decision(datapathDpDecisionDP_PASS_LOCAL)
	PassFIBOther         = Decision(datapathDpDecisionDP_PASS_FIB_OTHER)
	Redirect             = Decision(datapathDpDecisionDP_REDIRECT)
	RedirectNeigh        = Decision(datapathDpDecisionDP_REDIRECT_NEIGH)
	RedirectNeighNoNeigh = Decision(datapathDpDecisionDP_REDIRECT_NEIGH_NO_NEIGH)
	RedirectFailed       = Decision(datapathDpDecisionDP_REDIRECT_FAILED)
	numDecisions         = Decision(datapathDpDecisionDP_MAX)
)

// decisionNames label the decisions in metrics; a test checks that every
// value of the C enum has one.
var decisionNames = map[Decision]string{
	PassNotIP: "pass_not_ip", PassTTL: "pass_ttl", PassFragment: "pass_fragment", PassLocal: "pass_local",
	PassFIBOther: "pass_fib_other", Redirect: "redirect", RedirectNeigh: "redirect_neigh",
	RedirectNeighNoNeigh: "redirect_neigh_no_neigh", RedirectFailed: "redirect_failed",
}

func (d Decision) String() string {
	if n, ok := decisionNames[d]; ok {
		return n
	}
	return fmt.Sprintf("decision(%d)", uint32(d))
}

// Decisions lists every decision.
func Decisions() []Decision {
	out := make([]Decision, numDecisions)
	for i := range out {
		out[i] = Decision(i)
	}
	return out
}

// Helper is a redirect helper the fentry tracer counts (C enum fe_helper).
type Helper uint32

// The helpers.
const (
	HelperRedirect      = Helper(fentryFeHelperH_REDIRECT)
	HelperRedirectNeigh = Helper(fentryFeHelperH_REDIRECT_NEIGH)
	HelperRedirectPeer  = Helper(fentryFeHelperH_REDIRECT_PEER)
	// In XDP programs: bpf_redirect() and bpf_redirect_map() to a devmap.
	HelperXDPRedirect    = Helper(fentryFeHelperH_XDP_REDIRECT)
	HelperXDPRedirectMap = Helper(fentryFeHelperH_XDP_REDIRECT_MAP)
	numHelpers           = Helper(fentryFeHelperH_MAX)
)

var helperNames = map[Helper]string{
	HelperRedirect: "bpf_redirect", HelperRedirectNeigh: "bpf_redirect_neigh", HelperRedirectPeer: "bpf_redirect_peer",
	HelperXDPRedirect: "xdp_redirect", HelperXDPRedirectMap: "xdp_redirect_map",
}

func (h Helper) String() string {
	if n, ok := helperNames[h]; ok {
		return n
	}
	return fmt.Sprintf("helper(%d)", uint32(h))
}

// Helpers lists the redirect helpers.
func Helpers() []Helper {
	out := make([]Helper, numHelpers)
	for i := range out {
		out[i] = Helper(i)
	}
	return out
}

// RedirectCounts are the fentry tracer's redirect helper calls: by helper,
// whether the FIB lookup before the call resolved to a STALE entry or not.
type RedirectCounts map[Helper]struct{ Stale, Other uint64 }

// MaxHitEntries caps the bypass hit counters' map. It holds a counter
// for each STALE entry bypass packets reached lately, not one for every
// entry: the feed drops a counter no packet reached for a minute or two,
// so a table of a million entries needs no more of its slots (16 bytes
// each, set aside by the kernel whatever they hold) than one of 65,536.
const MaxHitEntries = 1 << 16

// TracerStats are the tracer's own counters.
type TracerStats struct {
	HitsDropped, MirrorDropped, EventsDropped uint64
	RoutedAsks                                uint64 // MACs of routed bypass traffic user space was asked to name
	XmitLookups                               uint64 // IPv4 and IPv6 together
	XmitLookups6                              uint64 // the IPv6 part of XmitLookups
	HitEntries, HitCapacity                   int
	MirrorEntries, MirrorCapacity             int
}

// HitKey names a neighbour entry in the tracer's maps.
type HitKey struct {
	Ifindex int
	Addr    netip.Addr
}

// SeedEntry is one table entry given to the tracer's mirror at start.
type SeedEntry struct {
	Ifindex int
	Addr    netip.Addr
	State   uint8 // NUD state
	MAC     net.HardwareAddr
}

// Announcements on the transition stream that are not transitions: an
// entry got bypass packets, a candidate was seen at another MAC, an entry
// did not fit in the in-kernel maps, a candidate seen at another MAC sent
// from its own. Their SilentTransition has only the key (and, for a
// sighting, a miss or its own MAC, the MAC).
const (
	SourceHit        = "hit"
	SourceSighting   = "sighting"
	SourceUnmirrored = "unmirrored"
	SourceOwn        = "own"
	SourceRouted     = "routed"
)

// SilentTransition is a transition the tracepoints saw and netlink never
// reports.
type SilentTransition struct {
	Key      HitKey
	From, To uint8 // NUD states
	MAC      net.HardwareAddr
	Source   string // the tracepoint
}
