package bpf

// Refusal is why the kernel did not take a program, in few words: metric
// labels and the capability table use it.
type Refusal string

// Refusals.
const (
	RefusedVerifier    Refusal = "verifier"    // the verifier rejected it
	RefusedPermission  Refusal = "permission"  // EPERM: lockdown, an LSM, missing capabilities
	RefusedNoTarget    Refusal = "no-target"   // the function or tracepoint it hooks does not exist
	RefusedUnsupported Refusal = "unsupported" // the program or attach type is unknown to the kernel
	RefusedAttach      Refusal = "attach"      // loaded, but attaching failed
	RefusedDisabled    Refusal = "disabled"    // not loaded on purpose (TracerOptions.Refuse)
	RefusedOther       Refusal = "error"
)

// ProgramStatus is one eBPF program the tracer tried: where it hooks,
// the feature it serves and whether the kernel took it.
type ProgramStatus struct {
	Program string  `json:"program"`
	Hook    string  `json:"hook"`
	Feature Feature `json:"feature"`
	Loaded  bool    `json:"loaded"`
	Refusal Refusal `json:"refusal,omitempty"`
	Error   string  `json:"error,omitempty"`
	// Needs is the kernel the hook needs (hooklist_linux.go).
	Needs string `json:"needs,omitempty"`
}

// Feature is what a group of the tracer's programs gives detection.
type Feature string

// Features. Bypass counting needs the state mirror.
const (
	// FeatureStates: the in-kernel mirror of neighbour states, kept by the
	// neighbour tracepoints, and the silent transitions netlink never
	// reports.
	FeatureStates Feature = "states"
	// FeatureCreated: entries the kernel creates without a netlink
	// message (neigh_create), looked up at once.
	FeatureCreated Feature = "created-entries"
	// FeatureBypass: packets sent to a STALE entry's MAC past the
	// neighbour subsystem, counted per entry (xmit or fentry).
	FeatureBypass Feature = "bypass"
	// FeatureXDPBypass: the same for XDP redirects (fentry only).
	FeatureXDPBypass Feature = "xdp-bypass"
	// FeatureSourceMAC: a STALE entry's host seen sending from another
	// MAC (tc ingress).
	FeatureSourceMAC Feature = "source-mac"
	// FeatureSeed is no part of detection, so Features leaves it out: the
	// program that seeds the mirror at start a batch per syscall
	// (tr_seed). Without it the mirror is seeded entry by entry, to the
	// same end, in seconds more at a million entries.
	FeatureSeed Feature = "seed"
)

// Features lists every feature, in the order tables show them.
func Features() []Feature {
	return []Feature{FeatureStates, FeatureCreated, FeatureBypass, FeatureXDPBypass, FeatureSourceMAC}
}

// FeatureStatus says whether a feature works and how.
type FeatureStatus struct {
	Feature Feature `json:"feature"`
	Working bool    `json:"working"`
	// Via is how it works: tp_btf, raw_tp, xmit, fentry, tcx, clsact.
	Via string `json:"via,omitempty"`
	// Why it does not, when it does not.
	Why string `json:"why,omitempty"`
}
