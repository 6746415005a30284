// Command shape measures the product's code (every package but
// internal/dev and e2e, tests and generated objects left out): the
// longest functions, the types with the most methods, what a caller of
// the shared types holds (exported methods, the embedded views'
// included), and how many files a type's methods spread over. With
// -write it writes those figures into docs/shape.md between its
// shape markers; TestShapeDocIsCurrent fails when they no longer hold.
//
//	go run ./internal/dev/shape [-n 12] [-write docs/shape.md] .
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"
)

func main() {
	top := flag.Int("n", 12, "how many functions and types to list")
	write := flag.String("write", "", "write the figures into this file between its shape markers")
	flag.Parse()
	root := flag.Arg(0)
	if root == "" {
		root = "."
	}
	c, err := measure(root)
	if err != nil {
		fmt.Fprintln(os.Stderr, "shape:", err)
		os.Exit(1)
	}
	if *write != "" {
		doc, err := os.ReadFile(*write)
		if err != nil {
			fmt.Fprintln(os.Stderr, "shape:", err)
			os.Exit(1)
		}
		next, ok := replaceBlock(string(doc), c.section())
		if !ok {
			fmt.Fprintf(os.Stderr, "shape: %s has no shape markers\n", *write)
			os.Exit(1)
		}
		if err := os.WriteFile(*write, []byte(next), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "shape:", err)
			os.Exit(1)
		}
		return
	}
	for _, f := range c.funcs[:min(*top, len(c.funcs))] {
		fmt.Printf("func %4d %s\n", f.n, f.name)
	}
	for _, t := range c.byMethods()[:min(*top, len(c.types))] {
		fmt.Printf("type %4d %s\n", len(c.types[t].methods), t)
	}
}

const (
	blockStart = "<!-- shape:start (go run ./internal/dev/shape -write docs/shape.md .; TestShapeDocIsCurrent holds it) -->"
	blockEnd   = "<!-- shape:end -->"
)

// replaceBlock returns doc with the text between the shape markers
// replaced by section.
func replaceBlock(doc, section string) (string, bool) {
	i, j := strings.Index(doc, blockStart), strings.Index(doc, blockEnd)
	if i < 0 || j < i {
		return doc, false
	}
	return doc[:i+len(blockStart)] + "\n" + section + doc[j:], true
}

// block returns the text between the shape markers.
func block(doc string) string {
	i, j := strings.Index(doc, blockStart), strings.Index(doc, blockEnd)
	if i < 0 || j < i {
		return ""
	}
	return doc[i+len(blockStart)+1 : j]
}
