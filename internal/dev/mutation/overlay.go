package mutation

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"go/scanner"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Gremlins v0.6.0 reports a mutant in a switch case's expression (case
// a == b:) as not covered: the Go cover profile has no block for case
// expressions, so it never runs it, though the tests run that code. And
// it times a mutant out at a multiple of the tests' time under coverage,
// which a loaded machine (or its own workers) can exceed: a timed-out
// mutant may be one the tests would not have caught. Rerun runs both
// kinds itself, one at a time: the file mutated into an overlay (go test
// -overlay), the package's tests run, the tree untouched.

// replacements are gremlins' mutators, by the token they change.
var replacements = map[string]map[token.Token]string{
	"CONDITIONALS_BOUNDARY": {token.LSS: "<=", token.LEQ: "<", token.GTR: ">=", token.GEQ: ">"},
	"CONDITIONALS_NEGATION": {token.EQL: "!=", token.NEQ: "==", token.LSS: ">=", token.GEQ: "<", token.GTR: "<=", token.LEQ: ">"},
	"ARITHMETIC_BASE":       {token.ADD: "-", token.SUB: "+", token.MUL: "/", token.QUO: "*", token.REM: "*"},
	"INCREMENT_DECREMENT":   {token.INC: "--", token.DEC: "++"},
	"INVERT_NEGATIVES":      {token.SUB: "+"},
}

// Mutate returns src with the token at line:col changed as the mutator
// typ changes it.
func Mutate(src []byte, line, col int, typ string) ([]byte, error) {
	repl, ok := replacements[typ]
	if !ok {
		return nil, fmt.Errorf("mutator %s: not one nwmutants can apply", typ)
	}
	fset := token.NewFileSet()
	f := fset.AddFile("x.go", -1, len(src))
	var s scanner.Scanner
	s.Init(f, src, nil, 0)
	for {
		pos, tok, _ := s.Scan()
		if tok == token.EOF {
			return nil, fmt.Errorf("no token at %d:%d", line, col)
		}
		p := fset.Position(pos)
		if p.Line != line || p.Column != col {
			continue
		}
		to, ok := repl[tok]
		if !ok {
			return nil, fmt.Errorf("%d:%d is %q, which %s does not change", line, col, tok, typ)
		}
		off := p.Offset
		out := append([]byte{}, src[:off]...)
		out = append(out, to...)
		return append(out, src[off+len(tok.String()):]...), nil
	}
}

// Rerun runs each not-covered and timed-out mutant of ms against its
// package's tests and sets its status: KILLED when they fail, LIVED when
// they pass, TIMED OUT when they still run after timeout (a hang the
// tests' own timeout catches). root is the module's directory.
func Rerun(ctx context.Context, root string, ms []Mutant, timeout time.Duration) error {
	return rerun(ctx, root, ms, timeout, "NOT COVERED", "TIMED OUT")
}

// Recheck runs each survivor of ms (lived, after Rerun) again, against
// the tests as they are now: after tests were added to kill them, without
// a whole gremlins run. The code mutated must be the same as when gremlins
// ran (the mutants are found by line and column).
func Recheck(ctx context.Context, root string, ms []Mutant, timeout time.Duration) error {
	return rerun(ctx, root, ms, timeout, "LIVED")
}

func rerun(ctx context.Context, root string, ms []Mutant, timeout time.Duration, statuses ...string) error {
	tmp, err := os.MkdirTemp("", "nwmutants-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	for i := range ms {
		m := &ms[i]
		if !slices.Contains(statuses, m.Status) {
			continue
		}
		was := m.Status
		src, err := os.ReadFile(filepath.Join(root, m.File))
		if err != nil {
			return err
		}
		mutated, err := Mutate(src, m.Line, m.Column, m.Type)
		if err != nil {
			return fmt.Errorf("%s: %w", m.Key(), err)
		}
		mf := filepath.Join(tmp, "mutant.go")
		if err := os.WriteFile(mf, mutated, 0o644); err != nil {
			return err
		}
		ov, _ := json.Marshal(map[string]any{"Replace": map[string]string{filepath.Join(root, m.File): mf}})
		of := filepath.Join(tmp, "overlay.json")
		if err := os.WriteFile(of, ov, 0o644); err != nil {
			return err
		}
		tctx, cancel := context.WithTimeout(ctx, timeout)
		cmd := exec.CommandContext(tctx, "go", "test", "-count=1", "-overlay", of, "./"+filepath.Dir(m.File))
		cmd.Dir = root
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		err = cmd.Run()
		timedOut := tctx.Err() != nil
		cancel()
		if ctx.Err() != nil {
			return ctx.Err()
		}
		var ee *exec.ExitError
		switch {
		case err == nil:
			m.Status = "LIVED"
		case timedOut:
			m.Status = "TIMED OUT"
		case errors.As(err, &ee) && bytes.Contains(out.Bytes(), []byte("[build failed]")):
			m.Status = "NOT VIABLE"
		case errors.As(err, &ee):
			m.Status = "KILLED"
		default:
			return fmt.Errorf("%s: go test: %w", m.Key(), err)
		}
		fmt.Fprintf(os.Stderr, "%12s %s (run again by nwmutants: it was %s)\n", m.Status, m.Key(), strings.ToLower(was))
	}
	return nil
}
