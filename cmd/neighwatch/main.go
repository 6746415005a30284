// Command neighwatch is the neighwatch node agent and its client.
//
//	neighwatch agent [flags]          run the agent
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
)

const usage = `usage: neighwatch <command> [flags]

commands:
  agent     run the agent (needs root, or CAP_NET_ADMIN and CAP_NET_RAW)
  status    print the running agent's neighbour table
  events    follow the running agent's events
  datapath  show or swap the eBPF datapath mode of an interface
  tracer    show the tracer: each program, whether the kernel took it, where detection is blind
  remediation off|dry-run|on|status   switch or show auto-remediation at runtime
  version   print the version

Run 'neighwatch <command> --help' for a command's flags.
`

// errUsage marks errors the user fixes by changing the command line.
type errUsage struct{ error }

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
		return errUsage{errors.New("no command given")}
	}
	switch args[0] {
	case "agent":
		return runAgent(ctx, args[1:], stderr)
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
		fmt.Fprintln(stdout, versionString())
		return nil
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	}
	return errUsage{fmt.Errorf("unknown command %q (want agent, status, events, datapath, tracer, remediation or version)", args[0])}
}

// parse parses a subcommand that takes flags only.
func parse(fs *flag.FlagSet, args []string) error {
	_, err := parseArgs(fs, args, "", 0, 0)
	return err
}

// parseArgs parses flags anywhere among the arguments, as peers' CLIs do
// ("--" ends the flags), and returns the positional arguments, between
// min and max of them. --help prints the usage line (the subcommand and
// what it takes) and the flags to standard output and returns
// flag.ErrHelp, on which the command exits 0. Flag errors become one-line
// usage errors.
func parseArgs(fs *flag.FlagSet, args []string, takes string, min, max int) ([]string, error) {
	fs.SetOutput(io.Discard)
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				fmt.Fprintf(os.Stdout, "usage: neighwatch %s [flags] %s\n\nflags:\n", fs.Name(), takes)
				fs.SetOutput(os.Stdout)
				fs.PrintDefaults()
				return nil, err
			}
			return nil, errUsage{fmt.Errorf("%s: %v (see 'neighwatch %s --help')", fs.Name(), err, fs.Name())}
		}
		args = fs.Args()
		if len(args) == 0 {
			break
		}
		if args[0] == "--" {
			pos = append(pos, args[1:]...)
			break
		}
		pos, args = append(pos, args[0]), args[1:]
	}
	switch {
	case len(pos) > max && max == 0:
		return nil, errUsage{fmt.Errorf("%s: unexpected argument %q (see 'neighwatch %s --help')", fs.Name(), pos[0], fs.Name())}
	case len(pos) < min || len(pos) > max:
		return nil, errUsage{fmt.Errorf("%s: want %s (see 'neighwatch %s --help')", fs.Name(), takes, fs.Name())}
	}
	return pos, nil
}
