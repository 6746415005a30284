package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"regexp"
	"strings"
	"time"

	"github.com/neighwatch/neighwatch/bpf"
	"github.com/neighwatch/neighwatch/internal/agent"
	"github.com/neighwatch/neighwatch/metrics"
	"github.com/neighwatch/neighwatch/monitor"
)

// DefaultMetricsListen is the agent's default metrics address. Port 9947
// is not taken in the Prometheus default port allocations wiki as of 2026.
const DefaultMetricsListen = ":9947"

// DefaultControlSocket is where the agent serves its control API.
const DefaultControlSocket = "/run/neighwatch/neighwatch.sock"

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
	for _, p := range strings.Split(v, ",") {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		re, err := regexp.Compile("^(?:" + p + ")$")
		if err != nil {
			return fmt.Errorf("bad interface regex %q: %v", p, err)
		}
		*r = append(*r, re)
	}
	return nil
}

type stringList []string

func (l *stringList) String() string { return strings.Join(*l, ",") }

func (l *stringList) Set(v string) error {
	for _, p := range strings.Split(v, ",") {
		if p = strings.TrimSpace(p); p != "" {
			*l = append(*l, p)
		}
	}
	return nil
}

func runAgent(ctx context.Context, args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("agent", flag.ContinueOnError)
	var include, exclude regexList
	fs.Var(&include, "interfaces", "comma-separated regexes of interfaces to watch, matched against the whole name (default: all)")
	fs.Var(&exclude, "exclude-interfaces", "comma-separated regexes of interfaces to ignore")
	staleThreshold := fs.Duration("stale-threshold", 60*time.Second, "how long an entry must stay STALE to count as stale-long")
	listen := fs.String("metrics.listen", DefaultMetricsListen, "address for /metrics, /healthz and /readyz")
	webConfig := fs.String("web.config.file", "", "exporter-toolkit web config file for TLS and basic auth on the metrics address")
	controlSocket := fs.String("control.socket", DefaultControlSocket, "Unix socket for the status and events subcommands (created mode 0600)")
	stuckCap := fs.Int("metrics.stuck-info-limit", 100, "most neighwatch_stuck_neighbour_info series per scrape")
	rcvbuf := fs.Int("netlink.receive-buffer", monitor.DefaultReceiveBuffer, "netlink socket receive buffer in bytes")
	resync := fs.Duration("netlink.resync-interval", 5*time.Minute, "full dump to catch entries the kernel creates silently (0 disables)")
	conflict := fs.Duration("arp.conflict-window", 5*time.Second, "two ARP answers for one IP from different MACs within this window are a conflict")
	tracer := fs.String("tracer", "auto", "bypass tracer: off, auto (fentry, else xmit), xmit or fentry (falls back to xmit)")
	tracerInterval := fs.Duration("tracer.interval", time.Second, "how often tracer hit counts reach the table")
	var dpIfaces stringList
	fs.Var(&dpIfaces, "datapath.interfaces", "comma-separated interfaces to attach the eBPF forwarding datapath to (tcx ingress)")
	dpMode := fs.String("datapath.mode", "legacy", "datapath mode: legacy (bpf_redirect) or neigh (bpf_redirect_neigh)")
	level := fs.String("log.level", "info", "log level: debug, info, warn or error")
	format := fs.String("log.format", "text", "log format: text or json")
	if err := parse(fs, args); err != nil {
		return err
	}
	log, err := newLogger(stderr, *level, *format)
	if err != nil {
		return errUsage{err}
	}
	tmode, err := bpf.ParseTracerMode(*tracer)
	if err != nil {
		return errUsage{fmt.Errorf("--tracer: %w", err)}
	}
	mode, err := bpf.ParseMode(*dpMode)
	if err != nil {
		return errUsage{fmt.Errorf("--datapath.mode: %w", err)}
	}
	cfg := agent.Config{
		Include: include, Exclude: exclude,
		StaleThreshold:     *staleThreshold,
		MetricsListen:      *listen,
		WebConfigFile:      *webConfig,
		ControlSocket:      *controlSocket,
		StuckInfoCap:       *stuckCap,
		ReceiveBuffer:      *rcvbuf,
		ResyncInterval:     *resync,
		ConflictWindow:     *conflict,
		Tracer:             tmode,
		TracerInterval:     *tracerInterval,
		DatapathInterfaces: dpIfaces,
		DatapathMode:       mode,
		Logger:             log,
	}
	if err := cfg.Validate(); err != nil {
		return errUsage{err}
	}
	log.Info("starting neighwatch", "version", metrics.Version, "revision", metrics.Revision)
	return agent.Run(ctx, cfg)
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
	return fmt.Sprintf("neighwatch %s (revision %s)", metrics.Version, metrics.Revision)
}
