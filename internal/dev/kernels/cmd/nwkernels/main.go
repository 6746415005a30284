//go:build linux

// Command nwkernels runs neighwatch's kernel-contract tests on Debian's
// kernels under qemu and on the machine's own kernel, and prints what each
// kernel can do (make test-kernels).
//
//	nwkernels run [--kernels 5.10,6.1,6.12] [--host=true] [--dir .kernels]
//	nwkernels fetch [--kernels 5.10,6.1] [--dir .kernels]   (only fetch: make test's lane fetches ahead)
//	nwkernels probe   (inside a kernel: its capabilities as JSON)
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: nwkernels run|fetch|readme|probe [flags]")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "run":
		err = run(ctx, os.Args[2:])
	case "fetch":
		err = fetchOnly(ctx, os.Args[2:])
	case "exec":
		err = execIn(ctx, os.Args[2:])
	case "readme":
		err = writeReadme(os.Args[2:])
	case "probe":
		err = probe(os.Args[2:])
	case "-h", "--help", "help":
		fmt.Println("usage: nwkernels run|fetch|readme|probe [flags]")
		return
	default:
		err = fmt.Errorf("unknown command %q: want run, fetch, readme or probe", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "nwkernels:", err)
		os.Exit(1)
	}
}
