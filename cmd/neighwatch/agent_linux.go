package main

import (
	"context"
	"fmt"
	"io"

	"github.com/neighwatch/neighwatch/internal/agent"
)

// runAgent runs the agent: internal/agent reads its options, reloads
// them and wires its parts.
func runAgent(ctx context.Context, args []string, stderr io.Writer) error {
	return agent.Main(ctx, args, stderr)
}

// runCheckConfig checks the agent's configuration (flags and the file
// --config.file names) as the agent would read it, without running it.
func runCheckConfig(args []string, stdout io.Writer) error {
	if err := agent.CheckConfig(args); err != nil {
		return err
	}
	fmt.Fprintln(stdout, "the configuration is valid")
	return nil
}
