// Package fwd holds minimal eBPF forwarders for lab tests, TC and XDP ones,
// that forward with bpf_fib_lookup() and bpf_redirect() (or
// bpf_redirect_map() to a devmap) as datapaths did before
// bpf_redirect_neigh(), and one that enters a namespace with
// bpf_redirect_peer(): independent of neighwatch's own datapath, so tests
// do not check the project only against itself.
package fwd

//go:generate go tool bpf2go -cc clang -strip llvm-strip -cflags "-O2 -g -Wall -Werror -I../../../../bpf/include" -target bpfel -go-package fwd fwd fwd.c
