package mutation

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// The rule ledger (docs/rules.md) lists every rule the README and the
// docs state, one section each:
//
//	## Area
//
//	### id: the rule, in a sentence
//	- stated: where the docs say it
//	- lives in: the function that keeps it
//	- test: ./pkg TestA TestB
//	- break: how a careless change would violate it
//
//	```diff path/to/file.go
//	 context line
//	-a line the break removes
//	+a line the break adds
//	```
//
// A break is one or more such blocks; each block's old text (its context
// and - lines) must occur exactly once in its file. The check (nwmutants
// rules) applies each rule's break alone, runs the rule's tests against
// it and fails when they pass: a rule whose break survives is not
// guarded.

// Rule is one rule of the ledger.
type Rule struct {
	ID     string
	Area   string
	Text   string // the rule, in a sentence
	Stated string
	Where  string
	Tests  []TestRef
	Why    string // what the break does
	Breaks []Hunk
	Line   int // of its heading in the ledger
}

// TestRef names tests of one package, by their function names.
type TestRef struct {
	Pkg   string // ./table
	Names []string
}

// Hunk is one block of a break: Old, which occurs once in File, becomes
// New.
type Hunk struct {
	File     string // from the module's root: table/classify.go
	Old, New string
}

var (
	ruleHead = regexp.MustCompile(`^### ([a-z0-9][a-z0-9-]*): (.+)$`)
	areaHead = regexp.MustCompile(`^## (.+)$`)
	field    = regexp.MustCompile(`^- (stated|lives in|test|break): (.*)$`)
	testName = regexp.MustCompile(`^Test[A-Za-z0-9_]*$`)
	pkgPath  = regexp.MustCompile(`^\./[a-z0-9_/.-]+$`)
)

// ParseRules reads a ledger.
func ParseRules(r io.Reader) ([]Rule, error) {
	var (
		rules []Rule
		area  string
		cur   *Rule
		hunk  *Hunk
		ln    int
	)
	fail := func(format string, a ...any) error {
		return fmt.Errorf("ledger line %d: %s", ln, fmt.Sprintf(format, a...))
	}
	var errs []error
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	var old, new []string
	for sc.Scan() {
		ln++
		line := sc.Text()
		if hunk != nil {
			switch {
			case line == "```":
				hunk.Old, hunk.New = strings.Join(old, "\n"), strings.Join(new, "\n")
				if len(old) == 0 {
					errs = append(errs, fail("%s: a break block with no old text", cur.ID))
				}
				cur.Breaks = append(cur.Breaks, *hunk)
				hunk = nil
			case strings.HasPrefix(line, "-"):
				old = append(old, line[1:])
			case strings.HasPrefix(line, "+"):
				new = append(new, line[1:])
			case strings.HasPrefix(line, " "):
				old, new = append(old, line[1:]), append(new, line[1:])
			case line == "":
				old, new = append(old, ""), append(new, "")
			default:
				errs = append(errs, fail("%s: a break line must start with -, + or a space: %q", cur.ID, line))
			}
			continue
		}
		if m := areaHead.FindStringSubmatch(line); m != nil {
			area = m[1]
			cur = nil
			continue
		}
		if m := ruleHead.FindStringSubmatch(line); m != nil {
			if area == "" {
				errs = append(errs, fail("rule %s before any area (## heading)", m[1]))
			}
			rules = append(rules, Rule{ID: m[1], Area: area, Text: m[2], Line: ln})
			cur = &rules[len(rules)-1]
			continue
		}
		if cur == nil {
			continue
		}
		if m := field.FindStringSubmatch(line); m != nil {
			v := strings.TrimSpace(m[2])
			switch m[1] {
			case "stated":
				cur.Stated = v
			case "lives in":
				cur.Where = v
			case "break":
				cur.Why = v
			case "test":
				refs, err := parseTests(v)
				if err != nil {
					errs = append(errs, fail("%s: %v", cur.ID, err))
				}
				cur.Tests = append(cur.Tests, refs...)
			}
			continue
		}
		if f, ok := strings.CutPrefix(line, "```diff "); ok {
			hunk = &Hunk{File: strings.TrimSpace(f)}
			old, new = nil, nil
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if hunk != nil {
		errs = append(errs, fail("%s: a break block is not closed", cur.ID))
	}
	seen := map[string]int{}
	for _, r := range rules {
		if l, ok := seen[r.ID]; ok {
			errs = append(errs, fmt.Errorf("ledger line %d: rule %s is also at line %d", r.Line, r.ID, l))
		}
		seen[r.ID] = r.Line
		var missing []string
		if r.Stated == "" {
			missing = append(missing, "stated")
		}
		if r.Where == "" {
			missing = append(missing, "lives in")
		}
		if len(r.Tests) == 0 {
			missing = append(missing, "test")
		}
		if r.Why == "" || len(r.Breaks) == 0 {
			missing = append(missing, "break")
		}
		if len(missing) > 0 {
			errs = append(errs, fmt.Errorf("ledger line %d: rule %s has no %s", r.Line, r.ID, strings.Join(missing, ", ")))
		}
	}
	if len(errs) > 0 {
		return rules, joinErrs(errs)
	}
	return rules, nil
}

// parseTests reads "./table TestA TestB; ./remediate TestC".
func parseTests(v string) ([]TestRef, error) {
	var out []TestRef
	for _, part := range strings.Split(v, ";") {
		f := strings.Fields(strings.ReplaceAll(strings.ReplaceAll(part, "`", ""), ",", " "))
		if len(f) < 2 {
			return nil, fmt.Errorf("test %q: want a package (./table) and at least one test", strings.TrimSpace(part))
		}
		if !pkgPath.MatchString(f[0]) {
			return nil, fmt.Errorf("test %q: %q is not a package path like ./table", strings.TrimSpace(part), f[0])
		}
		for _, n := range f[1:] {
			if !testName.MatchString(n) {
				return nil, fmt.Errorf("test %q: %q is not a test function's name", strings.TrimSpace(part), n)
			}
		}
		out = append(out, TestRef{Pkg: f[0], Names: f[1:]})
	}
	return out, nil
}

func joinErrs(errs []error) error {
	var b strings.Builder
	for i, e := range errs {
		if i > 0 {
			b.WriteString("\n")
		}
		b.WriteString(e.Error())
	}
	return fmt.Errorf("%s", b.String())
}

// ReadRules reads the ledger at name.
func ReadRules(name string) ([]Rule, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ParseRules(f)
}

// Apply returns the files the rule's break changes, changed, by their
// path from root. Each block's old text must occur exactly once in its
// file (blocks of one file apply in order).
func (r Rule) Apply(root string) (map[string][]byte, error) {
	out := map[string][]byte{}
	for i, h := range r.Breaks {
		src, ok := out[h.File]
		if !ok {
			b, err := os.ReadFile(filepath.Join(root, h.File))
			if err != nil {
				return nil, fmt.Errorf("rule %s, break block %d: %w", r.ID, i+1, err)
			}
			src = b
		}
		switch n := strings.Count(string(src), h.Old); n {
		case 1:
		case 0:
			return nil, fmt.Errorf("rule %s, break block %d: its old text is not in %s (the code moved: write the break again)", r.ID, i+1, h.File)
		default:
			return nil, fmt.Errorf("rule %s, break block %d: its old text is in %s %d times: give it more context", r.ID, i+1, h.File, n)
		}
		out[h.File] = []byte(strings.Replace(string(src), h.Old, h.New, 1))
	}
	return out, nil
}

// TestsDeclared reports the named tests that no _test.go file of their
// package declares (func TestX(t *testing.T)).
func (r Rule) TestsDeclared(root string) ([]string, error) {
	var missing []string
	for _, ref := range r.Tests {
		files, err := filepath.Glob(filepath.Join(root, ref.Pkg, "*_test.go"))
		if err != nil {
			return nil, err
		}
		var all strings.Builder
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				return nil, err
			}
			all.Write(b)
		}
		for _, n := range ref.Names {
			if !regexp.MustCompile(`(?m)^func ` + n + `\(t \*testing\.T\)`).MatchString(all.String()) {
				missing = append(missing, ref.Pkg+" "+n)
			}
		}
	}
	return missing, nil
}

// Areas counts the rules of each area, in the ledger's order.
func Areas(rules []Rule) (names []string, counts map[string]int) {
	counts = map[string]int{}
	for _, r := range rules {
		if counts[r.Area] == 0 {
			names = append(names, r.Area)
		}
		counts[r.Area]++
	}
	return names, counts
}

// SummaryTable is the ledger's table of rules by area, as the ledger
// must hold it between its summary markers.
func SummaryTable(rules []Rule) string {
	names, counts := Areas(rules)
	var b strings.Builder
	b.WriteString("| area | rules |\n|---|---|\n")
	for _, n := range names {
		fmt.Fprintf(&b, "| %s | %d |\n", n, counts[n])
	}
	fmt.Fprintf(&b, "| all | %d |\n", len(rules))
	return b.String()
}

// Summary markers: the ledger's summary table sits between them.
const (
	SummaryStart = "<!-- rules-summary:start (nwmutants rules --write-summary) -->"
	SummaryEnd   = "<!-- rules-summary:end -->"
)

// SummaryOf returns the text between the ledger's summary markers.
func SummaryOf(ledger string) (string, bool) {
	_, after, ok := strings.Cut(ledger, SummaryStart+"\n")
	if !ok {
		return "", false
	}
	in, _, ok := strings.Cut(after, SummaryEnd)
	return in, ok
}

// WithSummary returns the ledger with its summary table replaced.
func WithSummary(ledger, table string) (string, error) {
	before, after, ok := strings.Cut(ledger, SummaryStart+"\n")
	if !ok {
		return "", fmt.Errorf("the ledger has no %s", SummaryStart)
	}
	_, rest, ok := strings.Cut(after, SummaryEnd)
	if !ok {
		return "", fmt.Errorf("the ledger has no %s", SummaryEnd)
	}
	return before + SummaryStart + "\n" + table + SummaryEnd + rest, nil
}

// Pkgs lists the packages the rules' tests are in, each once.
func Pkgs(rules []Rule) []string {
	var out []string
	for _, r := range rules {
		for _, t := range r.Tests {
			if !slices.Contains(out, t.Pkg) {
				out = append(out, t.Pkg)
			}
		}
	}
	return out
}
