// Package bpf holds neighwatch's eBPF programs and their loaders: the TC
// forwarding datapath (bpf_redirect and bpf_redirect_neigh variants) and
// the tracer that counts packets sent to STALE neighbours without the
// neighbour subsystem. The objects are generated with bpf2go and committed;
// `make generate` rebuilds them with clang.
//
// Every hook of the tracer is declared once, in hooklist_linux.go: its
// programs, its feature, its kind (which the loader goes by), the kernel
// it needs and what is not seen without it. Adding a hook of a kind the
// loader knows is its C and its line there.
package bpf

//go:generate go tool bpf2go -cc clang -strip llvm-strip -cflags "-O2 -g -Wall -Werror -I./include" -target bpfel -go-package bpf -type dp_decision datapath datapath.c
//go:generate go tool bpf2go -cc clang -strip llvm-strip -cflags "-O2 -g -Wall -Werror -I./include" -target bpfel -go-package bpf -type tp_event -type tp_source -type tr_stat -type cand -type scand -type seed_result -type cand_result -type via_state tracer tracer.c
//go:generate go tool bpf2go -cc clang -strip llvm-strip -cflags "-O2 -g -Wall -Werror -I./include" -target bpfel -go-package bpf -type fe_helper -type fe_nexthop fentry fentry.c
