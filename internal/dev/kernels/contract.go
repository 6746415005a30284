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
	Run     string // go test -run: the tests every kernel runs
	// Newest are more tests (alternatives of a -run pattern) that only
	// the newest kernel of the matrix runs (and the host's, where the
	// whole package runs): what the agent decides on its own once the
	// kernel's parts are proven, which every row proves. Run on every
	// row, they took 6 of the 13 minutes of the oldest guest beside a
	// busy loop, and the matrix past CI's time.
	Newest  string
	Timeout time.Duration
	// Parallel is how many of its tests run at once (go test -parallel;
	// 0: 2, a guest's CPUs). The e2e tests mostly wait on the kernel's
	// timers and the agent's, so more of them share the guest's CPUs.
	Parallel int
}

// RunFor is the -run pattern of the suite on one kernel of the matrix.
func (s Suite) RunFor(kernel string) string {
	if s.Newest == "" || (kernel != Newest && kernel != "host") {
		return s.Run
	}
	return strings.TrimSuffix(s.Run, ")$") + "|" + s.Newest + ")$"
}

// Tests is how many of the suite's tests run at once.
func (s Suite) Tests() int { return max(s.Parallel, 2) }

// Name names the suite's results.
func (s Suite) Name() string {
	return strings.ReplaceAll(strings.TrimPrefix(s.Package, "./"), "/", "_")
}

// Contract lists the suites: the tracer loads and degrades program by
// program, counts each redirect helper exactly, follows large ifindexes
// and a full map, and seeds its maps in the kernel where the kernel takes
// the batch programs, to the same end as from user space; the table
// follows the kernel's entry field by field whichever way it changes
// (netlink, a resync, the tracepoints: STALE -> DELAY, entries the
// kernel creates silently) and a re-validating datapath is never counted; the loop with
// forwarders that are not the project's (TC and XDP, IPv4 and IPv6
// together); the precision scenarios (a moved host stuck, and a host
// bonded by the kernel's driver, which only the guests' kernels have,
// never stuck, on every kernel; the hosts with two MACs that the agent
// tells apart from its evidence alone, on the newest);
// the project's datapath swapped atomically under traffic
// and gone with a killed agent (tcx or clsact); managed neighbours named
// as the kernel has them. The rest of the suite runs on the host kernel
// only. The e2e tests run the agent as the DaemonSet does.
var Contract = []Suite{
	{Package: "./bpf", Run: "^(TestTracerLoadsOnThisKernel|TestTracerDegradesProgramByProgram|TestTracerCountsEachHelper|TestTracerPastCapacity|TestTracerWatchesLargeIfindex|TestTracerIgnoresOtherNamespaces|TestSeedInKernelAsEntryByEntry|TestCandidatesInKernelAsOneByOne)$", Timeout: 15 * time.Minute},
	{Package: "./monitor/mirror", Run: "^(TestNetlinkChangesMatchTheKernel|TestResyncRecordsWhatItFinds)$", Timeout: 5 * time.Minute},
	{Package: "./monitor/feed", Run: "^(TestTracepointChangesMatchTheKernel|TestTracerNoFalsePositives)$", Timeout: 5 * time.Minute},
	{Package: "./e2e", Run: "^(TestBypassedHostFoundAndRepaired|TestDatapathSwapUnderTraffic|TestManagedCapabilityNamed|TestKilledAgentLeavesNoDatapath|TestPrecisionMoved|TestPrecisionBond)$",
		Newest: "TestPrecisionSecondMAC|TestPrecisionARPFlux|TestPrecisionRouter|TestPrecisionBlueGreen|TestPrecisionVRRP", Timeout: 20 * time.Minute, Parallel: 4},
}
