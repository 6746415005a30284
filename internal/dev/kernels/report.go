package kernels

import (
	"fmt"
	"regexp"
	"slices"
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
	Caps          Caps // as root
	// Deployed are the probes as the agent runs in each deployment
	// (daemonset, systemd): what it gets there.
	Deployed map[string]Caps
	Tests    []TestResult
	Took     time.Duration
	Boot     time.Duration // from qemu's start to the first step
	Steps    []StepTime
	Err      error
	// TestsElsewhere: the contract tests ran in the same make test's go
	// test ./..., not here.
	TestsElsewhere bool
	// Stuck and Repaired are how long the moved host behind the TC
	// forwarder took to be stuck after it moved, and its traffic to come
	// back once remediation was switched on (MovedTimes), "" when the
	// test did not say.
	Stuck, Repaired string
	// Blind is the blind control's outcome where it ran (BlindStep): the
	// agent with its counting refused must fail the moved host.
	Blind string
}

// BlindStep names the step that runs the moved host with the tracer's
// counting refused (--debug.refuse-programs): it must fail, or the row's
// passes prove nothing about the tracer.
const BlindStep = "blind"

// BlindPrograms are the programs the blind control refuses: every
// program that counts traffic past a neighbour entry (fentry on the
// redirect helpers, the transmit tracepoint) or records the source MACs
// that arrive.
const BlindPrograms = "fe_skb_fib,fe_redirect,fe_redirect_neigh,fe_redirect_peer,fe_xdp_fib,fe_xdp_redirect,fe_dev_map_redirect,fe_dev_hash_map_redirect,fe_xdp_redirect_map,tr_xmit,tr_source"

// BlindTest is the test the blind control runs, and what its failure
// must say: the moved host never became stuck.
const (
	BlindTest = "TestPrecisionMoved"
	blindMiss = "waiting for moved host: the entry stuck"
)

// BlindOutcome reads the blind control's output and exit status: "fails,
// as it must" when the moved host was never found stuck; an error when
// it passed (the row cannot tell a working tracer from none) or failed
// for another reason.
func BlindOutcome(out string, rc string) (string, error) {
	switch {
	case rc == "0":
		return "", fmt.Errorf("the blind control passed: %s found the moved host with the tracer's counting refused (%s), so the contract tests cannot tell a counting tracer from none", BlindTest, BlindPrograms)
	case strings.Contains(out, blindMiss):
		return "fails (never stuck)", nil
	}
	return "", fmt.Errorf("the blind control failed, but not by missing the moved host (exit %s): it shows nothing", rc)
}

// movedRE is the line TestBypassedHostFoundAndRepaired logs behind the
// TC forwarder.
var movedRE = regexp.MustCompile(`tc forwarder: both stuck (\S+) after the move; traffic back (\S+) after remediation on`)

// MovedTimes reads the moved host's time to stuck and to repair from the
// e2e suite's output.
func MovedTimes(out string) (stuck, repaired string) {
	if m := movedRE.FindStringSubmatch(out); m != nil {
		return m[1], m[2]
	}
	return "", ""
}

// StepTime is how long one step took in one kernel.
type StepTime struct {
	Name string
	Took time.Duration
}

// ProbeAs are the privileges the matrix probes each kernel with: root,
// then as the DaemonSet and the systemd unit run the agent.
var ProbeAs = []string{"root", "daemonset", "systemd"}

// ProbeStep names the probe step of one privilege set.
func ProbeStep(as string) string {
	if as == "root" {
		return "probe"
	}
	return "probe-" + as
}

// ProbeOf says whether a step is a probe, and as whom.
func ProbeOf(step string) (string, bool) {
	for _, as := range ProbeAs {
		if ProbeStep(as) == step {
			return as, true
		}
	}
	return "", false
}

// CapsDiff says what a deployment's probe got that differs from root's,
// or "" when it got the same: every capability's value, and the same
// programs refused.
func CapsDiff(root, deployed Caps) string {
	got := map[string]Capability{}
	for _, c := range deployed.Capabilities {
		got[c.Name] = c
	}
	var diffs []string
	for _, c := range root.Capabilities {
		d, ok := got[c.Name]
		switch {
		case !ok:
			diffs = append(diffs, c.Name+" missing")
		case d.Value != c.Value:
			diffs = append(diffs, fmt.Sprintf("%s %s instead of %s (%s)", c.Name, d.Value, c.Value, d.Detail))
		}
	}
	for _, c := range deployed.Capabilities {
		if !hasCap(root, c.Name) {
			diffs = append(diffs, fmt.Sprintf("%s %s (%s), not there as root", c.Name, c.Value, c.Detail))
		}
	}
	if strings.Join(root.Refused, "\n") != strings.Join(deployed.Refused, "\n") {
		diffs = append(diffs, fmt.Sprintf("refused %v instead of %v", deployed.Refused, root.Refused))
	}
	return strings.Join(diffs, "; ")
}

func hasCap(c Caps, name string) bool {
	for _, x := range c.Capabilities {
		if x.Name == name {
			return true
		}
	}
	return false
}

// Timings renders where the matrix spent its time: building, then per
// kernel the boot, each step and the whole run.
func Timings(rows []Row, built time.Duration) string {
	var b strings.Builder
	fmt.Fprintf(&b, "where the time went (building the binaries: %v)\n", built.Round(time.Second))
	for _, r := range rows {
		fmt.Fprintf(&b, "- %s: %v in all", r.Name, r.Took.Round(time.Second))
		if r.Boot > 0 {
			fmt.Fprintf(&b, "; boot %v", r.Boot)
		}
		for _, st := range r.Steps {
			fmt.Fprintf(&b, "; %s %v", st.Name, st.Took.Round(100*time.Millisecond))
		}
		b.WriteString("\n")
	}
	return b.String()
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
	b.WriteString(" as deployed | contract tests | moved host: stuck, repaired | blind control |")
	if took {
		b.WriteString(" took |")
	}
	b.WriteString("\n|---|---|")
	for range cols {
		b.WriteString("---|")
	}
	b.WriteString("---|---|---|---|")
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
		fmt.Fprintf(&b, " %s |", deployedCell(r))
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
		moved := "-"
		if r.Stuck != "" {
			moved = r.Stuck + ", " + r.Repaired
		}
		blind := r.Blind
		if blind == "" {
			blind = "-"
		}
		fmt.Fprintf(&b, " %s | %s |", moved, blind)
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

// deployedCell says whether the agent gets under each deployment's
// privileges what it gets as root.
func deployedCell(r Row) string {
	var same, less []string
	for _, as := range ProbeAs[1:] {
		caps, ok := r.Deployed[as]
		switch {
		case !ok:
			continue
		case CapsDiff(r.Caps, caps) == "":
			same = append(same, as)
		default:
			less = append(less, as)
		}
	}
	switch {
	case len(same) == 0 && len(less) == 0:
		return "?"
	case len(less) == 0:
		return "same as root (" + strings.Join(same, ", ") + ")"
	}
	return "less as " + strings.Join(less, ", ")
}

// Block markers of the README's kernel table.
const (
	blockStart = "<!-- kernel-matrix:start (written by make kernels-readme from the last run; do not edit) -->"
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

// rowKey is the kernel a table line is of: its first cell, with the
// newest series' "(newest)" read as Newest.
func rowKey(line string) string {
	cells := strings.Split(line, "|")
	if len(cells) < 2 {
		return ""
	}
	name := strings.TrimSpace(cells[1])
	if strings.HasSuffix(name, " (newest)") {
		return Newest
	}
	return name
}

// noteKey is the kernel a note under the table is of: "- 5.10, managed:
// ..." or "- 5.10 refused ...".
func noteKey(line string) string {
	f := strings.Fields(strings.TrimPrefix(line, "- "))
	if len(f) == 0 {
		return ""
	}
	return strings.TrimSuffix(f[0], ",")
}

// MergeTable is table (this run's) with the rows and notes of old (the
// README's) for the kernels this run did not boot, those without a row
// in table, so that make test and the target that boots the other
// kernels each keep the other's rows. A row of another layout (the
// columns changed) is dropped, not misplaced. Rows follow Debian's
// order, the host last.
func MergeTable(old, table string) string {
	newHeader, rows, notes := splitTable(table)
	oldHeader, oldRows, oldNotes := splitTable(old)
	if strings.Join(oldHeader, "\n") == strings.Join(newHeader, "\n") {
		for k, ls := range oldRows {
			if rows[k] == nil { // this run did not boot it
				rows[k] = ls
				notes[k] = oldNotes[k]
			}
		}
	}
	var b strings.Builder
	b.WriteString(strings.Join(newHeader, "\n") + "\n")
	for _, k := range rowOrder() {
		for _, l := range rows[k] {
			b.WriteString(l + "\n")
		}
	}
	var ns []string
	for _, k := range rowOrder() {
		ns = append(ns, notes[k]...)
	}
	if len(ns) > 0 {
		b.WriteString("\n" + strings.Join(ns, "\n") + "\n")
	}
	return b.String()
}

// splitTable reads a kernel table: its header lines, and its rows and
// notes by kernel (rowKey, noteKey).
func splitTable(t string) (header []string, rows, notes map[string][]string) {
	rows, notes = map[string][]string{}, map[string][]string{}
	for _, l := range strings.Split(t, "\n") {
		switch {
		case strings.HasPrefix(l, "| kernel |"), strings.HasPrefix(l, "|---"):
			header = append(header, l)
		case strings.HasPrefix(l, "| "):
			rows[rowKey(l)] = append(rows[rowKey(l)], l)
		case strings.HasPrefix(l, "- "):
			notes[noteKey(l)] = append(notes[noteKey(l)], l)
		}
	}
	return header, rows, notes
}

// rowOrder is the order of a table's rows: Debian's, the host last.
func rowOrder() []string { return append(Names(), "host") }

// Block returns the text between the kernel-matrix markers of doc.
func Block(doc string) string {
	i := strings.Index(doc, blockStart)
	j := strings.Index(doc, blockEnd)
	if i < 0 || j < i {
		return ""
	}
	return doc[i+len(blockStart) : j]
}

// measured are the columns a run measures rather than finds: they differ
// from run to run, and a README table is not out of date for them.
var measured = []string{"moved host: stuck, repaired"}

// FactsDiffer compares two tables (the README's and a run's) but for the
// measured columns and the host's release, and returns the kernels whose rows or notes differ,
// in the tables' order ("layout" when the columns differ); none when
// they say the same.
func FactsDiffer(readme, run string) []string {
	rh, rrows, rnotes := splitTable(readme)
	nh, nrows, nnotes := splitTable(run)
	if strings.Join(rh, "\n") != strings.Join(nh, "\n") {
		return []string{"layout"}
	}
	var mask []int
	release := -1
	if len(nh) > 0 {
		for i, c := range strings.Split(nh[0], "|") {
			if slices.Contains(measured, strings.TrimSpace(c)) {
				mask = append(mask, i)
			}
			if strings.TrimSpace(c) == "release" {
				release = i
			}
		}
	}
	facts := func(k string, ls []string) string {
		var b strings.Builder
		for _, l := range ls {
			cells := strings.Split(l, "|")
			for _, i := range mask {
				if i < len(cells) {
					cells[i] = ""
				}
			}
			// The host's release is the machine's build (one kind of
			// machine runs builds 6.18.44-fc-v1272 and -v1300): what it
			// gives is its facts, not its name. A guest's is the Debian
			// package the matrix fetched, a fact.
			if k == "host" && release >= 0 && release < len(cells) {
				cells[release] = ""
			}
			b.WriteString(strings.Join(cells, "|") + "\n")
		}
		return b.String()
	}
	var out []string
	for _, k := range rowOrder() {
		if facts(k, rrows[k]) != facts(k, nrows[k]) || !slices.Equal(rnotes[k], nnotes[k]) {
			out = append(out, k)
		}
	}
	return out
}
