package kernels

import (
	"fmt"
	"regexp"
	"strings"
	"time"
)

// Capability is one column of the matrix: what a kernel gives neighwatch
// for one feature ("tcx", "clsact", "raw_tp", "no", ...), and why not
// when it does not.
type Capability struct {
	Name   string `json:"name"`
	Value  string `json:"value"`
	Detail string `json:"detail,omitempty"`
}

// Caps is what the probe reports of one kernel.
type Caps struct {
	Release      string       `json:"release"`
	Capabilities []Capability `json:"capabilities"`
	// Refused lists the programs the kernel refused, with why, whether
	// or not another program took over.
	Refused []string `json:"refused,omitempty"`
}

// TestResult is one test's outcome in one kernel.
type TestResult struct {
	Name    string
	Outcome string // PASS, FAIL or SKIP
	Took    time.Duration
}

// Row is one kernel's line in the matrix.
type Row struct {
	Name, Release string
	Caps          Caps
	Tests         []TestResult
	Took          time.Duration
	Err           error
	// TestsElsewhere: the contract tests ran in the same make test's go
	// test ./..., not here.
	TestsElsewhere bool
}

var resultRE = regexp.MustCompile(`^(\s*)--- (PASS|FAIL|SKIP): (\S+) \(([0-9.]+)s\)`)

// ParseTestOutput reads the outcomes from `go test -v` output, subtests
// included.
func ParseTestOutput(out string) []TestResult {
	var rs []TestResult
	for _, line := range strings.Split(out, "\n") {
		m := resultRE.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		d, _ := time.ParseDuration(m[4] + "s")
		rs = append(rs, TestResult{Name: m[3], Outcome: m[2], Took: d})
	}
	return rs
}

// Table renders the matrix as Markdown: a row per kernel, a column per
// capability, then the tests: how many passed, and which did not; then
// what each kernel refused. For the README, took is left out (it changes
// with every run).
func Table(rows []Row, took bool) string {
	var cols []string
	seen := map[string]bool{}
	for _, r := range rows {
		for _, c := range r.Caps.Capabilities {
			if !seen[c.Name] {
				seen[c.Name] = true
				cols = append(cols, c.Name)
			}
		}
	}
	var b strings.Builder
	b.WriteString("| kernel | release |")
	for _, c := range cols {
		b.WriteString(" " + c + " |")
	}
	b.WriteString(" contract tests |")
	if took {
		b.WriteString(" took |")
	}
	b.WriteString("\n|---|---|")
	for range cols {
		b.WriteString("---|")
	}
	b.WriteString("---|")
	if took {
		b.WriteString("---|")
	}
	b.WriteString("\n")
	var notes []string
	for _, r := range rows {
		fmt.Fprintf(&b, "| %s | %s |", r.Name, r.Release)
		vals := map[string]Capability{}
		for _, c := range r.Caps.Capabilities {
			vals[c.Name] = c
		}
		for _, c := range cols {
			v := vals[c]
			if v.Value == "" {
				v.Value = "?"
			}
			b.WriteString(" " + v.Value + " |")
			if v.Detail != "" {
				notes = append(notes, fmt.Sprintf("%s, %s: %s", r.Name, c, v.Detail))
			}
		}
		pass, total := 0, 0
		var failed []string
		for _, t := range r.Tests {
			if strings.Contains(t.Name, "/") {
				continue // subtests count with their parent
			}
			total++
			if t.Outcome == "PASS" {
				pass++
			} else {
				failed = append(failed, t.Name+" "+t.Outcome)
			}
		}
		status := fmt.Sprintf("%d/%d pass", pass, total)
		if r.TestsElsewhere {
			status = "in go test ./..."
		}
		if len(failed) > 0 {
			status += " (" + strings.Join(failed, ", ") + ")"
		}
		if r.Err != nil && len(failed) == 0 {
			status += " (error)"
		}
		fmt.Fprintf(&b, " %s |", status)
		if took {
			fmt.Fprintf(&b, " %v |", r.Took.Round(time.Second))
		}
		b.WriteString("\n")
		for _, f := range r.Caps.Refused {
			notes = append(notes, fmt.Sprintf("%s refused %s", r.Name, f))
		}
	}
	if len(notes) > 0 {
		b.WriteString("\n")
		for _, n := range notes {
			b.WriteString("- " + n + "\n")
		}
	}
	if took {
		for _, r := range rows {
			if r.Err != nil {
				fmt.Fprintf(&b, "\nkernel %s: %v\n", r.Name, r.Err)
			}
		}
	}
	return b.String()
}

// Block markers of the README's kernel table.
const (
	blockStart = "<!-- kernel-matrix:start (written by make test-kernels; do not edit) -->"
	blockEnd   = "<!-- kernel-matrix:end -->"
)

// ReplaceBlock returns doc with the text between the kernel-matrix markers
// replaced by table, and whether the markers were found.
func ReplaceBlock(doc, table string) (string, bool) {
	i := strings.Index(doc, blockStart)
	j := strings.Index(doc, blockEnd)
	if i < 0 || j < i {
		return doc, false
	}
	return doc[:i+len(blockStart)] + "\n" + table + doc[j:], true
}
