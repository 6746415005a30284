package main

import (
	"context"
	"io"

	"github.com/neighwatch/neighwatch/internal/agent"
)

// runAgent runs the agent: internal/agent reads its options, reloads
// them and wires its parts.
func runAgent(ctx context.Context, args []string, stderr io.Writer) error {
	return agent.Main(ctx, args, stderr)
}
