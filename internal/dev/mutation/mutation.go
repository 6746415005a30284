package mutation

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path"
	"regexp"
	"slices"
	"strings"
	"time"
)

// Gremlins is the mutation tool, pinned.
const Gremlins = "github.com/go-gremlins/gremlins/cmd/gremlins@v0.6.0"

// Target is one package's decision code: the package, and the files of
// it that are not (data structures, I/O, counters), as regexps of their
// path in the package.
type Target struct {
	Name    string // short name, and the report's file name
	Pkg     string // ./table
	Exclude []string
	Why     string // what is left out, and why
	// Rerun bounds one run of the package's tests on a mutant run again
	// alone: a few times their time on a loaded machine; past it, the
	// mutant hangs them.
	Rerun time.Duration
}

// Targets is the decision code: how entries are classed (table), how
// remediation picks and limits its actions (remediate), what ARP and NDP
// evidence says (monitor/evidence), and the per-class series of the
// metrics.
var Targets = []Target{
	{Name: "table", Pkg: "./table", Exclude: []string{`^(store|heap|mstime|stats|events|table)[._]`},
		Why: "the store, its heaps, clock and event plumbing are data structures, covered by their own property and allocation tests", Rerun: 30 * time.Second},
	{Name: "remediate", Pkg: "./remediate", Exclude: []string{`^(actor_linux|counters|manage_linux)\.go$`},
		Why: "the actor and the manage loop's netlink calls are I/O, covered by the e2e suite; counters are plumbing", Rerun: 2 * time.Minute},
	{Name: "evidence", Pkg: "./monitor/evidence", Exclude: []string{`^(listen_linux|listen_other|listeners|sink)\.go$`},
		Why: "the packet sockets and their readers (listeners.go) are I/O, covered by the e2e suite", Rerun: 30 * time.Second},
	{Name: "metrics", Pkg: "./metrics", Exclude: []string{`^connlimit/`, `^(collector|config|detection|ebpf|http|readiness|registry|remediation|sources)\.go$`},
		Why: "only the table's per-class series classify; the rest copy counters", Rerun: 30 * time.Second},
}

// Mutant is one mutation gremlins tried.
type Mutant struct {
	Target string // Target.Name
	File   string // path in the repository: table/classify.go
	Line   int
	Column int
	Type   string // CONDITIONALS_BOUNDARY, ...
	Status string // KILLED, LIVED, NOT COVERED, TIMED OUT, NOT VIABLE
}

// Key names a mutant as docs/mutants.md does: table/classify.go:120:5 CONDITIONALS_BOUNDARY.
func (m Mutant) Key() string { return fmt.Sprintf("%s:%d:%d %s", m.File, m.Line, m.Column, m.Type) }

// Survived reports whether no test killed it: it lived, or no test ran
// its code.
func (m Mutant) Survived() bool { return m.Status == "LIVED" || m.Status == "NOT COVERED" }

// report is the part of gremlins' JSON output read here.
type report struct {
	Files []struct {
		Name      string `json:"file_name"`
		Mutations []struct {
			Type   string `json:"type"`
			Status string `json:"status"`
			Line   int    `json:"line"`
			Column int    `json:"column"`
		} `json:"mutations"`
	} `json:"files"`
}

// Read decodes gremlins' JSON output for a target.
func Read(t Target, r io.Reader) ([]Mutant, error) {
	var rep report
	if err := json.NewDecoder(r).Decode(&rep); err != nil {
		return nil, fmt.Errorf("gremlins report of %s: %w", t.Pkg, err)
	}
	var ex []*regexp.Regexp
	for _, e := range t.Exclude {
		ex = append(ex, regexp.MustCompile(e))
	}
	var out []Mutant
	for _, f := range rep.Files {
		if slices.ContainsFunc(ex, func(re *regexp.Regexp) bool { return re.MatchString(f.Name) }) {
			continue // a report of the whole package: only its decision code counts
		}
		for _, m := range f.Mutations {
			out = append(out, Mutant{Target: t.Name, File: path.Join(strings.TrimPrefix(t.Pkg, "./"), f.Name), Line: m.Line,
				Column: m.Column, Type: m.Type, Status: m.Status})
		}
	}
	slices.SortFunc(out, func(a, b Mutant) int { return strings.Compare(a.sortKey(), b.sortKey()) })
	return out, nil
}

func (m Mutant) sortKey() string {
	return fmt.Sprintf("%s:%06d:%04d %s", m.File, m.Line, m.Column, m.Type)
}

// Score is a target's counts. Killed includes timed out: a mutant that
// makes a test hang was caught.
type Score struct {
	Killed, Lived, NotCovered, Explained int
}

// Efficacy is the share of mutants killed among those that ran.
func (s Score) Efficacy() float64 {
	if s.Killed+s.Lived == 0 {
		return 0
	}
	return 100 * float64(s.Killed) / float64(s.Killed+s.Lived)
}

// Caught is the share of all mutants either killed or explained as
// equivalent.
func (s Score) Caught() float64 {
	n := s.Killed + s.Lived + s.NotCovered
	if n == 0 {
		return 0
	}
	return 100 * float64(s.Killed+s.Explained) / float64(n)
}

// Equivalents reads docs/mutants.md: each table row whose first cell is a
// mutant's key (in backquotes) names one that changes nothing the code
// promises, with the reason in the next cell.
func Equivalents(r io.Reader) (map[string]string, error) {
	out := map[string]string{}
	row := regexp.MustCompile("^\\|\\s*`([^`]+)`\\s*\\|\\s*([^|]*[^|\\s])\\s*\\|")
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		if m := row.FindStringSubmatch(sc.Text()); m != nil {
			out[m[1]] = m[2]
		}
	}
	return out, sc.Err()
}

// Judge scores the mutants and returns the survivors no reason explains.
func Judge(ms []Mutant, eq map[string]string) (map[string]Score, []Mutant) {
	scores := map[string]Score{}
	var open []Mutant
	for _, m := range ms {
		s := scores[m.Target]
		switch {
		case m.Status == "KILLED" || m.Status == "TIMED OUT":
			s.Killed++
		case m.Survived():
			if m.Status == "LIVED" {
				s.Lived++
			} else {
				s.NotCovered++
			}
			if _, ok := eq[m.Key()]; ok {
				s.Explained++
			} else {
				open = append(open, m)
			}
		}
		scores[m.Target] = s
	}
	return scores, open
}

// ReadFile is Read on a file.
func ReadFile(t Target, name string) ([]Mutant, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return Read(t, f)
}
