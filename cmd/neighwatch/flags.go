package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"regexp"
	"strconv"
	"strings"

	"github.com/neighwatch/neighwatch/metrics"
	"github.com/neighwatch/neighwatch/remediate"
	"github.com/prometheus/common/promslog"
)

// DefaultMetricsListen is the agent's default metrics address. Port 9947
// is not taken in the Prometheus default port allocations wiki as of 2026.
const DefaultMetricsListen = ":9947"

// DefaultControlSocket is where the agent serves its control API.
const DefaultControlSocket = "/run/neighwatch/neighwatch.sock"

// parsedValue is a flag of a type its package parses (a mode, a scope).
type parsedValue[T ~string] struct {
	p     *T
	parse func(string) (T, error)
}

// parsed binds a flag to *p through parse.
func parsed[T ~string](p *T, parse func(string) (T, error)) parsedValue[T] {
	return parsedValue[T]{p, parse}
}

func (v parsedValue[T]) String() string {
	if v.p == nil {
		return ""
	}
	return string(*v.p)
}

func (v parsedValue[T]) Set(s string) error {
	x, err := v.parse(s)
	if err != nil {
		return err
	}
	*v.p = x
	return nil
}

// strategyList is --remediation.strategies; nil (not given) leaves the
// order to the kernel and the datapath mode.
type strategyList struct{ p *[]remediate.Strategy }

func (v strategyList) String() string {
	if v.p == nil {
		return ""
	}
	var s []string
	for _, x := range *v.p {
		s = append(s, string(x))
	}
	return strings.Join(s, ",")
}

func (v strategyList) Set(s string) error {
	ss, err := remediate.ParseStrategies(s)
	if err != nil {
		return err
	}
	*v.p = ss
	return nil
}

// negated is a boolean flag bound to a field that means its opposite
// (--remediation.confirm sets NoConfirm).
type negated struct{ p *bool }

func (v negated) IsBoolFlag() bool { return true }

func (v negated) String() string {
	if v.p == nil {
		return "true"
	}
	return strconv.FormatBool(!*v.p)
}

func (v negated) Set(s string) error {
	b, err := strconv.ParseBool(s)
	if err != nil {
		return errors.New("want true or false")
	}
	*v.p = !b
	return nil
}

// splitList splits a comma-separated flag value, dropping blanks.
func splitList(v string) []string {
	var out []string
	for _, p := range strings.Split(v, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

type regexList []*regexp.Regexp

func (r *regexList) String() string {
	var s []string
	for _, re := range *r {
		s = append(s, re.String())
	}
	return strings.Join(s, ",")
}

// Set takes a comma-separated list of regexes, each anchored to the whole
// interface name.
// An interface list holds at most maxPatterns regexes of at most
// maxPatternLen bytes each: each compiled regex costs more than a
// kilobyte of heap, and a configuration file of 1 MiB would otherwise
// hold half a million.
const (
	maxPatterns   = 256
	maxPatternLen = 1024
)

func (r *regexList) Set(v string) error {
	ps := splitList(v)
	if n := len(*r) + len(ps); n > maxPatterns {
		return fmt.Errorf("%d interface regexes, more than %d: join them into fewer (lxc.*|veth.*)", n, maxPatterns)
	}
	for _, p := range ps {
		if len(p) > maxPatternLen {
			return fmt.Errorf("an interface regex of %d bytes, more than %d: interface names are at most 15", len(p), maxPatternLen)
		}
		re, err := regexp.Compile("^(?:" + p + ")$")
		if err != nil {
			return fmt.Errorf("bad interface regex %q: %v", p, err)
		}
		*r = append(*r, re)
	}
	return nil
}

type prefixList []netip.Prefix

func (l *prefixList) String() string {
	var s []string
	for _, p := range *l {
		s = append(s, p.String())
	}
	return strings.Join(s, ",")
}

func (l *prefixList) Set(v string) error {
	for _, p := range splitList(v) {
		pf, err := netip.ParsePrefix(p)
		if err != nil {
			return fmt.Errorf("bad prefix %q: want CIDR notation like 10.0.0.0/8", p)
		}
		*l = append(*l, pf.Masked())
	}
	return nil
}

type stringList []string

func (l *stringList) String() string { return strings.Join(*l, ",") }

func (l *stringList) Set(v string) error {
	*l = append(*l, splitList(v)...)
	return nil
}

// newLogger builds the agent's logger as Prometheus' own components do
// (promslog: a timestamp, the level, the caller's file and line, the
// message, then the attributes). "text", the format's name before 0.4,
// is logfmt.
func newLogger(w io.Writer, level, format string) (*slog.Logger, error) {
	cfg := promslog.Config{Level: promslog.NewLevel(), Format: promslog.NewFormat(), Writer: w}
	if err := cfg.Level.Set(level); err != nil {
		return nil, fmt.Errorf("--log.level %q: want %s", level, orList(promslog.LevelFlagOptions))
	}
	if format == "text" {
		format = "logfmt"
	}
	if err := cfg.Format.Set(format); err != nil {
		return nil, fmt.Errorf("--log.format %q: want %s", format, orList(promslog.FormatFlagOptions))
	}
	return promslog.New(&cfg), nil
}

// orList joins words as "a, b or c".
func orList(words []string) string {
	if len(words) < 2 {
		return strings.Join(words, "")
	}
	return strings.Join(words[:len(words)-1], ", ") + " or " + words[len(words)-1]
}

func versionString() string {
	return metrics.VersionString()
}
