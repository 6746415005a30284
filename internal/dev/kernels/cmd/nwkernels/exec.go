//go:build linux

package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/neighwatch/neighwatch/internal/dev/kernels"
)

// execIn boots one kernel, runs a shell command in it and prints what it
// printed: for looking at a kernel by hand (nwkernels exec 6.1 -- CMD).
func execIn(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("nwkernels exec", flag.ContinueOnError)
	dir := fs.String("dir", ".kernels", "where run left the kernels")
	timeout := fs.Duration("timeout", 10*time.Minute, "limit for the boot and the command")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() < 2 || (fs.NArg() == 2 && fs.Arg(1) == "--") {
		return errors.New("usage: nwkernels exec [--dir D] SERIES CMD [ARG]")
	}
	k, ok := kernels.Lookup(fs.Arg(0))
	if !ok {
		return fmt.Errorf("unknown kernel series %q", fs.Arg(0))
	}
	abs, err := filepath.Abs(*dir)
	if err != nil {
		return err
	}
	archive, err := machineArchive()
	if err != nil {
		return err
	}
	f := &kernels.Fetcher{Dir: filepath.Join(abs, "cache"), Archive: archive, Log: os.Stderr}
	imgs, err := f.Fetch(ctx, []kernels.Kernel{k})
	if err != nil {
		return err
	}
	wd, _ := os.Getwd()
	results := filepath.Join(abs, "results", "exec-"+k.Name)
	_ = os.RemoveAll(results)
	cmd := fs.Args()[1:]
	if cmd[0] == "--" {
		cmd = cmd[1:]
	}
	// bash by name: the guest's own (an arm64 guest's root is not the host's).
	st := kernels.Step{Name: "exec", Dir: wd, Argv: []string{"bash", "-c", strings.Join(cmd, " ")}}
	runErr := kernels.Boot{Image: imgs[0], Results: results, Steps: []kernels.Step{st}, Timeout: *timeout,
		Shares: []kernels.Share{{Tag: "src", Host: wd}}}.Run(ctx)
	out, _ := os.ReadFile(filepath.Join(results, "exec.out"))
	rc, _ := os.ReadFile(filepath.Join(results, "exec.rc"))
	fmt.Print(string(out))
	fmt.Fprintf(os.Stderr, "exit status %s", rc)
	return runErr
}
