package bpf

import (
	"testing"

	"github.com/cilium/ebpf"
)

// TestEveryProgramHasOneHook: every program of the tracer's two objects
// is declared in tracerHooks, once, and every declared program is in an
// object: a hook added to the C without its line (or the reverse) fails
// here, not on a kernel that loads it.
func TestEveryProgramHasOneHook(t *testing.T) {
	inObject := map[string]bool{}
	for name, load := range map[string]func() (*ebpf.CollectionSpec, error){"tracer": loadTracer, "fentry": loadFentry} {
		spec, err := load()
		if err != nil {
			t.Fatalf("%s object: %v", name, err)
		}
		for p := range spec.Programs {
			inObject[p] = true
		}
	}
	if len(inObject) < 10 {
		t.Fatalf("%d programs in the objects: not the tracer's", len(inObject))
	}
	declared := map[string]int{}
	for _, h := range tracerHooks {
		if len(h.progs) == 0 || h.needs == "" {
			t.Errorf("hook %v: no programs, or no kernel need", h.progs)
		}
		if h.feature == FeatureStates && h.lost == "" {
			t.Errorf("hook %v: a states hook that does not say what is lost without it", h.progs)
		}
		for _, p := range h.progs {
			declared[p]++
		}
	}
	for p := range inObject {
		if declared[p] != 1 {
			t.Errorf("program %s is declared in %d hooks, want 1", p, declared[p])
		}
	}
	for p := range declared {
		if !inObject[p] {
			t.Errorf("hook program %s is in neither object", p)
		}
	}
	roles := map[hookRole]int{}
	for _, h := range tracerHooks {
		roles[h.role]++
	}
	for _, r := range []hookRole{roleMirror, roleSeedMirror, roleSeedCandidates} {
		if roles[r] != 1 {
			t.Errorf("role %d has %d hooks, want 1", r, roles[r])
		}
	}
	for _, k := range []hookKind{kindXmit, kindSource} {
		if n := len(hooksOf(k)); n != 1 {
			t.Errorf("kind %d has %d hooks, want 1 (the loader takes the first)", k, n)
		}
	}
}
