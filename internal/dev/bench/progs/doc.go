// Package progs holds the eBPF programs the forwarding benchmark uses to
// inject and drop frames.
package progs

//go:generate go tool bpf2go -cc clang -strip llvm-strip -cflags "-O2 -g -Wall -Werror -I../../../../bpf/include" -target bpfel -go-package progs bench progs.c

// Objects are the loaded benchmark programs.
type Objects = benchObjects

// Load loads them.
func Load() (*Objects, error) {
	var o benchObjects
	if err := loadBenchObjects(&o, nil); err != nil {
		return nil, err
	}
	return &o, nil
}
