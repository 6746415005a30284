//go:build linux

// Command nwcluster builds the single-node cluster's tools (build) or
// brings a node up for trying the chart by hand (up): it prints the
// kubeconfig's path and the registry's address, and tears everything
// down on Ctrl-C or SIGTERM, checking the host is as it found it.
package main

import (
	"context"
	"flag"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/neighwatch/neighwatch/internal/dev/cluster"
	"github.com/neighwatch/neighwatch/internal/dev/lab"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "nwcluster:", err)
		os.Exit(1)
	}
}

func run() error {
	fs := flag.NewFlagSet("nwcluster", flag.ContinueOnError)
	cache := fs.String("cache", ".cluster", "where the built tools are kept")
	if len(os.Args) < 2 || (os.Args[1] != "build" && os.Args[1] != "up") {
		return fmt.Errorf("usage: nwcluster build|up [--cache DIR]")
	}
	if err := fs.Parse(os.Args[2:]); err != nil {
		return err
	}
	src, err := os.Getwd()
	if err != nil {
		return err
	}
	abs, err := filepath.Abs(*cache)
	if err != nil {
		return err
	}
	tools, err := cluster.Build(src, abs, os.Stderr)
	if err != nil || os.Args[1] == "build" {
		return err
	}
	reg, err := exec.LookPath("docker-registry")
	if err != nil {
		return fmt.Errorf("docker-registry: %w (Debian package docker-registry)", err)
	}
	l, err := lab.Build("k8s")
	if err != nil {
		return err
	}
	defer l.Close()
	dir, err := os.MkdirTemp("", "nwk8s-")
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	n, err := cluster.Start(ctx, cluster.Options{Tools: tools, Registry: reg, NetNS: l.Node.Name, Dir: dir,
		Subnet: netip.MustParsePrefix("10.254.0.0/30"), Log: os.Stderr})
	if err != nil {
		return err
	}
	fmt.Printf("export KUBECONFIG=%s\n# kubectl: %s kubectl\n# registry: %s\n# node netns: %s (client %s, backend %s)\n",
		n.Kubeconfig(), tools.Nwk8s, n.Registry(), l.Node.Name, l.Client.Name, l.Backend.Name)
	<-ctx.Done()
	return n.Close()
}
