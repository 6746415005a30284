// Command neighwatch is the neighwatch node agent and its client.
//
//	neighwatch agent [flags]          run the agent
//	neighwatch check-config [flags]   check the agent's configuration
//	neighwatch status [--json]        show the agent's neighbour table
//	neighwatch events [--json]        follow the agent's event stream
//	neighwatch version
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/neighwatch/neighwatch/internal/options"
	"github.com/neighwatch/neighwatch/metrics"
)

const usage = `usage: neighwatch <command> [flags]

commands:
  agent     run the agent (needs root, or CAP_NET_ADMIN and CAP_NET_RAW)
  check-config  check the agent's flags and --config.file as the agent reads them, without running it
  status    print the running agent's neighbour table
  events    follow the running agent's events
  datapath  show or swap the eBPF datapath mode of an interface
  tracer    show the tracer: each program, whether the kernel took it, where detection is blind
  remediation off|dry-run|on|status   switch or show auto-remediation at runtime
  version   print the version

Run 'neighwatch <command> --help' for a command's flags.
`

// errUsage marks errors the user fixes by changing the command line.
type errUsage = options.Usage

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0) // --help: usage printed
		}
		fmt.Fprintf(os.Stderr, "neighwatch: %v\n", err)
		var u errUsage
		if errors.As(err, &u) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return errUsage{Err: errors.New("no command given")}
	}
	switch args[0] {
	case "agent":
		return runAgent(ctx, args[1:], stderr)
	case "check-config":
		return runCheckConfig(args[1:], stdout)
	case "status":
		return runStatus(ctx, args[1:], stdout, stderr)
	case "events":
		return runEvents(ctx, args[1:], stdout, stderr)
	case "remediation":
		return runRemediation(ctx, args[1:], stdout)
	case "datapath":
		return runDatapath(ctx, args[1:], stdout)
	case "tracer":
		return runTracer(ctx, args[1:], stdout)
	case "version", "--version":
		fmt.Fprintln(stdout, metrics.VersionString())
		return nil
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	}
	return errUsage{Err: fmt.Errorf("unknown command %q (want agent, check-config, status, events, datapath, tracer, remediation or version)", args[0])}
}

// parse parses a subcommand that takes flags only.
func parse(fs *flag.FlagSet, args []string) error { return options.ParseFlags(fs, args) }

// parseArgs parses flags anywhere among the arguments and returns
// between min and max positional ones (options.Parse).
func parseArgs(fs *flag.FlagSet, args []string, takes string, min, max int) ([]string, error) {
	return options.Parse(fs, args, takes, min, max)
}
