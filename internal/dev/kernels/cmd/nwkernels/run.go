//go:build linux

package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/neighwatch/neighwatch/internal/dev/kernels"
	"github.com/neighwatch/neighwatch/internal/dev/manifests"
)

func run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("nwkernels run", flag.ContinueOnError)
	var (
		names    = fs.String("kernels", strings.Join(kernels.Names(), ","), "Debian kernel series to boot (comma-separated; empty for none)")
		host     = fs.String("host", "full", "the machine's own kernel: full (probe and contract tests), probe (the probe only: make test has run the whole suite on it already) or none")
		dir      = fs.String("dir", ".kernels", "where kernels, test binaries and results go (anywhere: the guests see them through shares of their own)")
		refresh  = fs.Bool("refresh", false, "fetch the kernels again even if a previous run left them")
		parallel = fs.Int("parallel", 1, "kernels booted at once")
		only     = fs.String("run", "", "run only the contract tests matching this regexp (go test -run)")
		timeout  = fs.Duration("timeout", 30*time.Minute, "limit for one kernel's boot and tests (twice the longest measured beside a busy loop and the host's suite: 14.5 minutes, 7.3)")
		readme   = fs.String("readme", "", "check this file's table (docs/kernels.md, between its kernel-matrix markers) against the run when every kernel passed: the run fails when they differ but for what it measures; make kernels-readme then writes the run's table in (DIR/readme-table.md)")
		blind    = fs.String("blind", "", "kernels (comma-separated) that also run the blind control: the moved host with the tracer's counting refused, which must fail")
	)
	if err := fs.Parse(args); err != nil {
		return err
	}
	abs, err := filepath.Abs(*dir)
	if err != nil {
		return err
	}
	ks, err := pickKernels(*names)
	if err != nil {
		return err
	}
	var blinds []string
	if *blind != "" {
		bk, err := pickKernels(*blind)
		if err != nil {
			return fmt.Errorf("--blind: %w", err)
		}
		for _, k := range bk {
			if !slices.Contains(ks, k) {
				return fmt.Errorf("--blind names %s, which --kernels does not boot", k.Name)
			}
			blinds = append(blinds, k.Name)
		}
	}
	start := time.Now()
	// The host's binaries first, and the arm64 guests' (their own root
	// has no C library of the host's: static builds) meanwhile, while
	// the first guest boots: each guest waits for its own.
	binsFor := map[string]func() (binaries, error){}
	for _, arch := range architectures(ks, *host != "none") {
		dir := filepath.Join(abs, "bin")
		if arch != "amd64" {
			dir = filepath.Join(dir, arch)
		}
		binsFor[arch] = sync.OnceValues(func() (binaries, error) { return build(ctx, dir, arch) })
	}
	var first string
	if len(ks) > 0 {
		first = ks[0].Architecture()
	} else if *host != "none" {
		first = "amd64"
	}
	if first != "" {
		if _, err := binsFor[first](); err != nil {
			return err
		}
	}
	builtIn := time.Since(start)
	for arch, b := range binsFor {
		if arch != first {
			go b() //nolint:errcheck // the guest that needs them reads the error
		}
	}
	fmt.Fprintf(os.Stderr, "nwkernels: built in %v\n", builtIn.Round(time.Second))

	// Kernels are fetched one after the other, in the order given, and
	// each boots as soon as it is here: the first kernel's tests run
	// while the next ones download (make test fetches the first before
	// the matrix starts).
	type fetched struct {
		img kernels.Image
		err error
	}
	ready := make([]chan fetched, len(ks))
	for i := range ready {
		ready[i] = make(chan fetched, 1)
	}
	go func() {
		for i, k := range ks {
			t := time.Now()
			imgs, err := fetchKernels(ctx, []kernels.Kernel{k}, abs, *refresh)
			if err != nil {
				ready[i] <- fetched{err: fmt.Errorf("fetch: %w", err)}
				continue
			}
			if d := time.Since(t); d >= time.Second {
				fmt.Fprintf(os.Stderr, "nwkernels: fetched %s in %v\n", k.Name, d.Round(time.Second))
			}
			ready[i] <- fetched{img: imgs[0]}
		}
	}()
	rows := make([]kernels.Row, len(ks))
	var wg sync.WaitGroup
	sem := make(chan struct{}, max(*parallel, 1))
	// Guests start in the order given, whatever order their fetches end
	// in (all at once from the cache): make test gives the newest, which
	// runs the most tests, last, when the checks lane is done. Started
	// in a race, it once ran first, beside go test, in 12 minutes
	// instead of 6.
	started := make([]chan struct{}, len(ks))
	for i := range started {
		started[i] = make(chan struct{})
	}
	for i, k := range ks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if i > 0 {
				<-started[i-1]
			}
			f := <-ready[i]
			if f.err != nil {
				close(started[i])
				rows[i] = kernels.Row{Name: k.Name, Err: f.err}
				return
			}
			sem <- struct{}{}
			close(started[i])
			defer func() { <-sem }()
			b, err := binsFor[k.Architecture()]()
			if err != nil {
				rows[i] = kernels.Row{Name: k.Name, Err: fmt.Errorf("build for %s: %w", k.Architecture(), err)}
				return
			}
			rows[i] = bootOne(ctx, f.img, abs, b, *only, *timeout, slices.Contains(blinds, k.Name))
		}()
	}
	wg.Wait()
	switch *host {
	case "full", "probe":
		b, err := binsFor["amd64"]()
		if err != nil {
			return err
		}
		rows = append(rows, hostRow(ctx, abs, b, *only, *host == "probe"))
	case "none":
	default:
		return fmt.Errorf("--host %q: want full, probe or none", *host)
	}
	table := kernels.Table(rows, true)
	fmt.Print(table)
	fmt.Print("\n" + kernels.Timings(rows, builtIn))
	if err := os.WriteFile(filepath.Join(abs, "matrix.md"), []byte(table), 0o644); err != nil {
		return err
	}
	if err := readmeTable(*readme, filepath.Join(abs, readmeRun), rows); err != nil {
		return err
	}
	fmt.Printf("\nmatrix wall time: %v\n", time.Since(start).Round(time.Second))
	var errs []error
	for _, r := range rows {
		if r.Err != nil {
			errs = append(errs, fmt.Errorf("kernel %s: %w", r.Name, r.Err))
		}
	}
	return errors.Join(errs...)
}

// architectures lists the architectures whose binaries the run needs.
func architectures(ks []kernels.Kernel, host bool) []string {
	var out []string
	if host {
		out = append(out, "amd64")
	}
	for _, k := range ks {
		if !slices.Contains(out, k.Architecture()) {
			out = append(out, k.Architecture())
		}
	}
	return out
}

// pickKernels reads --kernels.
func pickKernels(names string) ([]kernels.Kernel, error) {
	var ks []kernels.Kernel
	for _, n := range strings.Split(names, ",") {
		if n = strings.TrimSpace(n); n == "" {
			continue
		}
		k, ok := kernels.Lookup(n)
		if !ok {
			return nil, fmt.Errorf("--kernels: unknown series %q (known: %s)", n, strings.Join(kernels.Names(), ", "))
		}
		ks = append(ks, k)
	}
	return ks, nil
}

// fetchKernels fetches ks from the machine's Debian archive into dir's
// cache (or finds them there).
func fetchKernels(ctx context.Context, ks []kernels.Kernel, dir string, refresh bool) ([]kernels.Image, error) {
	if len(ks) == 0 {
		return nil, nil
	}
	archive, err := machineArchive()
	if err != nil {
		return nil, err
	}
	f := &kernels.Fetcher{Dir: filepath.Join(dir, "cache"), Archive: archive, Refresh: refresh, Log: os.Stderr}
	if _, err := os.Stat("/usr/share/keyrings/debian-archive-keyring.gpg"); err == nil {
		f.Keyring = "/usr/share/keyrings/debian-archive-keyring.gpg"
	}
	return f.Fetch(ctx, ks)
}

// fetchOnly fetches kernels into the cache and boots none: make test's
// kernel lane fetches the matrix's kernels while the boot test boots.
func fetchOnly(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("nwkernels fetch", flag.ContinueOnError)
	names := fs.String("kernels", strings.Join(kernels.Names(), ","), "Debian kernel series to fetch (comma-separated)")
	dir := fs.String("dir", ".kernels", "where the kernels go")
	if err := fs.Parse(args); err != nil {
		return err
	}
	abs, err := filepath.Abs(*dir)
	if err != nil {
		return err
	}
	ks, err := pickKernels(*names)
	if err != nil {
		return err
	}
	start := time.Now()
	if _, err := fetchKernels(ctx, ks, abs, false); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "nwkernels: fetched %s in %v\n", *names, time.Since(start).Round(time.Second))
	return nil
}

// readmeRun is where a run leaves the README's table as it would have
// it (the rows of kernels it did not boot kept), for make kernels-readme.
const readmeRun = "readme-table.md"

// readmeTable checks the README's table against the run's when every
// kernel passed, but for what the run measures (the times): a run never
// writes a tracked file. It leaves the table the README would have in
// out, and fails naming the kernels whose rows differ.
func readmeTable(path, out string, rows []kernels.Row) error {
	if path == "" {
		return nil
	}
	doc, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if _, ok := kernels.ReplaceBlock(string(doc), ""); !ok {
		return fmt.Errorf("%s has no kernel-matrix markers", path)
	}
	for _, r := range rows {
		if r.Err != nil {
			fmt.Fprintf(os.Stderr, "nwkernels: %s not checked: kernel %s failed\n", path, r.Name)
			return nil
		}
	}
	// The rows of kernels this run did not boot stay as the README has
	// them: make test boots some, make test-kernels-more the others.
	old := kernels.Block(string(doc))
	table := kernels.MergeTable(old, kernels.Table(rows, false))
	if err := os.WriteFile(out, []byte(table), 0o644); err != nil {
		return err
	}
	if diff := kernels.FactsDiffer(old, table); len(diff) > 0 {
		return fmt.Errorf("%s's kernel table says otherwise than this run for %s: run make kernels-readme to write this run's table (%s) into it, and commit it",
			path, strings.Join(diff, ", "), out)
	}
	return nil
}

// writeReadme writes the table a run left (readmeTable) into the README:
// make kernels-readme.
func writeReadme(args []string) error {
	fs := flag.NewFlagSet("nwkernels readme", flag.ContinueOnError)
	dir := fs.String("dir", ".kernels", "where the run left its table")
	readme := fs.String("readme", "docs/kernels.md", "the file to write it into, between its kernel-matrix markers")
	if err := fs.Parse(args); err != nil {
		return err
	}
	from := filepath.Join(*dir, readmeRun)
	table, err := os.ReadFile(from)
	if err != nil {
		return fmt.Errorf("no table of a run to write (%w): make test or make test-kernels leaves one when every kernel passed", err)
	}
	doc, err := os.ReadFile(*readme)
	if err != nil {
		return err
	}
	next, ok := kernels.ReplaceBlock(string(doc), string(table))
	if !ok {
		return fmt.Errorf("%s has no kernel-matrix markers", *readme)
	}
	if next == string(doc) {
		return nil
	}
	fmt.Fprintf(os.Stderr, "nwkernels: %s: kernel table written from %s\n", *readme, from)
	return os.WriteFile(*readme, []byte(next), 0o644)
}

// binaries are what the guests run, built on the host.
type binaries struct {
	dir        string
	neighwatch string
	nwkernels  string
	tests      map[string]string // package -> test binary
}

func build(ctx context.Context, dir, arch string) (binaries, error) {
	b := binaries{dir: dir, neighwatch: filepath.Join(dir, "neighwatch"), nwkernels: filepath.Join(dir, "nwkernels"), tests: map[string]string{}}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return b, err
	}
	version, err := os.ReadFile("VERSION")
	if err != nil {
		return b, fmt.Errorf("run from the repository's root: %w", err)
	}
	ld := "-X github.com/prometheus/common/version.Version=" + strings.TrimSpace(string(version))
	cmds := [][]string{
		{"go", "build", "-ldflags", ld, "-o", b.neighwatch, "./cmd/neighwatch"},
		{"go", "build", "-o", b.nwkernels, "./internal/dev/kernels/cmd/nwkernels"},
	}
	for _, s := range kernels.Contract {
		bin := filepath.Join(dir, strings.ReplaceAll(strings.TrimPrefix(s.Package, "./"), "/", "_")+".test")
		b.tests[s.Package] = bin
		cmds = append(cmds, []string{"go", "test", "-c", "-o", bin, s.Package})
	}
	for _, c := range cmds {
		cmd := exec.CommandContext(ctx, c[0], c[1:]...)
		if arch != "amd64" {
			cmd.Env = append(os.Environ(), "GOOS=linux", "GOARCH="+arch, "CGO_ENABLED=0")
		}
		if out, err := cmd.CombinedOutput(); err != nil {
			return b, fmt.Errorf("%s: %w\n%s", strings.Join(c, " "), err, out)
		}
	}
	return b, nil
}

func machineArchive() (string, error) {
	for _, p := range append([]string{"/etc/apt/sources.list"}, globs("/etc/apt/sources.list.d/*.sources", "/etc/apt/sources.list.d/*.list")...) {
		f, err := os.Open(p)
		if err != nil {
			continue
		}
		uri, err := kernels.ArchiveURI(f)
		f.Close()
		if err == nil {
			return uri, nil
		}
	}
	return "", errors.New("no Debian archive in /etc/apt/sources.list or sources.list.d: the matrix fetches Debian's kernels from the archive this machine uses")
}

func globs(patterns ...string) []string {
	var out []string
	for _, p := range patterns {
		m, _ := filepath.Glob(p)
		out = append(out, m...)
	}
	return out
}

// steps are what every kernel runs: the capability probe as root, as
// the DaemonSet and as the systemd unit run the agent, then each
// package's contract tests, with the agent of the e2e tests under the
// DaemonSet's privileges. Paths are the host's: a guest's Boot maps them.
func steps(bins binaries, only, kernel, results, src string, blind bool) []kernels.Step {
	env := []string{"CI=true", "NEIGHWATCH_BIN=" + bins.neighwatch, "NEIGHWATCH_KERNEL=" + kernel, "NEIGHWATCH_AS=daemonset"}
	if kernel != "host" {
		// Emulated (TCG): everything takes several times longer.
		env = append(env, "NEIGHWATCH_TIME_SCALE="+timeScale(kernel))
	}
	var out []kernels.Step
	for _, as := range probesNeeded(src) {
		out = append(out, kernels.Step{Name: kernels.ProbeStep(as), Dir: src, Env: env,
			Argv: []string{bins.nwkernels, "probe", "--as", as, "--out", filepath.Join(results, kernels.ProbeStep(as)+".json")}})
	}
	for _, s := range kernels.Contract {
		run := s.RunFor(kernel)
		if only != "" {
			run = only
		}
		out = append(out, kernels.Step{
			Name: s.Name(), Dir: filepath.Join(src, s.Package), Env: env,
			Argv: []string{bins.tests[s.Package], "-test.run", run, "-test.v", "-test.count=1", "-test.timeout", s.Timeout.String(),
				"-test.parallel", strconv.Itoa(s.Tests())},
		})
	}
	if blind && only == "" {
		// The moved host again, the tracer's counting refused: it must
		// fail (kernels.BlindOutcome).
		out = append(out, kernels.Step{
			Name: kernels.BlindStep, Dir: filepath.Join(src, "e2e"), Env: append(slices.Clone(env), "NEIGHWATCH_REFUSE_PROGRAMS="+kernels.BlindPrograms),
			Argv: []string{bins.tests["./e2e"], "-test.run", "^" + kernels.BlindTest + "$", "-test.v", "-test.count=1", "-test.timeout", "10m"},
		})
	}
	return out
}

// timeScale stretches the tests' waits in an emulated guest: 4 for an
// amd64 guest; an arm64 one, whose every instruction is translated from
// another architecture, more.
func timeScale(kernel string) string {
	if k, ok := kernels.Lookup(kernel); ok && !k.Native() {
		return "6"
	}
	return "4"
}

func bootOne(ctx context.Context, img kernels.Image, dir string, bins binaries, only string, timeout time.Duration, blind bool) kernels.Row {
	results := filepath.Join(dir, "results", img.Kernel.Name)
	_ = os.RemoveAll(results)
	src, _ := os.Getwd()
	st := steps(bins, only, img.Kernel.Name, results, src, blind)
	start := time.Now()
	fmt.Fprintf(os.Stderr, "nwkernels: booting %s (%s %s)\n", img.Release, img.Package, img.Version)
	// The guest reads the checkout and the binaries through shares of
	// their own, wherever they are on the host.
	boot := kernels.Boot{Image: img, Results: results, Timeout: timeout, Steps: st,
		Shares: []kernels.Share{{Tag: "src", Host: src}, {Tag: "bin", Host: bins.dir}}}
	err := boot.Run(ctx)
	if fault := consoleFault(results); err != nil && fault != "" {
		// Never seen twice in a row: 6.12 died twice of the int3 that
		// static-key patching leaves in place for a moment (once in
		// __netif_receive_skb_core, as tc hooks came and went), and 5.10
		// hung once with soft lockups on both vCPUs in the e2e tests.
		// One more boot; a second fault fails the kernel.
		kept := results + "-console-1.log" // beside results, which goes
		_ = os.Rename(filepath.Join(results, "console.log"), kept)
		fmt.Fprintf(os.Stderr, "nwkernels: %s: the guest kernel %s (console: %s); booting it once more\n", img.Release, fault, kept)
		_ = os.RemoveAll(results)
		err = boot.Run(ctx)
	}
	name := img.Kernel.Name
	if name == kernels.Newest {
		name = kernels.Series(img.Release) + " (newest)"
	}
	row := collect(name, img.Release, results, st)
	row.Took = time.Since(start)
	row.Boot = bootTime(start, results, st)
	if err != nil {
		row.Err = err
	} else if err := dmesgClean(results); err != nil {
		row.Err = errors.Join(row.Err, err)
	}
	fmt.Fprintf(os.Stderr, "nwkernels: %s done in %v\n", img.Release, row.Took.Round(time.Second))
	return row
}

func hostRow(ctx context.Context, dir string, bins binaries, only string, probeOnly bool) kernels.Row {
	results := filepath.Join(dir, "results", "host")
	_ = os.RemoveAll(results)
	if err := os.MkdirAll(results, 0o755); err != nil {
		return kernels.Row{Name: "host", Err: err}
	}
	rel := unameRelease()
	src, _ := os.Getwd()
	st := steps(bins, only, "host", results, src, false)
	if probeOnly {
		st = st[:len(probesNeeded(src))]
	}
	start := time.Now()
	for _, s := range st {
		out, err := os.Create(filepath.Join(results, s.Name+".out"))
		if err != nil {
			return kernels.Row{Name: "host", Err: err}
		}
		cmd := exec.CommandContext(ctx, s.Argv[0], s.Argv[1:]...)
		cmd.Dir, cmd.Env, cmd.Stdout, cmd.Stderr = s.Dir, append(os.Environ(), s.Env...), out, out
		began := time.Now()
		err = cmd.Run()
		out.Close()
		_ = os.WriteFile(filepath.Join(results, s.Name+".time"), []byte(fmt.Sprintf("%.3f\n%.3f\n",
			float64(began.UnixNano())/1e9, float64(time.Now().UnixNano())/1e9)), 0o644)
		code := 0
		if err != nil {
			code = 1
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				code = ee.ExitCode()
			}
		}
		_ = os.WriteFile(filepath.Join(results, s.Name+".rc"), []byte(fmt.Sprintln(code)), 0o644)
	}
	row := collect("host", rel, results, st)
	row.Took = time.Since(start)
	row.TestsElsewhere = probeOnly
	return row
}

// collect reads a kernel's results: the probes' capabilities (as root
// and as deployed) and every step's outcome, with how long each took.
func collect(name, release, results string, st []kernels.Step) kernels.Row {
	row := kernels.Row{Name: name, Release: release, Deployed: map[string]kernels.Caps{}}
	var errs []error
	for _, s := range st {
		rcb, err := os.ReadFile(filepath.Join(results, s.Name+".rc"))
		out, _ := os.ReadFile(filepath.Join(results, s.Name+".out"))
		if d, ok := stepTime(filepath.Join(results, s.Name+".time")); ok {
			row.Steps = append(row.Steps, kernels.StepTime{Name: s.Name, Took: d})
		}
		switch as, probe := kernels.ProbeOf(s.Name); {
		case err != nil:
			errs = append(errs, fmt.Errorf("%s did not run", s.Name))
			continue
		case s.Name == kernels.BlindStep:
			// Its test must fail: its results are not the row's.
			blind, err := kernels.BlindOutcome(string(out), strings.TrimSpace(string(rcb)))
			row.Blind = blind
			if err != nil {
				errs = append(errs, fmt.Errorf("%w; output in %s:\n%s", err, filepath.Join(results, s.Name+".out"), failureExcerpt(out)))
			}
			continue
		case probe:
			var caps kernels.Caps
			b, err := os.ReadFile(filepath.Join(results, s.Name+".json"))
			if err == nil {
				err = json.Unmarshal(b, &caps)
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w: %s", s.Name, err, out))
			}
			if as == "root" {
				row.Caps = caps
			} else {
				row.Deployed[as] = caps
			}
		default:
			res := kernels.ParseTestOutput(string(out))
			row.Tests = append(row.Tests, res...)
			if stuck, repaired := kernels.MovedTimes(string(out)); stuck != "" {
				row.Stuck, row.Repaired = stuck, repaired
			}
		}
		if strings.TrimSpace(string(rcb)) != "0" {
			errs = append(errs, fmt.Errorf("%s failed (exit %s); output in %s; what failed:\n%s", s.Name, strings.TrimSpace(string(rcb)), filepath.Join(results, s.Name+".out"), failureExcerpt(out)))
		}
	}
	if _, ok := row.Deployed["systemd"]; !ok {
		if d, ok := row.Deployed["daemonset"]; ok {
			row.Deployed["systemd"] = d // the same privileges: one probe
		}
	}
	// As deployed, the agent must get what it gets as root.
	for _, as := range kernels.ProbeAs[1:] {
		if caps, ok := row.Deployed[as]; ok && row.Caps.Release != "" {
			if diff := kernels.CapsDiff(row.Caps, caps); diff != "" {
				errs = append(errs, fmt.Errorf("as the %s runs it, the agent gets less than as root: %s", as, diff))
			}
		}
	}
	row.Err = errors.Join(errs...)
	return row
}

// dmesgClean fails when the guest's kernel complained in its log after
// the agent and the tests ran (the guest script saves it last): a
// WARNING, a BUG, a call trace or the verifier's words. The host's log is
// not read; other work on the host writes it.
func dmesgClean(results string) error {
	path := filepath.Join(results, "dmesg.txt")
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("the guest left no kernel log: %w", err)
	}
	faults := kernels.DmesgFaults(string(b))
	if len(faults) == 0 {
		return nil
	}
	return fmt.Errorf("the guest's kernel complained in its log (%s): %s", path, strings.Join(faults, "; "))
}

// failureExcerpt is what a failed step's log says went wrong, for the
// run's own output: the results directory is gone with the machine that
// ran it (CI keeps only what was printed). The failing tests' messages
// and verdicts, a panic or a timeout, at most maxExcerpt lines; the
// output's tail when none of these is there.
func failureExcerpt(out []byte) string {
	const maxExcerpt = 60
	lines := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
	var picked []string
	trace := 0 // lines still to keep after a panic: where it happened
	for _, l := range lines {
		t := strings.TrimSpace(l)
		switch {
		case strings.HasPrefix(t, "panic:"), strings.Contains(t, "test timed out"):
			trace = 12
			picked = append(picked, "  | "+l)
		case trace > 0, strings.HasPrefix(t, "--- FAIL"), strings.HasPrefix(t, "FAIL"), testMessage.MatchString(t):
			picked = append(picked, "  | "+l)
		}
		trace = max(0, trace-1)
	}
	if len(picked) == 0 {
		picked = lines[max(0, len(lines)-30):]
		for i, l := range picked {
			picked[i] = "  | " + l
		}
	}
	if len(picked) > maxExcerpt {
		picked = append(picked[:maxExcerpt], fmt.Sprintf("  | (%d more lines)", len(picked)-maxExcerpt))
	}
	return strings.Join(picked, "\n")
}

// testMessage is a line t.Errorf or t.Fatalf wrote: "name_test.go:12: ...".
var testMessage = regexp.MustCompile(`^[\w.-]+_test\.go:\d+: `)

// probesNeeded are the probes a kernel needs: one per distinct set of
// privileges (the systemd unit gives what the DaemonSet gives, today, and
// is then read from the DaemonSet's probe).
func probesNeeded(src string) []string {
	ds, err1 := manifests.DaemonSetPrivileges(src)
	sd, err2 := manifests.SystemdPrivileges(src)
	if err1 == nil && err2 == nil && samePrivileges(ds, sd) {
		return []string{"root", "daemonset"}
	}
	return kernels.ProbeAs
}

func samePrivileges(a, b manifests.Privileges) bool {
	x, y := slices.Clone(a.Caps), slices.Clone(b.Caps)
	slices.Sort(x)
	slices.Sort(y)
	return slices.Equal(x, y) && a.NoNewPrivs == b.NoNewPrivs && a.MemlockBytes == b.MemlockBytes
}

// stepTime reads a step's start and end, written one per line.
func stepTime(path string) (time.Duration, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	var a, z float64
	if n, _ := fmt.Sscanf(string(b), "%f\n%f", &a, &z); n != 2 || z < a {
		return 0, false
	}
	return time.Duration((z - a) * float64(time.Second)), true
}

// bootTime is how long a guest took from qemu's start to its first step
// (the guest's clock follows the host's).
func bootTime(start time.Time, results string, st []kernels.Step) time.Duration {
	if len(st) == 0 {
		return 0
	}
	b, err := os.ReadFile(filepath.Join(results, st[0].Name+".time"))
	if err != nil {
		return 0
	}
	var a float64
	if _, err := fmt.Sscanf(string(b), "%f", &a); err != nil {
		return 0
	}
	return time.Unix(0, int64(a*1e9)).Sub(start).Round(100 * time.Millisecond)
}

// consoleFault says how the guest's kernel failed, from its console in
// results, or "".
func consoleFault(results string) string {
	b, err := os.ReadFile(filepath.Join(results, "console.log"))
	if err != nil {
		return ""
	}
	return kernels.ConsoleFault(b)
}
