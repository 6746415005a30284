// Command callpath writes down the path a call takes through a package's
// own code, as a reader follows it: from a function, each call to a
// function or method the package declares, depth first, in the order
// the calls appear, each function once. It prints one line per function
// (its file) and counts the files entered, the stays (a run of lines in
// one file) and the returns to a file already left. Calls are resolved
// by go/types, statically: a call through an interface or a func value
// is not followed.
//
//	go run ./internal/dev/callpath ./table core.apply
package main

import (
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"os"
	"path/filepath"
	"strings"
)

type fn struct {
	name  string // Recv.Name or Name
	file  string
	calls []*types.Func // in order
}

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: callpath DIR [Recv.]Func")
		os.Exit(2)
	}
	dir, start := os.Args[1], os.Args[2]
	fset := token.NewFileSet()
	// The package's Linux build: no tests, no _other.go files.
	paths, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		fatal(err)
	}
	var files []*ast.File
	for _, p := range paths {
		if strings.HasSuffix(p, "_test.go") || strings.HasSuffix(p, "_other.go") {
			continue
		}
		f, err := parser.ParseFile(fset, p, nil, 0)
		if err != nil {
			fatal(err)
		}
		files = append(files, f)
	}
	info := &types.Info{Uses: map[*ast.Ident]types.Object{}, Defs: map[*ast.Ident]types.Object{}}
	conf := types.Config{Importer: importer.ForCompiler(fset, "source", nil)}
	if _, err := conf.Check(dir, fset, files, info); err != nil {
		fatal(err)
	}
	decls := map[*types.Func]*fn{}
	byName := map[string]*fn{}
	for _, f := range files {
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			obj, _ := info.Defs[fd.Name].(*types.Func)
			name := fd.Name.Name
			if fd.Recv != nil && len(fd.Recv.List) == 1 {
				name = recvName(fd.Recv.List[0].Type) + "." + name
			}
			x := &fn{name: name, file: filepath.Base(fset.Position(fd.Pos()).Filename)}
			ast.Inspect(fd.Body, func(n ast.Node) bool {
				c, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				var id *ast.Ident
				switch f := c.Fun.(type) {
				case *ast.Ident:
					id = f
				case *ast.SelectorExpr:
					id = f.Sel
				case *ast.IndexExpr: // a generic function
					if s, ok := f.X.(*ast.Ident); ok {
						id = s
					}
				}
				if id != nil {
					if g, ok := info.Uses[id].(*types.Func); ok {
						x.calls = append(x.calls, g.Origin())
					}
				}
				return true
			})
			decls[obj] = x
			byName[name] = x
		}
	}
	root := byName[start]
	if root == nil {
		fatal(fmt.Errorf("no function %s in %s", start, dir))
	}
	seen := map[*fn]bool{}
	var path []string // the file of each step, in order
	var walk func(f *fn, depth int)
	walk = func(f *fn, depth int) {
		seen[f] = true
		fmt.Printf("%s%s  (%s)\n", strings.Repeat("  ", depth), f.name, f.file)
		path = append(path, f.file)
		for _, c := range f.calls {
			if g := decls[c]; g != nil && !seen[g] {
				walk(g, depth+1)
				path = append(path, f.file) // back in the caller
			}
		}
	}
	walk(root, 0)
	stays, returns := 0, 0
	left, entered := map[string]bool{}, map[string]bool{}
	prev := ""
	for _, f := range path {
		if f == prev {
			continue
		}
		stays++
		if left[f] {
			returns++
		}
		if prev != "" {
			left[prev] = true
		}
		entered[f] = true
		prev = f
	}
	fmt.Printf("functions %d, files %d, stays %d, returns to a file already left %d\n", len(seen), len(entered), stays, returns)
}

func recvName(e ast.Expr) string {
	switch t := e.(type) {
	case *ast.StarExpr:
		return recvName(t.X)
	case *ast.Ident:
		return t.Name
	case *ast.IndexExpr:
		return recvName(t.X)
	}
	return "?"
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "callpath:", err)
	os.Exit(1)
}
