package options

import (
	"errors"
	"fmt"
	"net/netip"
	"regexp"
	"strconv"
	"strings"
)

// ParsedValue is a flag of a type its package parses (a mode, a scope).
type ParsedValue[T ~string] struct {
	p     *T
	parse func(string) (T, error)
}

// Parsed binds a flag to *p through parse.
func Parsed[T ~string](p *T, parse func(string) (T, error)) ParsedValue[T] {
	return ParsedValue[T]{p, parse}
}

func (v ParsedValue[T]) String() string {
	if v.p == nil {
		return ""
	}
	return string(*v.p)
}

func (v ParsedValue[T]) takesWords() bool { return true }

func (v ParsedValue[T]) Set(s string) error {
	x, err := v.parse(s)
	if err != nil {
		return err
	}
	*v.p = x
	return nil
}

// Negated is a boolean flag bound to a field that means its opposite
// (--remediation.confirm sets NoConfirm).
type Negated struct{ P *bool }

func (v Negated) IsBoolFlag() bool { return true }

func (v Negated) String() string {
	if v.P == nil {
		return "true"
	}
	return strconv.FormatBool(!*v.P)
}

func (v Negated) Set(s string) error {
	b, err := strconv.ParseBool(s)
	if err != nil {
		return errors.New("want true or false")
	}
	*v.P = !b
	return nil
}

// SplitList splits a comma-separated flag value, dropping blanks.
func SplitList(v string) []string {
	var out []string
	for _, p := range strings.Split(v, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// RegexList is a list of interface-name regexes.
type RegexList []*regexp.Regexp

func (r *RegexList) String() string {
	var s []string
	for _, re := range *r {
		s = append(s, re.String())
	}
	return strings.Join(s, ",")
}

// Set takes a comma-separated list of regexes, each anchored to the whole
// interface name.
// An interface list holds at most MaxPatterns regexes of at most
// MaxPatternLen bytes each: each compiled regex costs more than a
// kilobyte of heap, and a configuration file of 1 MiB would otherwise
// hold half a million.
const (
	MaxPatterns   = 256
	MaxPatternLen = 1024
)

func (r *RegexList) Set(v string) error {
	ps := SplitList(v)
	if n := len(*r) + len(ps); n > MaxPatterns {
		return fmt.Errorf("%d interface regexes, more than %d: join them into fewer (lxc.*|veth.*)", n, MaxPatterns)
	}
	for _, p := range ps {
		if len(p) > MaxPatternLen {
			return fmt.Errorf("an interface regex of %d bytes, more than %d: interface names are at most 15", len(p), MaxPatternLen)
		}
		re, err := regexp.Compile("^(?:" + p + ")$")
		if err != nil {
			return fmt.Errorf("bad interface regex %q: %v", p, err)
		}
		*r = append(*r, re)
	}
	return nil
}

// PrefixList is a list of prefixes in CIDR notation.
type PrefixList []netip.Prefix

func (l *PrefixList) String() string {
	var s []string
	for _, p := range *l {
		s = append(s, p.String())
	}
	return strings.Join(s, ",")
}

func (l *PrefixList) Set(v string) error {
	for _, p := range SplitList(v) {
		pf, err := netip.ParsePrefix(p)
		if err != nil {
			return fmt.Errorf("bad prefix %q: want CIDR notation like 10.0.0.0/8", p)
		}
		*l = append(*l, pf.Masked())
	}
	return nil
}

// StringList is a comma-separated list of words.
type StringList []string

func (l *StringList) String() string { return strings.Join(*l, ",") }

func (l *StringList) Set(v string) error {
	*l = append(*l, SplitList(v)...)
	return nil
}
