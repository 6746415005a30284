package main

import (
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/neighwatch/neighwatch/internal/control"
	"github.com/neighwatch/neighwatch/table"
)

var backticked = regexp.MustCompile("`([^`]+)`")

// readmeTable returns the names in the first column of the docs/running.md table
// whose header row is header (e.g. "| kind | meaning |"), in order.
func readmeTable(t *testing.T, header string) []string {
	t.Helper()
	b, err := os.ReadFile("../../docs/running.md")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(b), "\n")
	i := slices.Index(lines, header)
	if i < 0 {
		t.Fatalf("docs/running.md has no table headed %q", header)
	}
	var out []string
	for _, l := range lines[i+2:] { // after the header and the |---| row
		if !strings.HasPrefix(l, "|") {
			break
		}
		for _, m := range backticked.FindAllStringSubmatch(strings.Split(l, "|")[1], -1) {
			out = append(out, m[1])
		}
	}
	return out
}

// jsonFields lists the JSON names of a struct's fields, in order.
func jsonFields(v any) []string {
	var out []string
	rt := reflect.TypeOf(v)
	for i := range rt.NumField() {
		out = append(out, strings.Split(rt.Field(i).Tag.Get("json"), ",")[0])
	}
	return out
}

// TestREADMEMatchesCode: docs/running.md's lists of status fields, event
// fields, event kinds, causes and classes are the code's, in its order.
func TestREADMEMatchesCode(t *testing.T) {
	var kinds, causes, classes []string
	for _, k := range table.Kinds() {
		kinds = append(kinds, string(k))
	}
	for _, c := range table.Causes() {
		causes = append(causes, string(c))
	}
	for _, c := range table.Classes() {
		classes = append(classes, c.String())
	}
	for _, tc := range []struct {
		header string
		want   []string
	}{
		{"| field | meaning |", jsonFields(control.Entry{})},
		{"| kind | meaning |", kinds},
		{"| cause | meaning |", causes},
		{"| class | meaning |", classes},
	} {
		if got := readmeTable(t, tc.header); !slices.Equal(got, tc.want) {
			t.Errorf("docs/running.md table %q lists\n  %v\nthe code has\n  %v", tc.header, got, tc.want)
		}
	}
	// The second field table is the events'.
	b, _ := os.ReadFile("../../docs/running.md")
	rest := string(b)[strings.Index(string(b), "`events --json` prints one object per line"):]
	var got []string
	for _, l := range strings.Split(rest, "\n")[4:] {
		if !strings.HasPrefix(l, "|") {
			break
		}
		for _, m := range backticked.FindAllStringSubmatch(strings.Split(l, "|")[1], -1) {
			got = append(got, m[1])
		}
	}
	if want := jsonFields(control.Event{}); !slices.Equal(got, want) {
		t.Errorf("docs/running.md's events --json fields\n  %v\nthe code has\n  %v", got, want)
	}
}
