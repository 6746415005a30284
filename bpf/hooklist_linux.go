package bpf

// The tracer's hooks, declared once. A hook is its C (tracer.c or
// fentry.c: the program, and its section, which names where it hooks)
// and its line below: the programs that may serve it, the feature it
// serves, how the loader treats it (its kind), the kernel it needs, and
// what is not seen when the kernel refuses it. The loader finds hooks
// here, by kind; it never tells a program by its name. A program's name
// is its metric label (neighwatch_tracer_program_loaded{program}), its
// section the hook label.
//
// Adding a hook of a kind the loader knows is its C and one line here.

// hookKind is how the loader treats a hook.
type hookKind int

const (
	// kindNeighbour: a neighbour tracepoint, tp_btf where the verifier
	// takes it, else the raw tracepoint; attached at load, for good.
	kindNeighbour hookKind = iota
	// kindXmit: the transmit tracepoint, which counts bypass packets
	// where fentry does not (xmit mode); attached in windows.
	kindXmit
	// kindSource: the tc ingress program that sees a host's packets;
	// attached per interface with candidates.
	kindSource
	// kindSeed: a syscall program the agent runs to seed the mirror
	// and the candidates a batch at a time.
	kindSeed
	// kindFentryTC: fentry/fexit on the TC helpers. Fentry mode needs
	// every one; without them, bypass is counted at transmit.
	kindFentryTC
	// kindFentryTCMore: fentry on more TC helpers: more counts, each on
	// its own.
	kindFentryTCMore
	// kindFentryXDP: fentry/fexit on the XDP helpers. XDP counting needs
	// every one.
	kindFentryXDP
	// kindFentryDevmap: bpf_redirect_map to a devmap, by the devmap
	// operations (5.13); kindFentryDevmapOld, the helper, only where none
	// of those loads.
	kindFentryDevmap
	kindFentryDevmapOld
)

// A hookDecl is one hook of the tracer.
type hookDecl struct {
	kind    hookKind
	feature Feature
	// progs are the programs that may serve the hook, in order: the
	// first the kernel takes is kept.
	progs []string
	// needs is the kernel the hook needs, as a refusal's text says it.
	needs string
	// lost is what is not seen when the kernel refuses it ("" when its
	// feature says).
	lost string
	// role is what else of the tracer needs this hook's program.
	role hookRole
}

// hookRole is what else of the tracer needs a hook's program.
type hookRole int

const (
	// roleMirror keeps the in-kernel mirror of neighbour states, which
	// bypass counting reads: without it, no bypass is counted.
	roleMirror hookRole = iota + 1 // 0: no other part needs the program
	// roleSeedMirror and roleSeedCandidates seed the mirror and the
	// source-MAC candidates a batch at a time.
	roleSeedMirror
	roleSeedCandidates
)

// tracerHooks is every hook of the tracer.
var tracerHooks = []hookDecl{
	{kind: kindNeighbour, feature: FeatureStates, progs: []string{"tr_update_done", "tr_update_done_raw"}, role: roleMirror,
		needs: "tp_btf (5.5+, with BTF), else raw_tp", lost: "state changes the kernel makes on netlink updates and ARP/NDP answers"},
	{kind: kindNeighbour, feature: FeatureStates, progs: []string{"tr_event_send_done", "tr_event_send_done_raw"},
		needs: "tp_btf (5.5+, with BTF), else raw_tp", lost: "the kernel's transitions on sending (STALE to DELAY)"},
	{kind: kindNeighbour, feature: FeatureStates, progs: []string{"tr_timer_handler", "tr_timer_handler_raw"},
		needs: "tp_btf (5.5+, with BTF), else raw_tp", lost: "the kernel's timer transitions (REACHABLE to STALE, DELAY to PROBE)"},
	{kind: kindNeighbour, feature: FeatureStates, progs: []string{"tr_cleanup", "tr_cleanup_raw"},
		needs: "tp_btf (5.5+, with BTF), else raw_tp", lost: "entries the kernel's garbage collector removes"},
	{kind: kindNeighbour, feature: FeatureCreated, progs: []string{"tr_create", "tr_create_raw"},
		needs: "tp_btf (5.5+, with BTF; the verifier takes neigh_create from 6.18), else raw_tp"},
	{kind: kindXmit, feature: FeatureBypass, progs: []string{"tr_xmit"},
		needs: "tp_btf (5.5+, with BTF)"},
	{kind: kindSource, feature: FeatureSourceMAC, progs: []string{"tr_source"},
		needs: "a tc program: tcx (6.6+), else clsact"},
	{kind: kindSeed, feature: FeatureSeed, progs: []string{"tr_seed"}, role: roleSeedMirror, needs: "syscall programs the tracer's way (6.0+; else entry by entry)"},
	{kind: kindSeed, feature: FeatureSeed, progs: []string{"tr_candidates"}, role: roleSeedCandidates, needs: "syscall programs the tracer's way (6.0+; else entry by entry)"},
	{kind: kindFentryTC, feature: FeatureBypass, progs: []string{"fe_skb_fib"}, needs: "fentry/fexit (refused under lockdown)"},
	{kind: kindFentryTC, feature: FeatureBypass, progs: []string{"fe_redirect"}, needs: "fentry/fexit (refused under lockdown)"},
	{kind: kindFentryTCMore, feature: FeatureBypass, progs: []string{"fe_redirect_neigh"}, needs: "fentry/fexit"},
	{kind: kindFentryTCMore, feature: FeatureBypass, progs: []string{"fe_redirect_peer"}, needs: "fentry/fexit"},
	{kind: kindFentryXDP, feature: FeatureXDPBypass, progs: []string{"fe_xdp_fib"}, needs: "fentry/fexit"},
	{kind: kindFentryXDP, feature: FeatureXDPBypass, progs: []string{"fe_xdp_redirect"}, needs: "fentry/fexit"},
	{kind: kindFentryDevmap, feature: FeatureXDPBypass, progs: []string{"fe_dev_map_redirect"}, needs: "the devmap operations (5.13+)"},
	{kind: kindFentryDevmap, feature: FeatureXDPBypass, progs: []string{"fe_dev_hash_map_redirect"}, needs: "the devmap operations (5.13+)"},
	{kind: kindFentryDevmapOld, feature: FeatureXDPBypass, progs: []string{"fe_xdp_redirect_map"}, needs: "fentry/fexit (the helper, where the devmap operations are missing)"},
}

// hooksOf returns the hooks of a kind, in their order above.
func hooksOf(k hookKind) []hookDecl {
	var out []hookDecl
	for _, h := range tracerHooks {
		if h.kind == k {
			out = append(out, h)
		}
	}
	return out
}
