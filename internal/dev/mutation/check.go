package mutation

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Verdict is what became of a rule's break.
type Verdict string

// Verdicts. Only Caught passes the check.
const (
	Caught     Verdict = "caught"      // a named test failed on the break
	Survived   Verdict = "SURVIVED"    // every named test passed on the break: the rule is not guarded
	NotApplied Verdict = "NOT APPLIED" // the break's old text is not in its file once
	NotBuilt   Verdict = "NOT BUILT"   // the package does not compile with the break
	NotRun     Verdict = "NOT RUN"     // a named test did not run (no such test)
	Skipped    Verdict = "SKIPPED"     // a named test skipped (privileged, and not root)
)

// Result is one rule's check.
type Result struct {
	Rule    Rule
	Verdict Verdict
	Detail  string // the test that failed, or what went wrong
	Took    time.Duration
}

// CheckOptions say how to check.
type CheckOptions struct {
	// Root is the module whose code the breaks are applied to and whose
	// tests run.
	Root string
	// Whole runs every test of the rule's packages rather than the named
	// ones: how well a package's tests as a whole guard the rule (for a
	// tree that predates the named tests).
	Whole bool
	// Timeout bounds one package's tests on a break (go test -timeout);
	// a break that makes them hang is caught by it.
	Timeout time.Duration
}

// event is the part of go test -json's events read here.
type event struct {
	Action  string
	Package string
	Test    string
	Output  string
}

// Check applies the rule's break alone (go test -overlay: the tree is
// not touched) and runs its tests against it.
func Check(ctx context.Context, r Rule, o CheckOptions) Result {
	start := time.Now()
	res := check(ctx, r, o)
	res.Rule, res.Took = r, time.Since(start)
	return res
}

func check(ctx context.Context, r Rule, o CheckOptions) Result {
	files, err := r.Apply(o.Root)
	if err != nil {
		return Result{Verdict: NotApplied, Detail: err.Error()}
	}
	tmp, err := os.MkdirTemp("", "nwrules-")
	if err != nil {
		return Result{Verdict: NotBuilt, Detail: err.Error()}
	}
	defer os.RemoveAll(tmp)
	if !allGo(files) {
		// A break of what the tests read at run time (the chart, the
		// mixin, the Makefile), where an overlay does not reach: the
		// tests run in a copy of the tree with the break written in.
		tree := filepath.Join(tmp, "tree")
		if err := copyTree(o.Root, tree); err != nil {
			return Result{Verdict: NotBuilt, Detail: err.Error()}
		}
		for name, b := range files {
			if err := os.WriteFile(filepath.Join(tree, name), b, 0o644); err != nil {
				return Result{Verdict: NotBuilt, Detail: err.Error()}
			}
		}
		o.Root = tree
		return runAll(ctx, r, o, "")
	}
	replace := map[string]string{}
	i := 0
	for name, b := range files {
		i++
		f := filepath.Join(tmp, fmt.Sprintf("%d-%s", i, filepath.Base(name)))
		if err := os.WriteFile(f, b, 0o644); err != nil {
			return Result{Verdict: NotBuilt, Detail: err.Error()}
		}
		abs, err := filepath.Abs(filepath.Join(o.Root, name))
		if err != nil {
			return Result{Verdict: NotBuilt, Detail: err.Error()}
		}
		replace[abs] = f
	}
	ov, _ := json.Marshal(map[string]any{"Replace": replace})
	overlay := filepath.Join(tmp, "overlay.json")
	if err := os.WriteFile(overlay, ov, 0o644); err != nil {
		return Result{Verdict: NotBuilt, Detail: err.Error()}
	}
	return runAll(ctx, r, o, overlay)
}

// runAll runs each of the rule's tests against its break until one
// catches it.
func runAll(ctx context.Context, r Rule, o CheckOptions, overlay string) Result {
	for _, ref := range r.Tests {
		res := runTests(ctx, o, overlay, ref)
		if res.Verdict != Survived {
			return res
		}
	}
	what := "every test of " + strings.Join(Pkgs([]Rule{r}), " ")
	if !o.Whole {
		var names []string
		for _, ref := range r.Tests {
			names = append(names, ref.Names...)
		}
		what = strings.Join(names, ", ")
	}
	return Result{Verdict: Survived, Detail: what + " passed with the break"}
}

// allGo reports whether every file a break changes is Go source, which an
// overlay can replace.
func allGo(files map[string][]byte) bool {
	for name := range files {
		if filepath.Ext(name) != ".go" {
			return false
		}
	}
	return true
}

// copyTree copies the tree at root to dst but for what no test reads
// there (Git's objects, the kernels' cache, the built binaries).
func copyTree(root, dst string) error {
	return filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if d.IsDir() && slices.Contains([]string{".git", ".kernels", "bin"}, rel) {
			return filepath.SkipDir
		}
		to := filepath.Join(dst, rel)
		switch {
		case d.IsDir():
			return os.MkdirAll(to, 0o755)
		case d.Type()&os.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return os.Symlink(target, to)
		case d.Type().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			info, err := d.Info()
			if err != nil {
				return err
			}
			return os.WriteFile(to, b, info.Mode().Perm())
		}
		return nil
	})
}

// runTests runs one package's named tests (or all) with the overlay ("":
// none).
func runTests(ctx context.Context, o CheckOptions, overlay string, ref TestRef) Result {
	// No vet (the break is no code to keep) and no DWARF in the test
	// binary (linking it is most of a break's cost): what a break costs
	// is building the packages it touches and running the tests.
	args := []string{"test", "-count=1", "-json", "-vet=off", "-ldflags=-w", "-timeout", o.Timeout.String()}
	if !o.Whole {
		args = append(args, "-run", "^("+strings.Join(ref.Names, "|")+")$")
	}
	cmd := exec.CommandContext(ctx, "go", append(args, ref.Pkg)...)
	cmd.Dir = o.Root
	// The overlay through GOFLAGS, not the flag: a test that runs the
	// go command itself (go list for the layers, go build for a binary)
	// sees the break too.
	cmd.Env = os.Environ()
	if overlay != "" {
		cmd.Env = append(cmd.Env, "GOFLAGS="+strings.TrimSpace(os.Getenv("GOFLAGS")+" -overlay="+overlay))
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, _ := cmd.Output()
	if ctx.Err() != nil {
		return Result{Verdict: NotBuilt, Detail: ctx.Err().Error()}
	}
	var (
		ran, failed, skipped   []string
		running                string
		pkgFailed, buildFailed bool
		output                 strings.Builder
	)
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 0, 64*1024), 16<<20)
	for sc.Scan() {
		var ev event
		if json.Unmarshal(sc.Bytes(), &ev) != nil {
			continue
		}
		top, _, _ := strings.Cut(ev.Test, "/") // a subtest belongs to its test
		switch {
		case ev.Action == "build-fail":
			buildFailed = true
		case ev.Action == "output" || ev.Action == "build-output":
			if output.Len() < 64*1024 {
				output.WriteString(ev.Output)
			}
		case ev.Test == "" && ev.Action == "fail":
			pkgFailed = true
		case ev.Test != "" && ev.Test != top:
		case ev.Action == "run":
			ran, running = append(ran, top), top
		case ev.Action == "pass":
			running = ""
		case ev.Action == "fail":
			failed, running = append(failed, top), ""
		case ev.Action == "skip":
			skipped, running = append(skipped, top), ""
		}
	}
	if buildFailed || strings.Contains(stderr.String(), "[build failed]") || strings.Contains(output.String(), "[build failed]") ||
		(pkgFailed && len(ran) == 0 && strings.Contains(output.String(), "setup failed")) {
		return Result{Verdict: NotBuilt, Detail: firstLines(stderr.String()+output.String(), 8)}
	}
	if o.Whole {
		if pkgFailed || len(failed) > 0 {
			return Result{Verdict: Caught, Detail: ref.Pkg + ": " + strings.Join(failed, ", ") + " failed"}
		}
		if len(ran) == 0 {
			return Result{Verdict: NotRun, Detail: ref.Pkg + " has no tests"}
		}
		return Result{Verdict: Survived}
	}
	var caught []string
	for _, n := range ref.Names {
		if slices.Contains(failed, n) {
			caught = append(caught, n)
		}
	}
	if len(caught) > 0 {
		return Result{Verdict: Caught, Detail: ref.Pkg + ": " + strings.Join(caught, ", ") + " failed"}
	}
	if pkgFailed && running != "" && slices.Contains(ref.Names, running) {
		// The test binary died (a panic, the timeout) in a named test.
		return Result{Verdict: Caught, Detail: ref.Pkg + ": " + running + " died"}
	}
	if pkgFailed && len(ran) == 0 {
		return Result{Verdict: NotBuilt, Detail: firstLines(stderr.String()+output.String(), 8)}
	}
	for _, n := range ref.Names {
		switch {
		case slices.Contains(skipped, n):
			return Result{Verdict: Skipped, Detail: ref.Pkg + ": " + n + " skipped: " + skipReason(output.String())}
		case !slices.Contains(ran, n):
			return Result{Verdict: NotRun, Detail: ref.Pkg + ": " + n + " did not run (no such test?)"}
		}
	}
	return Result{Verdict: Survived}
}

// skipReason finds the reason a test gave for skipping.
func skipReason(out string) string {
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, "_test.go:") && (strings.Contains(l, "root") || strings.Contains(l, "skip")) {
			return strings.TrimSpace(l)
		}
	}
	return "(no reason printed)"
}

func firstLines(s string, n int) string {
	var out []string
	for _, l := range strings.Split(strings.TrimSpace(s), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "FAIL") && !strings.HasPrefix(l, "#") {
			out = append(out, l)
		}
		if len(out) == n {
			break
		}
	}
	return strings.Join(out, "\n    ")
}
