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

// The limits TestShapeLimits holds. maxOffer is the table's whole
// surface, one lock's state in five parts: 36 methods since its doors
// went (a holder reached 41 through them); a type that would offer more
// splits its state. maxDeclared is the largest interface a consumer
// declares, the tracer collector's; the doors' adapters rebuilt
// interfaces of 13.
const (
	maxOwn      = 24
	maxOffer    = 36
	maxDeclared = 7
)

// TestShapeLimits: no type of the product has more than maxOwn methods
// of its own, nor offers more than maxOffer with the parts it embeds and
// the views its methods return, nor has its methods in four files or
// more; no interface declares more than maxDeclared methods; and no
// function is over 80 lines but the tracer collector's list of metrics.
func TestShapeLimits(t *testing.T) {
	c, err := measure("../../..")
	if err != nil {
		t.Fatal(err)
	}
	for name, tp := range c.types {
		if n := len(tp.methods); n > maxOwn {
			t.Errorf("%s has %d methods of its own: split off what only some callers need", name, n)
		}
		if n := len(c.offer(name)); n > maxOffer {
			t.Errorf("%s offers %d exported methods, its parts' and views' included: split its state", name, n)
		}
		if n := tp.spread(); n >= 4 {
			t.Errorf("%s has its methods in %d files: keep a type in three at most", name, n)
		}
	}
	for name, n := range c.ifaces {
		if n > maxDeclared {
			t.Errorf("%s declares %d methods: a consumer names the few it calls, an interface for each part", name, n)
		}
	}
	for _, f := range c.funcs {
		if f.n > 80 && f.name != "metrics.NewTracerCollector" {
			t.Errorf("%s is %d lines: over 80", f.name, f.n)
		}
	}
}
