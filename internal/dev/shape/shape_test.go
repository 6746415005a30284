package main

import (
	"os"
	"testing"
)

// TestShapeDocIsCurrent: docs/shape.md's generated figures are the
// code's as it is: a change that moves them writes them again (go run
// ./internal/dev/shape -write docs/shape.md .).
func TestShapeDocIsCurrent(t *testing.T) {
	c, err := measure("../../..")
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile("../../../docs/shape.md")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := block(string(doc)), c.section(); got != want {
		t.Errorf("docs/shape.md's figures are not the code's: run go run ./internal/dev/shape -write docs/shape.md .\nthe file has:\n%s\nthe code gives:\n%s", got, want)
	}
}

// TestShapeLimits: no type of the product has 25 methods of its own or
// more, nor offers 25 or more with the views it embeds, nor has its
// methods in four files or more; and no function is over 80 lines but
// the tracer collector's list of metrics.
func TestShapeLimits(t *testing.T) {
	c, err := measure("../../..")
	if err != nil {
		t.Fatal(err)
	}
	for name, tp := range c.types {
		if n := len(tp.methods); n >= 25 {
			t.Errorf("%s has %d methods of its own: split off what only some callers need", name, n)
		}
		if n := len(c.offer(name)); n >= 25 {
			t.Errorf("%s offers %d exported methods, its embedded views' included: hand callers a view, not the whole", name, n)
		}
		if n := tp.spread(); n >= 4 {
			t.Errorf("%s has its methods in %d files: keep a type in three at most", name, n)
		}
	}
	for _, f := range c.funcs {
		if f.n > 80 && f.name != "metrics.NewTracerCollector" {
			t.Errorf("%s is %d lines: over 80", f.name, f.n)
		}
	}
}
