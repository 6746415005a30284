package options

import (
	"flag"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/neighwatch/neighwatch/internal/quote"
)

// An Option is one flag, declared once: its name, default, range, help
// and whether a configuration reload applies it live.
type Option struct {
	Name  string
	Def   string // the default as the README shows it
	Range string // the range as the README shows it, "" for none
	Live  bool   // a reload applies it without a restart
	Help  string
	want  string // what a value must be, for a value the flag refuses ("" when its own error says)
	// Check tells the range, and what the flag alone cannot tell.
	Check func() error
}

// A Table is a flag set and its options, in declaration order.
type Table struct {
	fs        *flag.FlagSet
	list      []*Option
	notInFile map[string]bool
}

// New starts a table of options declared on fs.
func New(fs *flag.FlagSet) *Table { return &Table{fs: fs} }

// FlagSet is the flag set the options are declared on.
func (o *Table) FlagSet() *flag.FlagSet { return o.fs }

func (o *Table) add(op *Option) {
	o.list = append(o.list, op)
}

// Lookup returns the option called name, or nil.
func (o *Table) Lookup(name string) *Option {
	for _, op := range o.list {
		if op.Name == name {
			return op
		}
	}
	return nil
}

// Refused says why the flag name refused the text v, as one line naming
// the value and what it must be: the standard flag types say only
// "parse error".
func (o *Table) Refused(name, v string, err error) string {
	if op := o.Lookup(name); op != nil && op.want != "" {
		w := op.want
		if op.Range != "" {
			w += ", " + op.Range
		}
		return fmt.Sprintf("%s is not %s", quote.Input(v), w)
	}
	return fmt.Sprintf("%s: %v", quote.Input(v), err)
}

// Check returns the first value out of its range, as one line.
func (o *Table) Check() error {
	for _, op := range o.list {
		if op.Check == nil {
			continue
		}
		if err := op.Check(); err != nil {
			return err
		}
	}
	return nil
}

// A Span is a numeric option's range. ZeroOff: 0 is also allowed, and
// turns the feature off.
type Span[T int | float64 | time.Duration] struct {
	Lo, Hi  T
	ZeroOff bool
}

// Between is the range lo to hi.
func Between[T int | float64 | time.Duration](lo, hi T) Span[T] { return Span[T]{Lo: lo, Hi: hi} }

// BetweenOrOff is the range lo to hi, or 0 for off.
func BetweenOrOff[T int | float64 | time.Duration](lo, hi T) Span[T] {
	return Span[T]{Lo: lo, Hi: hi, ZeroOff: true}
}

func (s Span[T]) text(f func(T) string) string {
	t := f(s.Lo) + " to " + f(s.Hi)
	if s.ZeroOff {
		t += ", or 0"
	}
	return t
}

// Duration, Int and Float declare a numeric option bound to p, with
// p's value as its default.
func (o *Table) Duration(p *time.Duration, name string, r Span[time.Duration], live bool, help string) {
	rng := r.text(fmtDuration)
	o.fs.DurationVar(p, name, *p, withRange(help, rng))
	o.add(&Option{Name: name, Def: "`" + fmtDuration(*p) + "`", Range: rng, Live: live, Help: help, want: "a duration such as 90s or 5m", Check: func() error {
		if r.ZeroOff && *p == 0 {
			return nil
		}
		if *p < r.Lo || *p > r.Hi {
			return fmt.Errorf("--%s %v is out of range: want %s", name, *p, rng)
		}
		return nil
	}})
}

func (o *Table) Int(p *int, name string, r Span[int], live bool, help string) {
	rng := r.text(fmtInt)
	shown := "`" + strconv.Itoa(*p) + "`"
	if *p >= 10000 {
		shown = fmtInt(*p) // readable; not a value to copy
	}
	o.fs.IntVar(p, name, *p, withRange(help, rng))
	o.add(&Option{Name: name, Def: shown, Range: rng, Live: live, Help: help, want: "a whole number", Check: func() error {
		if *p < r.Lo || *p > r.Hi {
			return fmt.Errorf("--%s %d is out of range: want %s", name, *p, rng)
		}
		return nil
	}})
}

func (o *Table) Float(p *float64, name string, r Span[float64], live bool, help string) {
	rng := r.text(fmtFloat)
	o.fs.Float64Var(p, name, *p, withRange(help, rng))
	o.add(&Option{Name: name, Def: "`" + fmtFloat(*p) + "`", Range: rng, Live: live, Help: help, want: "a number", Check: func() error {
		if math.IsNaN(*p) || math.IsInf(*p, 0) || *p < r.Lo || *p > r.Hi {
			return fmt.Errorf("--%s %v is out of range: want a number from %s", name, *p, rng)
		}
		return nil
	}})
}

// withRange is a numeric flag's help for -help: the range follows it, as
// the README's table shows it in a column of its own.
func withRange(help, rng string) string {
	return help + " (" + rng + ")"
}

// Str declares a string option bound to p; shown is the default as the
// README shows it ("" shows p's value). Strings (addresses, files,
// sockets, the logger) apply on restart only.
func (o *Table) Str(p *string, name, shown string, help string) {
	if shown == "" {
		shown = "`" + *p + "`"
	}
	o.fs.StringVar(p, name, *p, help)
	o.add(&Option{Name: name, Def: shown, Help: help})
}

func (o *Table) Bool(p *bool, name string, live bool, help string) {
	o.fs.BoolVar(p, name, *p, help)
	o.add(&Option{Name: name, Def: "`" + strconv.FormatBool(*p) + "`", Live: live, Help: help, want: "true or false"})
}

// Values declares an option of its own flag.Value type (lists, parsed
// values); shown is the default as the README shows it ("" shows the
// value's).
func (o *Table) Values(v flag.Value, name, shown string, live bool, help string) {
	if shown == "" {
		shown = "`" + v.String() + "`"
	}
	o.fs.Var(v, name, help)
	o.add(&Option{Name: name, Def: shown, Live: live, Help: help})
}

// fmtDuration prints a duration as one writes it: 24h, 90s, 100ms.
func fmtDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// fmtInt prints an integer with thousands separators: 65,536.
func fmtInt(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0 && s[i-1] != '-'; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

func fmtFloat(f float64) string {
	if f == math.Trunc(f) && math.Abs(f) >= 1000 {
		return fmtInt(int(f))
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}

// READMETable renders the options as the README's flag table.
func (o *Table) READMETable() string {
	var b strings.Builder
	b.WriteString("| flag | default | range | on reload | meaning |\n|---|---|---|---|---|\n")
	for _, op := range o.list {
		reload := "restart"
		if op.Live {
			reload = "live"
		}
		if op.Name == "config.file" {
			reload = ""
		}
		fmt.Fprintf(&b, "| `--%s` | %s | %s | %s | %s |\n", op.Name, op.Def, op.Range, reload, op.Help)
	}
	return b.String()
}
