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

func (o *options) duration(name string, def time.Duration, r span[time.Duration], live bool, help string) *time.Duration {
	rng := r.text(fmtDuration)
	p := o.fs.Duration(name, def, withRange(help, rng))
	o.add(&option{name: name, def: "`" + fmtDuration(def) + "`", rng: rng, live: live, help: help, check: func() error {
		if r.zeroOff && *p == 0 {
			return nil
		}
		if *p < r.lo || *p > r.hi {
			return fmt.Errorf("--%s %v is out of range: want %s", name, *p, rng)
		}
		return nil
	}})
	return p
}

func (o *options) int(name string, def int, r span[int], live bool, help string) *int {
	rng := r.text(fmtInt)
	p := o.fs.Int(name, def, withRange(help, rng))
	shown := "`" + strconv.Itoa(def) + "`"
	if def >= 10000 {
		shown = fmtInt(def) // readable; not a value to copy
	}
	o.add(&option{name: name, def: shown, rng: rng, live: live, help: help, check: func() error {
		if *p < r.lo || *p > r.hi {
			return fmt.Errorf("--%s %d is out of range: want %s", name, *p, rng)
		}
		return nil
	}})
	return p
}

func (o *options) float(name string, def float64, r span[float64], live bool, help string) *float64 {
	rng := r.text(fmtFloat)
	p := o.fs.Float64(name, def, withRange(help, rng))
	o.add(&option{name: name, def: "`" + fmtFloat(def) + "`", rng: rng, live: live, help: help, check: func() error {
		if math.IsNaN(*p) || math.IsInf(*p, 0) || *p < r.lo || *p > r.hi {
			return fmt.Errorf("--%s %v is out of range: want a number from %s", name, *p, rng)
		}
		return nil
	}})
	return p
}

// withRange is a numeric flag's help for -help: the range follows it, as
// the README's table shows it in a column of its own.
func withRange(help, rng string) string {
	return help + " (" + rng + ")"
}

// str declares a string option; def shows the default in the README
// ("" shows the value).
func (o *options) str(name, value, def string, live bool, help string) *string {
	p := o.fs.String(name, value, help)
	if def == "" {
		def = "`" + value + "`"
	}
	o.add(&option{name: name, def: def, live: live, help: help})
	return p
}

func (o *options) bool(name string, value, live bool, help string) *bool {
	p := o.fs.Bool(name, value, help)
	o.add(&option{name: name, def: "`" + strconv.FormatBool(value) + "`", live: live, help: help})
	return p
}

// values declares an option of a comma-separated list type.
func (o *options) values(v flag.Value, name, def string, live bool, help string) {
	o.fs.Var(v, name, help)
	o.add(&option{name: name, def: def, live: live, help: help})
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
