package main

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
)

// code is what measure found.
type code struct {
	funcs  []fn             // longest first
	types  map[string]*typ  // by "pkg.Name"
	files  map[string][]int // lines of each package's files, by package
	ifaces map[string]int   // methods an interface declares itself (not those it embeds), by "pkg.Name"
}

type fn struct {
	name string // pkg.Func or pkg.Recv.Func
	n    int    // lines
}

type typ struct {
	methods  map[string]string // name -> file
	embedded []string          // the package's types it embeds, in order
	views    []string          // the package's types its methods without arguments return
	view     bool              // a struct of one embedded field: a view of another type
}

// shared are the types a caller holds, whose offer the section counts.
var shared = []string{"table.Table", "bpf.Tracer", "remediate.Engine", "monitor/mirror.Mirror", "monitor/evidence.Watcher"}

// measure reads the product's Go files below root.
func measure(root string) (*code, error) {
	c := &code{types: map[string]*typ{}, files: map[string][]int{}, ifaces: map[string]int{}}
	fset := token.NewFileSet()
	typeOf := func(name string) *typ {
		t := c.types[name]
		if t == nil {
			t = &typ{methods: map[string]string{}}
			c.types[name] = t
		}
		return t
	}
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && p != root && (d.Name() == "dev" || d.Name() == "e2e" || d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) {
			return filepath.SkipDir
		}
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") || strings.HasSuffix(p, "_bpfel.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, 0)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, filepath.Dir(p))
		if err != nil {
			return err
		}
		pkg := filepath.ToSlash(rel)
		file := filepath.Base(p)
		c.files[pkg] = append(c.files[pkg], fset.Position(f.End()).Line)
		for _, decl := range f.Decls {
			switch d := decl.(type) {
			case *ast.GenDecl:
				for _, s := range d.Specs {
					ts, ok := s.(*ast.TypeSpec)
					if !ok {
						continue
					}
					if it, ok := ts.Type.(*ast.InterfaceType); ok {
						n := 0
						for _, m := range it.Methods.List {
							n += len(m.Names) // an embedded interface has none
						}
						c.ifaces[pkg+"."+ts.Name.Name] = n
						continue
					}
					st, ok := ts.Type.(*ast.StructType)
					if !ok {
						continue
					}
					t := typeOf(pkg + "." + ts.Name.Name)
					t.view = len(st.Fields.List) == 1 && len(st.Fields.List[0].Names) == 0
					for _, fld := range st.Fields.List {
						if len(fld.Names) == 0 {
							if id := baseIdent(fld.Type); id != "" {
								t.embedded = append(t.embedded, pkg+"."+id)
							}
						}
					}
				}
			case *ast.FuncDecl:
				if d.Body == nil {
					continue
				}
				n := fset.Position(d.End()).Line - fset.Position(d.Pos()).Line + 1
				name := pkg + "." + d.Name.Name
				if d.Recv != nil {
					if id := baseIdent(d.Recv.List[0].Type); id != "" {
						t := typeOf(pkg + "." + id)
						t.methods[d.Name.Name] = file
						name = pkg + "." + id + "." + d.Name.Name
						// What may be a view: no arguments, one result,
						// a type of the package; offer counts those that
						// are (a door hands out more methods).
						if r := d.Type.Results; d.Type.Params.NumFields() == 0 && r.NumFields() == 1 && ast.IsExported(d.Name.Name) {
							if v := baseIdent(r.List[0].Type); v != "" && ast.IsExported(v) {
								t.views = append(t.views, pkg+"."+v)
							}
						}
					}
				}
				c.funcs = append(c.funcs, fn{name, n})
			}
		}
		return nil
	})
	sort.Slice(c.funcs, func(i, j int) bool {
		if c.funcs[i].n != c.funcs[j].n {
			return c.funcs[i].n > c.funcs[j].n
		}
		return c.funcs[i].name < c.funcs[j].name
	})
	return c, err
}

// baseIdent is the name of a receiver's or an embedded field's type:
// T, *T, T[P].
func baseIdent(e ast.Expr) string {
	if s, ok := e.(*ast.StarExpr); ok {
		e = s.X
	}
	if ix, ok := e.(*ast.IndexExpr); ok {
		e = ix.X
	}
	if id, ok := e.(*ast.Ident); ok {
		return id.Name
	}
	return ""
}

// byMethods lists the types, the most methods of their own first.
func (c *code) byMethods() []string {
	return mostFirst(c.types, func(t *typ) int { return len(t.methods) })
}

// byDeclared lists the interfaces, the most methods declared in them
// first: what a consumer says it calls. An interface made only of
// others (a constructor's whole, feed.Table) declares none.
func (c *code) byDeclared() []string {
	return mostFirst(c.ifaces, func(n int) int { return n })
}

// mostFirst lists m's names, the largest count first, then by name.
func mostFirst[V any](m map[string]V, count func(V) int) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := count(m[out[i]]), count(m[out[j]])
		if a != b {
			return a > b
		}
		return out[i] < out[j]
	})
	return out
}

// offer is the exported methods a holder of name can call: its own, and
// those its embedded types promote (the shallowest of a name wins).
func (c *code) offer(name string) []string {
	seen := map[string]bool{}
	var out []string
	level := []string{name}
	visited := map[string]bool{}
	for len(level) > 0 {
		var next []string
		for _, tn := range level {
			t := c.types[tn]
			if t == nil || visited[tn] {
				continue
			}
			visited[tn] = true
			for m := range t.methods {
				if ast.IsExported(m) && !seen[m] {
					seen[m] = true
					out = append(out, m)
				}
			}
			next = append(next, t.embedded...)
			for _, v := range t.views {
				if vt := c.types[v]; vt != nil && vt.view {
					next = append(next, v)
				}
			}
		}
		level = next
	}
	sort.Strings(out)
	return out
}

// spread is the files a type's methods are declared in.
func (t *typ) spread() int {
	var fs []string
	for _, f := range t.methods {
		if !slices.Contains(fs, f) {
			fs = append(fs, f)
		}
	}
	return len(fs)
}

// section is docs/shape.md's generated part.
func (c *code) section() string {
	var b strings.Builder
	list := func(items []string) string {
		if len(items) == 0 {
			return "none"
		}
		return strings.Join(items, ", ")
	}
	var most []string
	for _, t := range c.byMethods()[:6] {
		most = append(most, fmt.Sprintf("`%s` %d", t, len(c.types[t].methods)))
	}
	var offers []string
	for _, t := range shared {
		offers = append(offers, fmt.Sprintf("`%s` %d", t, len(c.offer(t))))
	}
	var wide []string
	names := c.byMethods()
	sort.SliceStable(names, func(i, j int) bool { return c.types[names[i]].spread() > c.types[names[j]].spread() })
	for _, t := range names {
		if n := c.types[t].spread(); n >= 4 {
			wide = append(wide, fmt.Sprintf("`%s` %d", t, n))
		}
	}
	var longest, over []string
	for _, f := range c.funcs[:6] {
		longest = append(longest, fmt.Sprintf("`%s` %d", f.name, f.n))
	}
	tableLongest := ""
	for _, f := range c.funcs {
		if f.n > 80 {
			over = append(over, fmt.Sprintf("`%s` %d", f.name, f.n))
		}
		if tableLongest == "" && strings.HasPrefix(f.name, "table.") {
			tableLongest = fmt.Sprintf("`%s` %d", f.name, f.n)
		}
	}
	cmdLines := 0
	for _, n := range c.files["cmd/neighwatch"] {
		cmdLines += n
	}
	fmt.Fprintf(&b, "| | now |\n|---|---|\n")
	fmt.Fprintf(&b, "| most methods of a type's own | %s |\n", list(most))
	fmt.Fprintf(&b, "| what a holder of a shared type can call: exported methods, those of the parts it embeds and of the views its methods return included | %s |\n", list(offers))
	var decl []string
	for _, i := range c.byDeclared()[:6] {
		decl = append(decl, fmt.Sprintf("`%s` %d", i, c.ifaces[i]))
	}
	fmt.Fprintf(&b, "| most methods an interface declares (what a consumer says it calls; embedded interfaces apart) | %s |\n", list(decl))
	fmt.Fprintf(&b, "| types whose methods are in four files or more | %s |\n", list(wide))
	fmt.Fprintf(&b, "| longest functions | %s |\n", list(longest))
	fmt.Fprintf(&b, "| functions over 80 lines | %s |\n", list(over))
	fmt.Fprintf(&b, "| longest function in `table/` | %s |\n", tableLongest)
	fmt.Fprintf(&b, "| `cmd/neighwatch` (not tests) | %d lines in %d files |\n", cmdLines, len(c.files["cmd/neighwatch"]))
	return b.String()
}
