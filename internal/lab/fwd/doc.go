// Package fwd holds minimal eBPF forwarders for lab tests, a TC one and an
// XDP one, that forward with bpf_fib_lookup() and bpf_redirect() as
// datapaths did before bpf_redirect_neigh(): independent of neighwatch's
// own datapath, so tests do not check the project only against itself.
package fwd

//go:generate go tool bpf2go -cc clang -strip llvm-strip -cflags "-O2 -g -Wall -Werror -I../../../bpf/include" -target bpfel -go-package fwd fwd fwd.c
