package mutation

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestPromisesTied: every promise of the user's documents is tied to a
// ledger rule or to docs/promises.md, and every line there ties a
// promise that is still written.
func TestPromisesTied(t *testing.T) {
	promises, untied, ties, stale, err := CheckPromises(filepath.Join("..", "..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if len(promises) < 100 {
		t.Fatalf("only %d promises found in %s: the documents were not read", len(promises), strings.Join(PromiseDocs, ", "))
	}
	for _, s := range untied {
		t.Errorf("a promise tied to no rule: %s\n  (write its rule in docs/rules.md, or tie it in docs/promises.md: - \"QUOTE\": rule ID, - \"QUOTE\": not a rule: WHY, or - \"QUOTE\": not yet a rule: WHAT HOLDS IT)", s)
	}
	for _, s := range stale {
		t.Errorf("docs/promises.md %s", s)
	}
	notYet := 0
	for _, tie := range ties {
		if tie.NotYet != "" {
			notYet++
		}
	}
	t.Logf("%d promises: %d tied by docs/promises.md, %d of them rules not yet written", len(promises), len(ties), notYet)
}

// TestPromiseCheckFindsTheUntied: a promise added to a document without
// a rule or a tie is named with its line; a tie that quotes no promise,
// or names a rule the ledger does not hold, is named too; what is not a
// promise (code, tables, generated regions, sentences without a promise
// word) is not asked for a tie.
func TestPromiseCheckFindsTheUntied(t *testing.T) {
	const doc = "# Title\n\nThe agent watches tables. It never forgets a MAC it saw.\n" +
		"Its probes go out\nat most once a second.\n\n" +
		"```\nnever in code\n```\n\n| a | never in a table |\n\n" +
		"<!-- x:start -->\nA generated line that never ends.\n<!-- x:end -->\n\n" +
		"- A list item kept as said.\n"
	ss, err := Sentences("DOC.md", strings.NewReader(doc))
	if err != nil {
		t.Fatal(err)
	}
	promises := Promises(ss)
	var got []string
	for _, p := range promises {
		got = append(got, p.String())
	}
	want := []string{"DOC.md:3: It never forgets a MAC it saw.", "DOC.md:3: Its probes go out at most once a second.", "DOC.md:17: - A list item kept as said."}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("promises:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	rules := []Rule{{ID: "probe-rate", Stated: `DOC ("at most once a second")`}}
	ties, err := ParseTies(strings.NewReader("- \"kept as said\": not a rule: a list\n- \"a sentence gone\": not a rule: old\n- \"never forgets\": rule no-such-rule\n"))
	if err != nil {
		t.Fatal(err)
	}
	untied, stale := Untied(promises, rules, ties[:1])
	if len(untied) != 1 || untied[0].Text != "It never forgets a MAC it saw." || len(stale) != 0 {
		t.Errorf("a promise added without a rule: untied %v, stale %v; want the sentence named alone", untied, stale)
	}
	_, stale = Untied(promises, rules, ties)
	if len(stale) != 2 || !strings.Contains(stale[0], `"a sentence gone" is in no promise`) || !strings.Contains(stale[1], "names rule no-such-rule, which the ledger does not hold") {
		t.Errorf("stale ties: %q, want the one quoting nothing and the one naming no rule", stale)
	}
	if _, err := ParseTies(strings.NewReader("- \"a quote\" because\n")); err == nil || !strings.Contains(err.Error(), "line 1") {
		t.Errorf("a malformed tie: %v, want its line named", err)
	}
}
