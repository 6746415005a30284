package agent

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"runtime/debug"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/neighwatch/neighwatch/bpf"
	"github.com/neighwatch/neighwatch/internal/control"
	"github.com/neighwatch/neighwatch/internal/options"
	"github.com/neighwatch/neighwatch/internal/quote"
	"github.com/neighwatch/neighwatch/metrics"
	"github.com/neighwatch/neighwatch/remediate"
	"github.com/prometheus/common/promslog"
	"github.com/prometheus/exporter-toolkit/web"
)

// DefaultMetricsListen is the agent's default metrics address. Port 9947
// is not taken in the Prometheus default port allocations wiki as of 2026.
const DefaultMetricsListen = ":9947"

// setup is what load read: the configuration, and what the
// reload loop needs to compare and report.
type setup struct {
	cfg        Config
	configFile string
	modeSource string            // where the remediation mode came from: flag, file or default
	values     map[string]string // every flag's effective value, for restart-only changes
	manageOK   bool
	manageWhy  string
	inert      []string // what in the configuration can never act
}

// bound is what declare binds the flags to: the agent's
// configuration itself (no copy in between), and the flags that
// configure the command rather than a part.
type bound struct {
	cfg           Config
	configFile    string
	level, format string
}

// declare declares every flag of the agent on fs, once, each bound
// to the field of Config it sets and defaulting to that field's
// value in Defaults(), which takes it from the part it configures:
// the option table (options.go) that parsing, the configuration file,
// validation, reload and the flag table of docs/running.md read.
func declare(fs *flag.FlagSet) (*bound, *options.Table) {
	o := options.New(fs)
	o.NotInFile("config.file")
	b := &bound{cfg: Defaults(), level: "info", format: "logfmt"}
	c := &b.cfg
	c.Metrics.Listen, c.ControlSocket = DefaultMetricsListen, control.DefaultSocket
	const live, restart = true, false
	o.Str(&b.configFile, "config.file", "none", "YAML file of flag values (keys are the flag names without dashes); flags on the command line win; reloaded on SIGHUP and when its content changes")
	o.Values((*options.RegexList)(&c.Mirror.Interfaces.Include), "interfaces", "all", restart, "comma-separated regexes of interfaces to watch, matched against the whole name")
	o.Values((*options.RegexList)(&c.Mirror.Interfaces.Exclude), "exclude-interfaces", "none", restart, "comma-separated regexes of interfaces to ignore")
	o.Duration(&c.StaleThreshold, "stale-threshold", options.Between(time.Second, 24*time.Hour), live, "STALE this long makes an entry stale-long")
	o.Str(&c.Metrics.Listen, "metrics.listen", "", "host:port for /metrics, /healthz and /readyz")
	o.Lookup("metrics.listen").Check = func() error {
		if _, _, err := net.SplitHostPort(c.Metrics.Listen); err != nil {
			return fmt.Errorf("--metrics.listen %s is not host:port: %w", quote.Input(c.Metrics.Listen), err)
		}
		return nil
	}
	o.Str(&c.Metrics.WebConfigFile, "web.config.file", "none", "exporter-toolkit web configuration file: TLS and basic auth on the metrics address")
	o.Lookup("web.config.file").Check = func() error {
		if c.Metrics.WebConfigFile == "" {
			return nil
		}
		if err := web.Validate(c.Metrics.WebConfigFile); err != nil {
			return fmt.Errorf("--web.config.file %s is invalid: %w", c.Metrics.WebConfigFile, err)
		}
		return nil
	}
	o.Int(&c.Metrics.MaxConnections, "web.max-connections", options.Between(1, 65536), restart, "most connections the metrics address holds at once; when all are taken, a new one takes the slot of a stalled or idle one (docs/metrics.md, When the metrics address is full)")
	o.Int(&c.Metrics.MaxConnectionsPerIP, "web.max-connections-per-ip", options.Between(1, 65536), restart, "most connections from one client (an IPv4 address, an IPv6 /64); more are closed at accept")
	o.Str(&c.ControlSocket, "control.socket", "", "Unix socket for the control API (status, events, the runtime remediation and datapath switches, profiles), mode 0600 from its first moment; the agent does not start without it; empty turns the API off")
	o.Int(&c.Metrics.StuckInfoCap, "metrics.stuck-info-limit", options.Between(0, 10000), restart, "most neighwatch_stuck_neighbour_info series per scrape")
	o.Int(&c.Mirror.ReceiveBuffer, "netlink.receive-buffer", options.Between(64<<10, 1<<30), restart, "netlink socket receive buffer in bytes (16 MiB); forced past rmem_max with CAP_NET_ADMIN")
	o.Duration(&c.Mirror.ResyncInterval, "netlink.resync-interval", options.BetweenOrOff(10*time.Second, 24*time.Hour), restart, "full dump that catches entries the kernel creates without telling netlink (0 turns it off); it waits at least 1,000 times what the last one cost, its wall time or the CPU time spent meanwhile, the longer (about 35 minutes at 1,000,000 entries)")
	o.Duration(&c.Evidence.ConflictWindow, "arp.conflict-window", options.Between(100*time.Millisecond, time.Hour), restart, "two MACs answering for one IP in turn within this window are a conflict; one change is a move")
	o.Values(options.Parsed(&c.Tracer.Mode, bpf.ParseTracerMode), "tracer", "", restart, "bypass tracer: off, auto (fentry, else xmit), xmit, or fentry (falls back to xmit)")
	o.Duration(&c.Tracer.Feed.Interval, "tracer.interval", options.Between(100*time.Millisecond, time.Minute), restart, "how often tracer hit counts and source-MAC sightings reach the table")
	o.Duration(&c.Tracer.Feed.Window, "tracer.window", options.Between(100*time.Millisecond, time.Hour), restart, "while some entry is stale-long, the per-packet hooks are attached for this long out of every --tracer.period (never while none is)")
	o.Duration(&c.Tracer.Feed.Period, "tracer.period", options.Between(100*time.Millisecond, 24*time.Hour), restart, "how often the per-packet hooks get a window, at least --tracer.window; equal to it, they stay attached while needed")
	period := o.Lookup("tracer.period")
	inRange := period.Check
	period.Check = func() error {
		if c.Tracer.Feed.Period < c.Tracer.Feed.Window {
			return fmt.Errorf("--tracer.period %v is shorter than --tracer.window %v", c.Tracer.Feed.Period, c.Tracer.Feed.Window)
		}
		return inRange()
	}
	o.Int(&c.Tracer.MaxMap, "tracer.max-map-entries", options.Between(1024, bpf.MaxMapEntries), restart, "cap on the entries of each tracer map: the maps hold the table's entries with a quarter to spare (a power of two, whatever gc_thresh3 allows) and are loaded again, at least twice as large, when the table fills four fifths of them, up to it; STALE entries past it are counted in neighwatch_tracer_unmirrored_entries")
	o.Values((*options.StringList)(&c.Tracer.Refuse), "debug.refuse-programs", "none", restart, "comma-separated tracer programs not to load, as if the kernel refused them: a drill of NeighwatchDetectionBlind (neighwatch tracer lists the programs)")
	o.Values((*options.StringList)(&c.Datapath.Interfaces), "datapath.interfaces", "none", restart, "comma-separated interfaces to attach the eBPF forwarding datapath to (tcx ingress, or clsact before Linux 6.6)")
	o.Values(datapathMode{&c.Datapath}, "datapath.mode", "", restart, "datapath mode: legacy (bpf_redirect), neigh (bpf_redirect_neigh), or auto (legacy, swapped to neigh by remediation where stuck entries get bypass traffic)")
	r := &c.Remediation
	o.Values(options.Parsed(&r.Mode, remediate.ParseMode), "remediation", "", live, "auto-remediation: off (sends nothing), dry-run (decides and reports, changes no entry; sends only the confirmations' unicast probes to an entry's own MAC, see --remediation.confirm) or on; change it at runtime with neighwatch remediation")
	o.Values(options.Parsed(&r.Scope, remediate.ParseScope), "remediation.scope", "", live, "entries to act on: stuck (evidence the host is not at the entry's MAC), at-risk (and entries that bypassing traffic keeps from re-validation) or all-stale (every stale-long entry)")
	// The default shown is the order on a kernel that keeps managed
	// neighbours, without swap; the agent's own depends on both.
	o.Values(strategyList{&r.Strategies}, "remediation.strategies", "`"+remediate.JoinStrategies(remediate.DefaultStrategies(true, false))+"`", live, remediate.StrategiesHelp())
	o.Int(&r.Manage.Max, "manage.max", options.Between(1, 1_000_000), live, "most entries kept managed at once; more are refused (counted) and go to the next strategy")
	o.Duration(&r.Manage.Idle, "manage.idle", options.BetweenOrOff(time.Second, 7*24*time.Hour), live, "release a managed entry after this long without bypass traffic (0: never)")
	o.Duration(&r.Manage.FailedTimeout, "manage.failed-timeout", options.Between(time.Second, 24*time.Hour), live, "release a managed entry that stays FAILED this long: its host is gone")
	o.Bool(&r.Manage.ReleaseOnExit, "manage.release-on-exit", live, "release every managed entry on remediation off and on a clean shutdown")
	o.Float(&r.Rate, "remediation.rate", options.Between(0.01, 10000), live, "actions per second, all interfaces together (an action sends at most two probe packets)")
	o.Float(&r.PerInterfaceRate, "remediation.interface-rate", options.Between(0.01, 10000), live, "actions per second on one interface")
	o.Int(&r.MaxConcurrent, "remediation.concurrency", options.Between(1, 256), restart, "actions in flight at once")
	o.Int(&r.QueueSize, "remediation.queue", options.Between(1, 1_000_000), restart, "candidates waiting for a worker; more are dropped and counted")
	o.Values(options.Negated{P: &r.NoConfirm}, "remediation.confirm", "`true`", live, "before a host seen at another MAC makes its entry stuck, send up to 3 unicast ARP requests (or Neighbor Solicitations) to the entry's own MAC, as the kernel does for a STALE entry in use, in dry-run too (never in off): an answer means the host has two MACs; false leaves only silence for the stale threshold (at least 10s)")
	o.Duration(&r.VerifyTimeout, "remediation.verify-timeout", options.Between(100*time.Millisecond, 5*time.Minute), live, "how long to wait for a probe's answer before the next strategy")
	o.Duration(&r.KernelTimeout, "remediation.kernel-timeout", options.Between(time.Second, 10*time.Minute), live, "how long to wait for the kernel's re-resolution after kick or swap")
	o.Values((*options.RegexList)(&r.Filter.Interfaces), "remediation.interfaces", "all", live, "comma-separated regexes of interfaces remediation may act on")
	o.Values((*options.RegexList)(&r.Filter.ExcludeInterfaces), "remediation.exclude-interfaces", "none", live, "comma-separated regexes of interfaces remediation leaves alone")
	o.Values((*options.PrefixList)(&r.Filter.AllowCIDRs), "remediation.allow-cidrs", "all", live, "comma-separated prefixes remediation may act on")
	o.Values((*options.PrefixList)(&r.Filter.DenyCIDRs), "remediation.deny-cidrs", "none", live, "comma-separated prefixes remediation leaves alone")
	o.Str(&b.level, "log.level", "", "log level: debug, info, warn or error")
	o.Str(&b.format, "log.format", "", "log format: logfmt (text) or json")
	takes(o)
	return b, o
}

// takes names the words the options that take words take, for checks
// made before the agent reads them (the chart's): TestOptionWords holds
// them to the parsers.
func takes(o *options.Table) {
	o.Takes("tracer", options.KindWords, words(bpf.TracerOff, bpf.TracerAuto, bpf.TracerXmit, bpf.TracerFentry)...)
	o.Takes("datapath.mode", options.KindWords, words(bpf.ModeLegacy, bpf.ModeNeigh, "auto")...)
	o.Takes("remediation", options.KindWords, words(remediate.ModeOff, remediate.ModeDryRun, remediate.ModeOn)...)
	o.Takes("remediation.scope", options.KindWords, words(remediate.ScopeStuck, remediate.ScopeAtRisk, remediate.ScopeAllStale)...)
	o.Takes("remediation.strategies", options.KindList, words(remediate.Strategies()...)...)
	o.Takes("log.level", options.KindWords, promslog.LevelFlagOptions...)
	o.Takes("log.format", options.KindWords, append([]string{"text"}, promslog.FormatFlagOptions...)...)
}

// loadUntil is load for the start, given up on SIGINT or
// SIGTERM: reading a file can block (a hung network mount), and
// Kubernetes would otherwise wait out the pod's grace period and kill.
func loadUntil(ctx context.Context, args []string, stderr io.Writer) (*setup, error) {
	type loaded struct {
		st  *setup
		err error
	}
	done := make(chan loaded, 1)
	go func() {
		st, err := load(args, stderr)
		done <- loaded{st, err}
	}()
	select {
	case l := <-done:
		return l.st, l.err
	case <-ctx.Done():
		return nil, fmt.Errorf("stopped (%v) while reading the configuration; nothing was started", context.Cause(ctx))
	}
}

// liveKey says whether a reload applies a change to a flag without a
// restart, as the option table says.
func liveKey(k string) bool {
	_, o := declare(flag.NewFlagSet("", flag.ContinueOnError))
	op := o.Lookup(k)
	return op != nil && op.Live
}

// load builds the agent's configuration from the command line and,
// for flags the command line does not set, the values of --config.file.
func load(args []string, stderr io.Writer) (*setup, error) {
	fs := flag.NewFlagSet("agent", flag.ContinueOnError)
	b, opts := declare(fs)
	if err := options.ParseFlags(fs, args); err != nil {
		return nil, err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var file map[string]string
	if b.configFile != "" {
		var err error
		if file, err = opts.ReadFile(b.configFile); err != nil {
			return nil, options.Usage{Err: err}
		}
	}
	for k, v := range file {
		if set[k] {
			continue // the command line wins
		}
		if err := fs.Set(k, v); err != nil {
			return nil, options.Usage{Err: fmt.Errorf("config file %s: %s: %s", b.configFile, k, opts.Refused(k, v, err))}
		}
	}
	st := &setup{configFile: b.configFile, modeSource: "default", values: map[string]string{}}
	switch {
	case set["remediation"]:
		st.modeSource = "flag"
	case file["remediation"] != "":
		st.modeSource = "file"
	}
	fs.VisitAll(func(f *flag.Flag) { st.values[f.Name] = f.Value.String() })
	log, err := newLogger(stderr, b.level, b.format)
	if err != nil {
		return nil, options.Usage{Err: err}
	}
	if err := opts.Check(); err != nil {
		return nil, options.Usage{Err: err}
	}
	cfg := b.cfg
	r := &cfg.Remediation
	r.Manage.Supported, st.manageWhy = remediate.ManagedSupported()
	if r.Strategies == nil { // not given: they follow the kernel and the datapath mode
		r.Strategies = remediate.DefaultStrategies(r.Manage.Supported, cfg.Datapath.Auto)
	}
	cfg.Logger = log
	inert, fatal := remediate.Inert(cfg.Remediation, cfg.Datapath.Auto)
	if fatal != nil {
		return nil, options.Usage{Err: fmt.Errorf("--remediation.strategies %w", fatal)}
	}
	for i, w := range inert {
		inert[i] = "--remediation.strategies: " + w
	}
	st.cfg, st.manageOK, st.inert = cfg, r.Manage.Supported, inert
	return st, nil
}

// CheckConfig reads the configuration the agent's command line args
// name (flags and --config.file) as the agent does at start and on a
// reload, and returns the one line that refuses it, or nil: neighwatch
// check-config, for a file before it reaches a node.
func CheckConfig(args []string) error {
	_, err := load(args, io.Discard)
	return err
}

// Main runs the agent as the command line args (and the configuration
// file they name) configure it, until ctx ends: it loads the
// configuration, says what in it can never act, reloads it on SIGHUP and
// when the file changes, and runs the parts. Errors the user fixes by
// changing the command line or the file are options.Usage.
func Main(ctx context.Context, args []string, stderr io.Writer) error {
	st, err := loadUntil(ctx, args, stderr)
	if err != nil {
		return err
	}
	log := st.cfg.Logger
	log.Info("starting neighwatch", "version", metrics.Version(), "revision", metrics.BuildRevision())
	if !st.manageOK {
		log.Warn("managed neighbours unavailable, the manage strategy is skipped: " + st.manageWhy)
	}
	for _, w := range st.inert {
		if !strings.Contains(w, "manage never acts") || st.manageOK { // said just above
			log.Warn(w)
		}
	}
	reloads := make(chan Reload, 1)
	st.cfg.Reloads = reloads
	st.cfg.ModeSource = st.modeSource
	// Catch SIGHUP before anything else runs: its default ends the process.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	go watchConfig(ctx, args, st, hup, reloads)
	return Run(ctx, st.cfg)
}

// strategyList is --remediation.strategies; nil (not given) leaves the
// order to the kernel and the datapath mode.
type strategyList struct{ p *[]remediate.Strategy }

func (v strategyList) String() string {
	if v.p == nil {
		return ""
	}
	return remediate.JoinStrategies(*v.p)
}

func (v strategyList) Set(s string) error {
	ss, err := remediate.ParseStrategies(s)
	if err != nil {
		return err
	}
	*v.p = ss
	return nil
}

// datapathMode is --datapath.mode: legacy, neigh, or auto (legacy that
// remediation may swap).
type datapathMode struct{ c *DatapathConfig }

func (v datapathMode) String() string {
	switch {
	case v.c == nil:
		return ""
	case v.c.Auto:
		return "auto"
	}
	return string(v.c.Mode)
}

func (v datapathMode) Set(s string) error {
	if s == "auto" {
		v.c.Mode, v.c.Auto = bpf.ModeLegacy, true
		return nil
	}
	m, err := bpf.ParseMode(s)
	if err != nil {
		return fmt.Errorf("%w (or auto)", err)
	}
	v.c.Mode, v.c.Auto = m, false
	return nil
}

// newLogger builds the agent's logger as Prometheus' own components do
// (promslog: a timestamp, the level, the caller's file and line, the
// message, then the attributes). "text", the format's name before 0.4,
// is logfmt.
func newLogger(w io.Writer, level, format string) (*slog.Logger, error) {
	cfg := promslog.Config{Level: promslog.NewLevel(), Format: promslog.NewFormat(), Writer: w}
	if err := cfg.Level.Set(level); err != nil {
		return nil, fmt.Errorf("--log.level %s: want %s", quote.Input(level), orList(promslog.LevelFlagOptions))
	}
	if format == "text" {
		format = "logfmt"
	}
	if err := cfg.Format.Set(format); err != nil {
		return nil, fmt.Errorf("--log.format %s: want %s", quote.Input(format), orList(promslog.FormatFlagOptions))
	}
	return promslog.New(&cfg), nil
}

// words turns a package's named words into the option table's.
func words[T ~string](ws ...T) []string {
	out := make([]string, len(ws))
	for i, w := range ws {
		out[i] = string(w)
	}
	return out
}

// orList joins words as "a, b or c".
func orList(words []string) string {
	if len(words) < 2 {
		return strings.Join(words, "")
	}
	return strings.Join(words[:len(words)-1], ", ") + " or " + words[len(words)-1]
}

// configPoll is how often the configuration file is read for changes. A
// ConfigMap update (an atomic swap of the ..data symlink) shows up as
// new content at the same path.
const configPoll = 2 * time.Second

// watchConfig reloads the configuration on SIGHUP and when the file's
// content changes. A broken file keeps the running configuration: one
// line says why, and the reload metrics say it failed. Changes to keys
// that need a restart are named in one line.
func watchConfig(ctx context.Context, args []string, st *setup, hup <-chan os.Signal, out chan<- Reload) {
	log := st.cfg.Logger
	applied := make(map[string]string, len(st.values))
	for k, v := range st.values {
		applied[k] = v
	}
	var last []byte
	if st.configFile != "" {
		last, _ = options.ReadBytes(st.configFile)
	}
	send := func(r Reload) {
		select {
		case out <- r:
		case <-ctx.Done():
		}
	}
	reload := func(trigger string) {
		// Reading a file of up to 1 MiB makes tens of MB of garbage (YAML
		// to JSON to values); give it back to the system now, whatever
		// the outcome, rather than keep it in the pod's RSS for minutes.
		defer debug.FreeOSMemory()
		next, err := load(args, io.Discard)
		if err != nil {
			log.Error("configuration reload failed, keeping the running configuration: "+err.Error(), "trigger", trigger)
			send(Reload{Err: err})
			return
		}
		next.cfg.Logger = log
		var restart []string
		for k, v := range next.values {
			if applied[k] == v {
				continue
			}
			if liveKey(k) {
				applied[k] = v
			} else {
				restart = append(restart, k)
			}
		}
		sort.Strings(restart)
		if len(restart) > 0 {
			log.Warn("configuration changes that need a restart were not applied: "+strings.Join(restart, ", "), "trigger", trigger)
		}
		next.cfg.ModeSource = next.modeSource
		send(Reload{Config: next.cfg})
		log.Info("configuration reloaded", "file", st.configFile, "trigger", trigger, "remediation", next.cfg.Remediation.Mode, "mode_source", next.modeSource,
			"stale_threshold", next.cfg.StaleThreshold.String())
	}
	tick := time.NewTicker(configPoll)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
			if st.configFile == "" {
				log.Warn("SIGHUP: no --config.file to reload; flags change only with a restart")
				continue
			}
			last, _ = options.ReadBytes(st.configFile)
			reload("SIGHUP")
		case <-tick.C:
			if st.configFile == "" {
				continue
			}
			b, err := options.ReadBytes(st.configFile)
			if err == nil && bytes.Equal(b, last) {
				continue
			}
			if err != nil && last == nil {
				continue // still unreadable: said once
			}
			last = b
			reload("file changed")
		}
	}
}
