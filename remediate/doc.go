// Package remediate decides which stuck neighbour entries to repair and
// repairs them: ARP/NDP probes, a kernel kick (NTF_USE), a datapath swap to
// bpf_redirect_neigh, or a flush, each rate-limited and verified against
// the table.
package remediate
