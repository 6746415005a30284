//go:build !linux

package main

import (
	"context"
	"errors"
	"io"
)

// runAgent: the agent follows the kernel's neighbour tables over netlink,
// which only Linux has. The client subcommands work anywhere.
func runAgent(context.Context, []string, io.Writer) error {
	return errors.New("the agent runs only on Linux (it follows the kernel's neighbour tables over netlink)")
}

// runCheckConfig: the agent's configuration names Linux's interfaces and
// kernel features; it is checked where the agent runs.
func runCheckConfig([]string, io.Writer) error {
	return errors.New("check-config runs only on Linux, where the agent does")
}
