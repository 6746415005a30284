package kernels

import (
	"strings"
	"time"
)

// Suite is one package's kernel-contract tests: the tests whose result
// depends on what the kernel's eBPF, netlink and neighbour code do. The
// matrix runs them on every kernel.
type Suite struct {
	Package string // relative to the repository's root
	Run     string // go test -run
	Timeout time.Duration
}

// Name names the suite's results.
func (s Suite) Name() string {
	return strings.ReplaceAll(strings.TrimPrefix(s.Package, "./"), "/", "_")
}

// Contract lists the suites. In cmd/neighwatch: the loop with
// forwarders that are not the project's (TC and XDP, IPv4 and IPv6), the
// project's datapath (at-risk, then stuck; the atomic swap, tcx or
// clsact), and managed neighbours named as the kernel has them.
var Contract = []Suite{
	{Package: "./bpf", Run: "^(TestTracerLoadsOnThisKernel|TestTracerDegradesProgramByProgram|TestTracerCountsEachHelper|TestTracerPastCapacity|TestTracerWatchesLargeIfindex)$", Timeout: 8 * time.Minute},
	{Package: "./internal/feed", Run: "^Test", Timeout: 5 * time.Minute},
	{Package: "./cmd/neighwatch", Run: "^(TestBypassedHostFoundAndRepaired|TestDatapathSwapUnderTraffic|TestManagedCapabilityNamed|TestKilledAgentLeavesNoDatapath|TestAtRiskThenStuck)$/^(tc|xdp|project)$", Timeout: 10 * time.Minute},
}
