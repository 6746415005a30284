// Package kernels runs neighwatch's kernel-contract tests on the kernels
// operators run: Debian's 5.10, 6.1 and 6.12, fetched from the machine's
// own Debian archive, booted under qemu (TCG) with the host's root shared
// read-only over virtfs, plus the machine's own kernel. cmd/nwkernels is
// the driver behind `make test-kernels`.
package kernels
