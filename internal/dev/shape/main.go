// Command shape lists the longest functions and the types with the most
// methods of the product's code (every package but internal/dev and e2e,
// tests and generated objects left out): the figures the layout's
// issue holds the code to (no type over 25 methods, no function over 80
// lines, in the table).
//
//	go run ./internal/dev/shape [-n 12] .
package main

import (
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

func main() {
	top := flag.Int("n", 12, "how many functions and types to list")
	flag.Parse()
	root := flag.Arg(0)
	if root == "" {
		root = "."
	}
	fset := token.NewFileSet()
	type fl struct {
		name  string
		lines int
	}
	var funcs []fl
	methods := map[string]int{}
	err := filepath.Walk(root, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		if fi.IsDir() && p != root && (fi.Name() == "dev" || fi.Name() == "e2e" || fi.Name() == "testdata" || strings.HasPrefix(fi.Name(), ".")) {
			return filepath.SkipDir
		}
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") || strings.HasSuffix(p, "_bpfel.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, 0)
		if err != nil {
			return err
		}
		dir := filepath.Dir(p)
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			n := fset.Position(fd.End()).Line - fset.Position(fd.Pos()).Line + 1
			name := dir + ":" + fd.Name.Name
			if fd.Recv != nil {
				t := fd.Recv.List[0].Type
				if s, ok := t.(*ast.StarExpr); ok {
					t = s.X
				}
				if ix, ok := t.(*ast.IndexExpr); ok {
					t = ix.X
				}
				if id, ok := t.(*ast.Ident); ok {
					methods[dir+":"+id.Name]++
					name = dir + ":" + id.Name + "." + fd.Name.Name
				}
			}
			funcs = append(funcs, fl{name, n})
		}
		return nil
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "shape:", err)
		os.Exit(1)
	}
	sort.Slice(funcs, func(i, j int) bool { return funcs[i].lines > funcs[j].lines })
	for _, f := range funcs[:min(*top, len(funcs))] {
		fmt.Printf("func %4d %s\n", f.lines, f.name)
	}
	var ts []fl
	for k, v := range methods {
		ts = append(ts, fl{k, v})
	}
	sort.Slice(ts, func(i, j int) bool { return ts[i].lines > ts[j].lines })
	for _, t := range ts[:min(*top, len(ts))] {
		fmt.Printf("type %4d %s\n", t.lines, t.name)
	}
}
