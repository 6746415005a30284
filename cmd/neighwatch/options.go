package main

import (
	"flag"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// An option is one flag of the agent, declared once: its name, default,
// range, help and whether a configuration reload applies it live.
// Parsing, the configuration file, validation, reload and the README's
// flag table (TestREADMEFlagTable) all read the list declareAgent makes.
type option struct {
	name  string
	def   string // the default as the README shows it
	rng   string // the range as the README shows it, "" for none
	live  bool   // a reload applies it without a restart
	help  string
	want  string       // what a value must be, for a value the flag refuses ("" when its own error says)
	check func() error // the range, and what the flag alone cannot tell
}

// options is a flag set and its options, in declaration order.
type options struct {
	fs   *flag.FlagSet
	list []*option
}

func (o *options) add(op *option) {
	o.list = append(o.list, op)
}

// lookup returns the option called name, or nil.
func (o *options) lookup(name string) *option {
	for _, op := range o.list {
		if op.name == name {
			return op
		}
	}
	return nil
}

// refused says why the flag name refused the text v, as one line naming
// the value and what it must be: the standard flag types say only
// "parse error".
func (o *options) refused(name, v string, err error) string {
	if len(v) > 64 {
		v = fmt.Sprintf("%s... (%d bytes)", v[:64], len(v))
	}
	if op := o.lookup(name); op != nil && op.want != "" {
		w := op.want
		if op.rng != "" {
			w += ", " + op.rng
		}
		return fmt.Sprintf("%q is not %s", v, w)
	}
	return fmt.Sprintf("%q: %v", v, err)
}

// check returns the first value out of its range, as one line.
func (o *options) check() error {
	for _, op := range o.list {
		if op.check == nil {
			continue
		}
		if err := op.check(); err != nil {
			return err
		}
	}
	return nil
}

// A span is a numeric option's range. zeroOff: 0 is also allowed, and
// turns the feature off.
type span[T int | float64 | time.Duration] struct {
	lo, hi  T
	zeroOff bool
}

func (s span[T]) text(f func(T) string) string {
	t := f(s.lo) + " to " + f(s.hi)
	if s.zeroOff {
		t += ", or 0"
	}
	return t
}

// duration, int and float declare a numeric option bound to p, with
// p's value as its default.
func (o *options) duration(p *time.Duration, name string, r span[time.Duration], live bool, help string) {
	rng := r.text(fmtDuration)
	o.fs.DurationVar(p, name, *p, withRange(help, rng))
	o.add(&option{name: name, def: "`" + fmtDuration(*p) + "`", rng: rng, live: live, help: help, want: "a duration such as 90s or 5m", check: func() error {
		if r.zeroOff && *p == 0 {
			return nil
		}
		if *p < r.lo || *p > r.hi {
			return fmt.Errorf("--%s %v is out of range: want %s", name, *p, rng)
		}
		return nil
	}})
}

func (o *options) int(p *int, name string, r span[int], live bool, help string) {
	rng := r.text(fmtInt)
	shown := "`" + strconv.Itoa(*p) + "`"
	if *p >= 10000 {
		shown = fmtInt(*p) // readable; not a value to copy
	}
	o.fs.IntVar(p, name, *p, withRange(help, rng))
	o.add(&option{name: name, def: shown, rng: rng, live: live, help: help, want: "a whole number", check: func() error {
		if *p < r.lo || *p > r.hi {
			return fmt.Errorf("--%s %d is out of range: want %s", name, *p, rng)
		}
		return nil
	}})
}

func (o *options) float(p *float64, name string, r span[float64], live bool, help string) {
	rng := r.text(fmtFloat)
	o.fs.Float64Var(p, name, *p, withRange(help, rng))
	o.add(&option{name: name, def: "`" + fmtFloat(*p) + "`", rng: rng, live: live, help: help, want: "a number", check: func() error {
		if math.IsNaN(*p) || math.IsInf(*p, 0) || *p < r.lo || *p > r.hi {
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

// str declares a string option bound to p; shown is the default as the
// README shows it ("" shows p's value). Strings (addresses, files,
// sockets, the logger) apply on restart only.
func (o *options) str(p *string, name, shown string, help string) {
	if shown == "" {
		shown = "`" + *p + "`"
	}
	o.fs.StringVar(p, name, *p, help)
	o.add(&option{name: name, def: shown, help: help})
}

func (o *options) bool(p *bool, name string, live bool, help string) {
	o.fs.BoolVar(p, name, *p, help)
	o.add(&option{name: name, def: "`" + strconv.FormatBool(*p) + "`", live: live, help: help, want: "true or false"})
}

// values declares an option of its own flag.Value type (lists, parsed
// values); shown is the default as the README shows it ("" shows the
// value's).
func (o *options) values(v flag.Value, name, shown string, live bool, help string) {
	if shown == "" {
		shown = "`" + v.String() + "`"
	}
	o.fs.Var(v, name, help)
	o.add(&option{name: name, def: shown, live: live, help: help})
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

// readmeTable renders the options as the README's flag table.
func (o *options) readmeTable() string {
	var b strings.Builder
	b.WriteString("| flag | default | range | on reload | meaning |\n|---|---|---|---|---|\n")
	for _, op := range o.list {
		reload := "restart"
		if op.live {
			reload = "live"
		}
		if op.name == "config.file" {
			reload = ""
		}
		fmt.Fprintf(&b, "| `--%s` | %s | %s | %s | %s |\n", op.name, op.def, op.rng, reload, op.help)
	}
	return b.String()
}
