package mutation

import (
	"strings"
	"testing"
)

func TestJudge(t *testing.T) {
	const rep = `{"files":[{"file_name":"classify.go","mutations":[
{"type":"CONDITIONALS_BOUNDARY","status":"KILLED","line":10,"column":5},
{"type":"CONDITIONALS_BOUNDARY","status":"LIVED","line":12,"column":7},
{"type":"ARITHMETIC_BASE","status":"NOT COVERED","line":20,"column":3},
{"type":"INCREMENT_DECREMENT","status":"TIMED OUT","line":30,"column":2},
{"type":"ARITHMETIC_BASE","status":"LIVED","line":40,"column":9}]},
{"file_name":"store.go","mutations":[{"type":"ARITHMETIC_BASE","status":"LIVED","line":1,"column":1}]}]}`
	ms, err := Read(Target{Name: "table", Pkg: "./table", Exclude: []string{`^store`}}, strings.NewReader(rep))
	if err != nil {
		t.Fatal(err)
	}
	eq, err := Equivalents(strings.NewReader("| mutant | why |\n|---|---|\n| `table/classify.go:40:9 ARITHMETIC_BASE` | the two sides are equal there |\n"))
	if err != nil {
		t.Fatal(err)
	}
	if eq["table/classify.go:40:9 ARITHMETIC_BASE"] != "the two sides are equal there" {
		t.Fatalf("equivalents: %v", eq)
	}
	scores, open := Judge(ms, eq)
	s := scores["table"]
	if s != (Score{Killed: 2, Lived: 2, NotCovered: 1, Explained: 1}) {
		t.Errorf("score %+v", s)
	}
	if s.Efficacy() != 50 || s.Caught() != 60 {
		t.Errorf("efficacy %.1f, caught %.1f; want 50 and 60", s.Efficacy(), s.Caught())
	}
	var keys []string
	for _, m := range open {
		keys = append(keys, m.Key())
	}
	if strings.Join(keys, ", ") != "table/classify.go:12:7 CONDITIONALS_BOUNDARY, table/classify.go:20:3 ARITHMETIC_BASE" {
		t.Errorf("open survivors: %v", keys)
	}
}

func TestMutate(t *testing.T) {
	src := []byte("package p\n\nfunc f(a, b int) bool {\n\tc := -a + b\n\tc++\n\tswitch {\n\tcase a < b:\n\t\treturn c == 1\n\t}\n\treturn a >= b\n}\n")
	for _, tc := range []struct {
		line, col int
		typ, want string
	}{
		{7, 9, "CONDITIONALS_BOUNDARY", "\tcase a <= b:"},
		{7, 9, "CONDITIONALS_NEGATION", "\tcase a >= b:"},
		{8, 12, "CONDITIONALS_NEGATION", "\t\treturn c != 1"},
		{4, 10, "ARITHMETIC_BASE", "\tc := -a - b"},
		{4, 7, "INVERT_NEGATIVES", "\tc := +a + b"},
		{5, 3, "INCREMENT_DECREMENT", "\tc--"},
		{10, 11, "CONDITIONALS_BOUNDARY", "\treturn a > b"},
	} {
		out, err := Mutate(src, tc.line, tc.col, tc.typ)
		if err != nil {
			t.Errorf("%d:%d %s: %v", tc.line, tc.col, tc.typ, err)
			continue
		}
		if got := strings.Split(string(out), "\n")[tc.line-1]; got != tc.want {
			t.Errorf("%d:%d %s: %q, want %q", tc.line, tc.col, tc.typ, got, tc.want)
		}
	}
	if _, err := Mutate(src, 4, 2, "ARITHMETIC_BASE"); err == nil {
		t.Error("mutated an identifier")
	}
}
