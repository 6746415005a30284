//go:build !linux

// Command nwkernels boots Linux kernels under qemu and runs tests in
// them; it runs on Linux only.
package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Fprintln(os.Stderr, "nwkernels: runs on Linux only")
	os.Exit(1)
}
