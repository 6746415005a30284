package main

import (
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"regexp"
	"strings"

	"github.com/neighwatch/neighwatch/metrics"
)

// DefaultMetricsListen is the agent's default metrics address. Port 9947
// is not taken in the Prometheus default port allocations wiki as of 2026.
const DefaultMetricsListen = ":9947"

// DefaultControlSocket is where the agent serves its control API.
const DefaultControlSocket = "/run/neighwatch/neighwatch.sock"

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
func (r *regexList) Set(v string) error {
	for _, p := range splitList(v) {
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

func newLogger(w io.Writer, level, format string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log.level %q: want debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("--log.format %q: want text or json", format)
}

func versionString() string {
	return metrics.VersionString()
}
