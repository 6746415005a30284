// Command nwmutants runs mutation testing over neighwatch's decision code
// with gremlins, and judges it against docs/mutants.md (make mutation).
//
//	nwmutants run [--targets table,remediate] [--workers 2] [--dir .mutation]
//	nwmutants uncovered [--targets ...] [--root DIR]
//	nwmutants recheck [--targets ...]   (the survivors again, after tests were added)
//	nwmutants report [--dir .mutation]
//	nwmutants rules [--ledger docs/rules.md] [--only ID,...] [--jobs 2] [--whole] [--root DIR]
//
// run runs gremlins on each target, then runs itself the mutants gremlins
// saw no coverage for (those in switch cases) and those it timed out
// (uncovered), then reports.
// rules applies each break of the rule ledger alone, runs the rule's
// tests against it and exits 1 when one passes (the rule is not guarded),
// a break does not apply or build, or a named test does not run (make
// rules; make test runs it). --whole runs every test of the rule's
// packages instead of the named ones, and --root another checkout: how
// well an older tree's tests guarded the same rules.
// report prints each target's score and every survivor that no test kills
// and docs/mutants.md does not explain; it exits 1 when there is one.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/neighwatch/neighwatch/internal/dev/mutation"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: nwmutants run|uncovered|recheck|report|rules [flags]")
		os.Exit(2)
	}
	fs := flag.NewFlagSet("nwmutants "+os.Args[1], flag.ExitOnError)
	var (
		dir     = fs.String("dir", ".mutation", "where gremlins' reports go")
		names   = fs.String("targets", "", "targets to run, comma-separated (default all: "+strings.Join(targetNames(), ", ")+")")
		workers = fs.Int("workers", 2, "mutants tested at once (the tests mostly wait on timers)")
		eqFile  = fs.String("equivalent", "docs/mutants.md", "the survivors that change nothing, with why")
		root    = fs.String("root", ".", "the module whose code is mutated")
		ledger  = fs.String("ledger", "docs/rules.md", "rules: the rule ledger")
		only    = fs.String("only", "", "rules: the rules to check, comma-separated IDs (default all)")
		whole   = fs.Bool("whole", false, "rules: run every test of each rule's packages, not the named ones")
		jobs    = fs.Int("jobs", 2, "rules: breaks checked at once")
		timeout = fs.Duration("timeout", 3*time.Minute, "rules: go test -timeout of one package's tests on a break")
		summary = fs.Bool("write-summary", false, "rules: rewrite the ledger's summary table and check nothing")
	)
	_ = fs.Parse(os.Args[2:])
	if os.Args[1] == "rules" {
		var err error
		if *summary {
			err = writeSummary(*ledger)
		} else {
			err = rules(ctx, *ledger, *only, mutation.CheckOptions{Root: *root, Whole: *whole, Timeout: *timeout}, *jobs)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "nwmutants:", err)
			os.Exit(1)
		}
		return
	}
	targets, err := pick(*names)
	if err == nil {
		switch os.Args[1] {
		case "run":
			err = run(ctx, targets, *dir, *workers)
			if err == nil {
				err = uncovered(ctx, targets, *root, *dir)
			}
			if err == nil {
				err = report(targets, *dir, *eqFile)
			}
		case "uncovered":
			err = uncovered(ctx, targets, *root, *dir)
		case "recheck":
			err = recheck(ctx, targets, *root, *dir)
			if err == nil {
				err = report(targets, *dir, *eqFile)
			}
		case "report":
			err = report(targets, *dir, *eqFile)
		default:
			err = fmt.Errorf("unknown command %q: want run, uncovered, recheck, report or rules", os.Args[1])
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "nwmutants:", err)
		os.Exit(1)
	}
}

func targetNames() []string {
	var out []string
	for _, t := range mutation.Targets {
		out = append(out, t.Name)
	}
	return out
}

func pick(names string) ([]mutation.Target, error) {
	if names == "" {
		return mutation.Targets, nil
	}
	var out []mutation.Target
	for _, n := range strings.Split(names, ",") {
		found := false
		for _, t := range mutation.Targets {
			if t.Name == n {
				out, found = append(out, t), true
			}
		}
		if !found {
			return nil, fmt.Errorf("--targets: unknown target %q (known: %s)", n, strings.Join(targetNames(), ", "))
		}
	}
	return out, nil
}

func run(ctx context.Context, targets []mutation.Target, dir string, workers int) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, t := range targets {
		start := time.Now()
		args := []string{"run", mutation.Gremlins, "unleash", "--workers", strconv.Itoa(workers),
			// The timeout is the tests' time under coverage times this;
			// a mutant that exceeds it is run again alone (uncovered),
			// so a loaded machine cannot turn a lived one into a kill.
			"--timeout-coefficient", "5", "-o", filepath.Join(dir, t.Name+".gremlins.json")}
		for _, e := range t.Exclude {
			args = append(args, "-E", e)
		}
		cmd := exec.CommandContext(ctx, "go", append(args, t.Pkg)...)
		// Uncached: gremlins times mutants against its coverage run, which
		// a cached result would make a second long.
		cmd.Env = append(os.Environ(), "GOFLAGS=-count=1")
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		fmt.Fprintf(os.Stderr, "nwmutants: %s (%s), left out: %s\n", t.Name, t.Pkg, t.Why)
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("gremlins on %s: %w", t.Pkg, err)
		}
		fmt.Fprintf(os.Stderr, "nwmutants: %s took %v\n", t.Name, time.Since(start).Round(time.Second))
	}
	return nil
}

// uncovered runs the mutants gremlins saw no coverage for, and again
// those it timed out, and writes every target's mutants, judged, to
// DIR/TARGET.json.
func uncovered(ctx context.Context, targets []mutation.Target, root, dir string) error {
	root, err := filepath.Abs(root)
	if err != nil {
		return err
	}
	dir, err = filepath.Abs(dir)
	if err != nil {
		return err
	}
	for _, t := range targets {
		ms, err := mutation.ReadFile(t, filepath.Join(dir, t.Name+".gremlins.json"))
		if err != nil {
			return fmt.Errorf("%w (run nwmutants run --targets %s first)", err, t.Name)
		}
		if err := mutation.Rerun(ctx, root, ms, t.Rerun); err != nil {
			return err
		}
		b, err := json.MarshalIndent(ms, "", " ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, t.Name+".json"), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// recheck runs the survivors of DIR/TARGET.json again against the tests
// as they are now, and writes them back.
func recheck(ctx context.Context, targets []mutation.Target, root, dir string) error {
	for _, t := range targets {
		name := filepath.Join(dir, t.Name+".json")
		b, err := os.ReadFile(name)
		if err != nil {
			return err
		}
		var ms []mutation.Mutant
		if err := json.Unmarshal(b, &ms); err != nil {
			return err
		}
		if err := mutation.Recheck(ctx, root, ms, t.Rerun); err != nil {
			return err
		}
		if b, err = json.MarshalIndent(ms, "", " "); err != nil {
			return err
		}
		if err := os.WriteFile(name, b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

func report(targets []mutation.Target, dir, eqFile string) error {
	f, err := os.Open(eqFile)
	if err != nil {
		return err
	}
	eq, err := mutation.Equivalents(f)
	f.Close()
	if err != nil {
		return err
	}
	var all []mutation.Mutant
	for _, t := range targets {
		b, err := os.ReadFile(filepath.Join(dir, t.Name+".json"))
		if err != nil {
			return fmt.Errorf("%w (run nwmutants run --targets %s first)", err, t.Name)
		}
		var ms []mutation.Mutant
		if err := json.Unmarshal(b, &ms); err != nil {
			return fmt.Errorf("%s: %w", t.Name, err)
		}
		all = append(all, ms...)
	}
	scores, open := mutation.Judge(all, eq)
	fmt.Println("| target | killed | lived | not covered | explained | efficacy | killed or explained |")
	fmt.Println("|---|---|---|---|---|---|---|")
	for _, t := range targets {
		s := scores[t.Name]
		fmt.Printf("| %s | %d | %d | %d | %d | %.1f %% | %.1f %% |\n", t.Name, s.Killed, s.Lived, s.NotCovered, s.Explained, s.Efficacy(), s.Caught())
	}
	for _, m := range open {
		fmt.Printf("survivor: %s (%s)\n", m.Key(), strings.ToLower(m.Status))
	}
	if len(open) > 0 {
		return errors.New(strconv.Itoa(len(open)) + " survivors neither killed by a test nor explained in " + eqFile)
	}
	return nil
}
