// Package remediate decides which stuck neighbour entries to repair and
// repairs them: ARP/NDP probes, a kernel kick (NTF_USE), a datapath swap to
// bpf_redirect_neigh, or a flush, each rate-limited and verified against
// the table.
//
// The Engine (engine.go) sweeps the table for candidates, queues them,
// paces them (limits.go), backs off what did not mend and records every
// action. Each strategy is one file, strategy_<name>.go, listed once in
// registry (strategy.go): it declares its place in the default order,
// whether it prevents or repairs, the kernel feature it needs and why it
// may never act, and it acts with a kit (kit.go): the actor, the table,
// the managed entries, the configuration in force, and the helpers that
// verify an action. A strategy never sees the Engine. Adding one is its
// file and its line in registry; the flag's help, the defaults, the
// metrics' labels and the detection follow from them.
package remediate
