package options

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
)

// Usage marks an error the user fixes by changing the command line: the
// command exits 2 on it.
type Usage struct{ Err error }

func (u Usage) Error() string { return u.Err.Error() }

func (u Usage) Unwrap() error { return u.Err }

// ParseFlags parses a subcommand that takes flags only.
func ParseFlags(fs *flag.FlagSet, args []string) error {
	_, err := Parse(fs, args, "", 0, 0)
	return err
}

// Parse parses flags anywhere among the arguments, as peers' CLIs do
// ("--" ends the flags), and returns the positional arguments, between
// min and max of them. --help prints the usage line (the subcommand and
// what it takes) and the flags to standard output and returns
// flag.ErrHelp, on which the command exits 0. Flag errors become one-line
// usage errors.
func Parse(fs *flag.FlagSet, args []string, takes string, min, max int) ([]string, error) {
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
			return nil, Usage{Err: fmt.Errorf("%s: %v (see 'neighwatch %s --help')", fs.Name(), err, fs.Name())}
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
		return nil, Usage{Err: fmt.Errorf("%s: unexpected argument %q (see 'neighwatch %s --help')", fs.Name(), pos[0], fs.Name())}
	case len(pos) < min || len(pos) > max:
		return nil, Usage{Err: fmt.Errorf("%s: want %s (see 'neighwatch %s --help')", fs.Name(), takes, fs.Name())}
	}
	return pos, nil
}
