package bpf

import (
	"strings"
	"testing"
)

// TestFentryRefusalWhy: the fallback to transmit names the program, how
// the kernel refused it and its words; on arm64, a kernel that does not
// support the attach is named as one before 6.4, and only there and
// then.
func TestFentryRefusalWhy(t *testing.T) {
	unsupported := ProgramStatus{Hook: "fexit/bpf_skb_fib_lookup", Refusal: RefusedUnsupported, Error: "create raw tracepoint: not supported"}
	denied := ProgramStatus{Hook: "fexit/bpf_skb_fib_lookup", Refusal: RefusedPermission, Error: "operation not permitted"}
	const trampoline = "arm64 kernels attach fentry to kernel functions from 6.4"
	for _, tc := range []struct {
		name  string
		s     ProgramStatus
		arch  string
		names bool
	}{
		{"arm64 unsupported", unsupported, "arm64", true},
		{"amd64 unsupported", unsupported, "amd64", false},
		{"arm64 denied", denied, "arm64", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			why := fentryRefusal(tc.s, tc.arch)
			for _, w := range []string{tc.s.Hook, string(tc.s.Refusal), tc.s.Error} {
				if !strings.Contains(why, w) {
					t.Errorf("%q does not name %q", why, w)
				}
			}
			if strings.Contains(why, trampoline) != tc.names {
				t.Errorf("%q: names arm64's 6.4 %v, want %v", why, !tc.names, tc.names)
			}
		})
	}
}
