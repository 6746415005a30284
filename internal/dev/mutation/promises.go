package mutation

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
)

// The promise check. A sentence of the user's documents that promises
// behaviour (it says never, always, only, at most, within, refused,
// released, kept...) is tied to what holds it: a ledger rule whose
// "stated:" quotes part of it, or an entry of docs/promises.md that names
// the rule, or says why the sentence is no rule of the agent's (a kernel
// fact, a figure measured, a deployment step) and what holds it if
// anything does. TestPromisesTied fails on a promise tied to nothing: a
// sentence added without a rule is found before it lands.

// PromiseDocs are the documents whose promises are checked, from the
// module's root.
var PromiseDocs = []string{"README.md", "docs/running.md", "docs/deploying.md", "docs/detection.md",
	"docs/kernels.md", "docs/metrics.md", "docs/development.md", "docs/remediation.md", "docs/runbook.md"}

// promiseWords are the words that make a sentence a promise.
var promiseWords = regexp.MustCompile(`(?i)\b(never|always|only|at most|at least|no more than|within|cannot|refuse|refused|refuses|release|released|releases|kept|keeps)\b`)

// sentenceEnd splits a paragraph after a full stop, a question or an
// exclamation mark followed by what starts a sentence.
var sentenceEnd = regexp.MustCompile("[.!?][)\"]?\\s+[A-Z`(*\"]")

// Sentence is one sentence of a document, with the line its paragraph
// starts on.
type Sentence struct {
	File string
	Line int
	Text string // its words, whitespace collapsed
}

func (s Sentence) String() string { return fmt.Sprintf("%s:%d: %s", s.File, s.Line, s.Text) }

// Sentences splits a Markdown document into its prose sentences: fenced
// code, HTML comments, generated regions, headings and tables are left
// out; each paragraph
// and list item is split at its sentence ends.
func Sentences(file string, r io.Reader) ([]Sentence, error) {
	var out []Sentence
	var para []string
	start := 0
	flush := func() {
		if len(para) == 0 {
			return
		}
		out = append(out, split(file, start, strings.Join(strings.Fields(strings.Join(para, " ")), " "))...)
		para = nil
	}
	fence, comment, generated := false, false, false
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for n := 1; sc.Scan(); n++ {
		l := sc.Text()
		t := strings.TrimSpace(l)
		switch {
		case strings.HasPrefix(t, "```"):
			flush()
			fence = !fence
			continue
		case fence:
			continue
		case comment:
			if strings.Contains(t, "-->") {
				comment = false
			}
			continue
		case generated:
			if strings.HasPrefix(t, "<!--") && strings.Contains(t, ":end") {
				generated = false
			}
			continue
		case strings.HasPrefix(t, "<!--"):
			flush()
			// A generated region (<!-- name:start ... --> to
			// <!-- name:end -->) says what a program wrote: no promise
			// of anyone's.
			generated = strings.Contains(t, ":start")
			comment = !strings.Contains(t, "-->")
			continue
		case t == "", strings.HasPrefix(t, "#"), strings.HasPrefix(t, "|"):
			flush()
			continue
		case strings.HasPrefix(t, "- "), strings.HasPrefix(t, "* "), listNumber.MatchString(t):
			flush()
		}
		if len(para) == 0 {
			start = n
		}
		para = append(para, t)
	}
	flush()
	return out, sc.Err()
}

var listNumber = regexp.MustCompile(`^\d+\. `)

// split cuts a paragraph into sentences.
func split(file string, line int, p string) []Sentence {
	var out []Sentence
	for p != "" {
		loc := sentenceEnd.FindStringIndex(p)
		if loc == nil {
			out = append(out, Sentence{file, line, p})
			break
		}
		cut := loc[1] - 1 // the next sentence's first character
		out = append(out, Sentence{file, line, strings.TrimSpace(p[:cut])})
		p = p[cut:]
	}
	return out
}

// Promises are the sentences that promise behaviour.
func Promises(ss []Sentence) []Sentence {
	var out []Sentence
	for _, s := range ss {
		if promiseWords.MatchString(s.Text) {
			out = append(out, s)
		}
	}
	return out
}

// Tie is an entry of docs/promises.md: a quote from one or more promise
// sentences, and the rule that holds it or why it is no rule.
type Tie struct {
	Quote  string
	Rule   string // a ledger rule's ID, or ""
	NoRule string // why the sentence is no rule of the agent's
	// NotYet: a behaviour no ledger rule guards yet, and what holds it
	// instead, if anything: a rule still to write.
	NotYet string
	Line   int
}

var tieLine = regexp.MustCompile(`^- "(.+)": (?:rule ([a-z0-9-]+)|not a rule: (.+)|not yet a rule: (.+))$`)

// ParseTies reads docs/promises.md: every line that starts with `- "` is
// a tie, `- "QUOTE": rule ID`, `- "QUOTE": not a rule: WHY` or
// `- "QUOTE": not yet a rule: WHAT HOLDS IT`.
func ParseTies(r io.Reader) ([]Tie, error) {
	var ties []Tie
	var errs []error
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		l := strings.TrimSpace(sc.Text())
		if !strings.HasPrefix(l, `- "`) {
			continue
		}
		m := tieLine.FindStringSubmatch(l)
		if m == nil {
			errs = append(errs, fmt.Errorf("line %d: want - \"QUOTE\": rule ID, - \"QUOTE\": not a rule: WHY, or - \"QUOTE\": not yet a rule: WHAT HOLDS IT", n))
			continue
		}
		ties = append(ties, Tie{Quote: strings.Join(strings.Fields(m[1]), " "), Rule: m[2], NoRule: m[3], NotYet: m[4], Line: n})
	}
	if err := sc.Err(); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return nil, joinErrs(errs)
	}
	return ties, nil
}

// statedQuotes are the parts of the rules' "stated:" quotes long enough
// to name a sentence (a quote's parts are cut at "...").
func statedQuotes(rules []Rule) []string {
	var out []string
	quoted := regexp.MustCompile(`"([^"]+)"`)
	for _, r := range rules {
		for _, m := range quoted.FindAllStringSubmatch(r.Stated, -1) {
			for _, part := range strings.Split(m[1], "...") {
				if part = strings.Join(strings.Fields(part), " "); len(part) >= 12 {
					out = append(out, part)
				}
			}
		}
	}
	return out
}

// Untied returns the promises that neither a rule's stated quote nor a
// tie names, and the ties that name no promise (or a rule the ledger
// does not hold): both fail the check.
func Untied(promises []Sentence, rules []Rule, ties []Tie) (untied []Sentence, stale []string) {
	quotes := statedQuotes(rules)
	ids := map[string]bool{}
	for _, r := range rules {
		ids[r.ID] = true
	}
	used := make([]bool, len(ties))
	for _, s := range promises {
		tied := false
		for _, q := range quotes {
			if strings.Contains(s.Text, q) {
				tied = true
				break
			}
		}
		for i, t := range ties {
			if strings.Contains(s.Text, t.Quote) {
				tied, used[i] = true, true
			}
		}
		if !tied {
			untied = append(untied, s)
		}
	}
	for i, t := range ties {
		switch {
		case !used[i]:
			stale = append(stale, fmt.Sprintf("line %d: %q is in no promise of %s", t.Line, t.Quote, strings.Join(PromiseDocs, ", ")))
		case t.Rule != "" && !ids[t.Rule]:
			stale = append(stale, fmt.Sprintf("line %d: %q names rule %s, which the ledger does not hold", t.Line, t.Quote, t.Rule))
		}
	}
	return untied, stale
}

// CheckPromises runs the check on the tree at root: the promises of
// PromiseDocs against docs/rules.md and docs/promises.md.
func CheckPromises(root string) (promises, untied []Sentence, ties []Tie, stale []string, err error) {
	rules, err := ReadRules(root + "/docs/rules.md")
	if err != nil {
		return nil, nil, nil, nil, err
	}
	f, err := os.Open(root + "/docs/promises.md")
	if err != nil {
		return nil, nil, nil, nil, err
	}
	defer f.Close()
	ties, err = ParseTies(f)
	if err != nil {
		return nil, nil, nil, nil, fmt.Errorf("docs/promises.md: %w", err)
	}
	for _, doc := range PromiseDocs {
		d, err := os.Open(root + "/" + doc)
		if err != nil {
			return nil, nil, nil, nil, err
		}
		ss, err := Sentences(doc, d)
		d.Close()
		if err != nil {
			return nil, nil, nil, nil, err
		}
		promises = append(promises, Promises(ss)...)
	}
	untied, stale = Untied(promises, rules, ties)
	return promises, untied, ties, stale, nil
}
