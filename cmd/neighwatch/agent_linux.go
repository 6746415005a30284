package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/neighwatch/neighwatch/bpf"
	"github.com/neighwatch/neighwatch/internal/agent"
	"github.com/neighwatch/neighwatch/metrics"
	"github.com/neighwatch/neighwatch/remediate"
	"github.com/prometheus/exporter-toolkit/web"
)

// agentSetup is what agentConfig read: the configuration, and what the
// reload loop needs to compare and report.
type agentSetup struct {
	cfg        agent.Config
	configFile string
	modeSource string            // where the remediation mode came from: flag, file or default
	values     map[string]string // every flag's effective value, for restart-only changes
	manageOK   bool
	manageWhy  string
	inert      []string // what in the configuration can never act
}

// bound is what declareAgent binds the flags to: the agent's
// configuration itself (no copy in between), and the flags that
// configure the command rather than a part.
type bound struct {
	cfg           agent.Config
	configFile    string
	level, format string
}

// declareAgent declares every flag of the agent on fs, once, each bound
// to the field of agent.Config it sets and defaulting to that field's
// value in agent.Defaults(), which takes it from the part it configures:
// the option table (options.go) that parsing, the configuration file,
// validation, reload and the README's flag table read.
func declareAgent(fs *flag.FlagSet) (*bound, *options) {
	o := &options{fs: fs}
	b := &bound{cfg: agent.Defaults(), level: "info", format: "logfmt"}
	c := &b.cfg
	c.Metrics.Listen, c.ControlSocket = DefaultMetricsListen, DefaultControlSocket
	type d = span[time.Duration]
	type n = span[int]
	type x = span[float64]
	const live, restart = true, false
	o.str(&b.configFile, "config.file", "none", "YAML file of flag values (keys are the flag names without dashes); flags on the command line win; reloaded on SIGHUP and when its content changes")
	o.values((*regexList)(&c.Mirror.Interfaces.Include), "interfaces", "all", restart, "comma-separated regexes of interfaces to watch, matched against the whole name")
	o.values((*regexList)(&c.Mirror.Interfaces.Exclude), "exclude-interfaces", "none", restart, "comma-separated regexes of interfaces to ignore")
	o.duration(&c.StaleThreshold, "stale-threshold", d{time.Second, 24 * time.Hour, false}, live, "STALE this long makes an entry stale-long")
	o.str(&c.Metrics.Listen, "metrics.listen", "", "host:port for /metrics, /healthz and /readyz")
	o.lookup("metrics.listen").check = func() error {
		if _, _, err := net.SplitHostPort(c.Metrics.Listen); err != nil {
			return fmt.Errorf("--metrics.listen %q is not host:port: %w", c.Metrics.Listen, err)
		}
		return nil
	}
	o.str(&c.Metrics.WebConfigFile, "web.config.file", "none", "exporter-toolkit web configuration file: TLS and basic auth on the metrics address")
	o.lookup("web.config.file").check = func() error {
		if c.Metrics.WebConfigFile == "" {
			return nil
		}
		if err := web.Validate(c.Metrics.WebConfigFile); err != nil {
			return fmt.Errorf("--web.config.file %s is invalid: %w", c.Metrics.WebConfigFile, err)
		}
		return nil
	}
	o.int(&c.Metrics.MaxConnections, "web.max-connections", n{1, 65536, false}, restart, "most connections the metrics address holds at once; when all are taken, a new one takes the slot of a stalled or idle one (README: When the metrics address is full)")
	o.int(&c.Metrics.MaxConnectionsPerIP, "web.max-connections-per-ip", n{1, 65536, false}, restart, "most connections from one client (an IPv4 address, an IPv6 /64); more are closed at accept")
	o.str(&c.ControlSocket, "control.socket", "", "Unix socket for the control API (status, events, the runtime remediation and datapath switches, profiles), mode 0600 from its first moment; the agent does not start without it; empty turns the API off")
	o.int(&c.Metrics.StuckInfoCap, "metrics.stuck-info-limit", n{0, 10000, false}, restart, "most neighwatch_stuck_neighbour_info series per scrape")
	o.int(&c.Mirror.ReceiveBuffer, "netlink.receive-buffer", n{64 << 10, 1 << 30, false}, restart, "netlink socket receive buffer in bytes (16 MiB); forced past rmem_max with CAP_NET_ADMIN")
	o.duration(&c.Mirror.ResyncInterval, "netlink.resync-interval", d{10 * time.Second, 24 * time.Hour, true}, restart, "full dump that catches entries the kernel creates without telling netlink (0 turns it off); it waits at least 1,000 times as long as the last one took (about 11 minutes at 1,000,000 entries)")
	o.duration(&c.Evidence.ConflictWindow, "arp.conflict-window", d{100 * time.Millisecond, time.Hour, false}, restart, "two MACs answering for one IP in turn within this window are a conflict; one change is a move")
	o.values(parsed(&c.Tracer.Mode, bpf.ParseTracerMode), "tracer", "", restart, "bypass tracer: off, auto (fentry, else xmit), xmit, or fentry (falls back to xmit)")
	o.duration(&c.Tracer.Feed.Interval, "tracer.interval", d{100 * time.Millisecond, time.Minute, false}, restart, "how often tracer hit counts and source-MAC sightings reach the table")
	o.duration(&c.Tracer.Feed.Window, "tracer.window", d{100 * time.Millisecond, time.Hour, false}, restart, "while some entry is stale-long, the per-packet hooks are attached for this long out of every --tracer.period (never while none is)")
	o.duration(&c.Tracer.Feed.Period, "tracer.period", d{100 * time.Millisecond, 24 * time.Hour, false}, restart, "how often the per-packet hooks get a window, at least --tracer.window; equal to it, they stay attached while needed")
	period := o.lookup("tracer.period")
	inRange := period.check
	period.check = func() error {
		if c.Tracer.Feed.Period < c.Tracer.Feed.Window {
			return fmt.Errorf("--tracer.period %v is shorter than --tracer.window %v", c.Tracer.Feed.Period, c.Tracer.Feed.Window)
		}
		return inRange()
	}
	o.int(&c.Tracer.MaxMap, "tracer.max-map-entries", n{1024, bpf.MaxMapEntries, false}, restart, "cap on the entries of each tracer map: the maps hold the table's entries with a quarter to spare (a power of two, whatever gc_thresh3 allows) and are loaded again, at least twice as large, when the table fills four fifths of them, up to it; STALE entries past it are counted in neighwatch_tracer_unmirrored_entries")
	o.values((*stringList)(&c.Tracer.Refuse), "debug.refuse-programs", "none", restart, "comma-separated tracer programs not to load, as if the kernel refused them: a drill of NeighwatchDetectionBlind (neighwatch tracer lists the programs)")
	o.values((*stringList)(&c.Datapath.Interfaces), "datapath.interfaces", "none", restart, "comma-separated interfaces to attach the eBPF forwarding datapath to (tcx ingress, or clsact before Linux 6.6)")
	o.values(datapathMode{&c.Datapath}, "datapath.mode", "", restart, "datapath mode: legacy (bpf_redirect), neigh (bpf_redirect_neigh), or auto (legacy, swapped to neigh by remediation where stuck entries get bypass traffic)")
	r := &c.Remediation
	o.values(parsed(&r.Mode, remediate.ParseMode), "remediation", "", live, "auto-remediation: off (sends nothing), dry-run (decides and reports, changes no entry; sends only the confirmations' unicast probes to an entry's own MAC, see --remediation.confirm) or on; change it at runtime with neighwatch remediation")
	o.values(parsed(&r.Scope, remediate.ParseScope), "remediation.scope", "", live, "entries to act on: stuck (evidence the host is not at the entry's MAC), at-risk (and entries that bypassing traffic keeps from re-validation) or all-stale (every stale-long entry)")
	o.values(strategyList{&r.Strategies}, "remediation.strategies", "`manage,probe,kick,flush`", live, remediate.StrategiesHelp())
	o.int(&r.Manage.Max, "manage.max", n{1, 1_000_000, false}, live, "most entries kept managed at once; more are refused (counted) and go to the next strategy")
	o.duration(&r.Manage.Idle, "manage.idle", d{time.Second, 7 * 24 * time.Hour, true}, live, "release a managed entry after this long without bypass traffic (0: never)")
	o.duration(&r.Manage.FailedTimeout, "manage.failed-timeout", d{time.Second, 24 * time.Hour, false}, live, "release a managed entry that stays FAILED this long: its host is gone")
	o.bool(&r.Manage.ReleaseOnExit, "manage.release-on-exit", live, "release every managed entry on remediation off and on a clean shutdown")
	o.float(&r.Rate, "remediation.rate", x{0.01, 10000, false}, live, "actions per second, all interfaces together (an action sends at most two probe packets)")
	o.float(&r.PerInterfaceRate, "remediation.interface-rate", x{0.01, 10000, false}, live, "actions per second on one interface")
	o.int(&r.MaxConcurrent, "remediation.concurrency", n{1, 256, false}, restart, "actions in flight at once")
	o.int(&r.QueueSize, "remediation.queue", n{1, 1_000_000, false}, restart, "candidates waiting for a worker; more are dropped and counted")
	o.values(negated{&r.NoConfirm}, "remediation.confirm", "`true`", live, "before a host seen at another MAC makes its entry stuck, send up to 3 unicast ARP requests (or Neighbor Solicitations) to the entry's own MAC, as the kernel does for a STALE entry in use, in dry-run too (never in off): an answer means the host has two MACs; false leaves only silence for the stale threshold (at least 10s)")
	o.duration(&r.VerifyTimeout, "remediation.verify-timeout", d{100 * time.Millisecond, 5 * time.Minute, false}, live, "how long to wait for a probe's answer before the next strategy")
	o.duration(&r.KernelTimeout, "remediation.kernel-timeout", d{time.Second, 10 * time.Minute, false}, live, "how long to wait for the kernel's re-resolution after kick or swap")
	o.values((*regexList)(&r.Filter.Interfaces), "remediation.interfaces", "all", live, "comma-separated regexes of interfaces remediation may act on")
	o.values((*regexList)(&r.Filter.ExcludeInterfaces), "remediation.exclude-interfaces", "none", live, "comma-separated regexes of interfaces remediation leaves alone")
	o.values((*prefixList)(&r.Filter.AllowCIDRs), "remediation.allow-cidrs", "all", live, "comma-separated prefixes remediation may act on")
	o.values((*prefixList)(&r.Filter.DenyCIDRs), "remediation.deny-cidrs", "none", live, "comma-separated prefixes remediation leaves alone")
	o.str(&b.level, "log.level", "", "log level: debug, info, warn or error")
	o.str(&b.format, "log.format", "", "log format: logfmt (text) or json")
	return b, o
}

// startConfig is agentConfig for the start, given up on SIGINT or
// SIGTERM: reading a file can block (a hung network mount), and
// Kubernetes would otherwise wait out the pod's grace period and kill.
func startConfig(ctx context.Context, args []string, stderr io.Writer) (*agentSetup, error) {
	type loaded struct {
		st  *agentSetup
		err error
	}
	done := make(chan loaded, 1)
	go func() {
		st, err := agentConfig(args, stderr)
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
	_, o := declareAgent(flag.NewFlagSet("", flag.ContinueOnError))
	op := o.lookup(k)
	return op != nil && op.live
}

// agentConfig builds the agent's configuration from the command line and,
// for flags the command line does not set, the values of --config.file.
func agentConfig(args []string, stderr io.Writer) (*agentSetup, error) {
	fs := flag.NewFlagSet("agent", flag.ContinueOnError)
	b, opts := declareAgent(fs)
	if err := parse(fs, args); err != nil {
		return nil, err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var file map[string]string
	if b.configFile != "" {
		var err error
		if file, err = readConfigFile(b.configFile, fs); err != nil {
			return nil, errUsage{err}
		}
	}
	for k, v := range file {
		if set[k] {
			continue // the command line wins
		}
		if err := fs.Set(k, v); err != nil {
			return nil, errUsage{fmt.Errorf("config file %s: %s: %s", b.configFile, k, opts.refused(k, v, err))}
		}
	}
	st := &agentSetup{configFile: b.configFile, modeSource: "default", values: map[string]string{}}
	switch {
	case set["remediation"]:
		st.modeSource = "flag"
	case file["remediation"] != "":
		st.modeSource = "file"
	}
	fs.VisitAll(func(f *flag.Flag) { st.values[f.Name] = f.Value.String() })
	log, err := newLogger(stderr, b.level, b.format)
	if err != nil {
		return nil, errUsage{err}
	}
	if err := opts.check(); err != nil {
		return nil, errUsage{err}
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
		return nil, errUsage{fmt.Errorf("--remediation.strategies %w", fatal)}
	}
	for i, w := range inert {
		inert[i] = "--remediation.strategies: " + w
	}
	st.cfg, st.manageOK, st.inert = cfg, r.Manage.Supported, inert
	return st, nil
}

func runAgent(ctx context.Context, args []string, stderr io.Writer) error {
	st, err := startConfig(ctx, args, stderr)
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
	reloads := make(chan agent.Reload, 1)
	st.cfg.Reloads = reloads
	st.cfg.ModeSource = st.modeSource
	// Catch SIGHUP before anything else runs: its default ends the process.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	go reloadLoop(ctx, args, st, hup, reloads)
	return agent.Run(ctx, st.cfg)
}
