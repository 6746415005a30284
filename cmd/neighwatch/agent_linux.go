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
	"github.com/neighwatch/neighwatch/monitor/mirror"
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

// agentFlags are the agent's flags, as declareAgent declares them.
type agentFlags struct {
	configFile, listen, webConfig, controlSocket                       *string
	include, exclude, remIf, remExIf                                   regexList
	remAllow, remDeny                                                  prefixList
	refuse, dpIfaces                                                   stringList
	staleThreshold, resync, conflict, tracerInterval, tracerWindow     *time.Duration
	tracerPeriod, manageIdle, manageFailed, remVerify, remKernel       *time.Duration
	maxConns, maxConnsIP, stuckCap, rcvbuf, maxMap, manageMax, remConc *int
	remQueue                                                           *int
	tracer, dpMode, remMode, remScope, remStrategies, level, format    *string
	manageRelease, remConfirm                                          *bool
	remRate, remIfRate                                                 *float64
}

// declareAgent declares every flag of the agent on fs, once: the option
// table (options.go) that parsing, the configuration file, validation,
// reload and the README's flag table read.
func declareAgent(fs *flag.FlagSet) (*agentFlags, *options) {
	o := &options{fs: fs}
	f := &agentFlags{}
	type d = span[time.Duration]
	type n = span[int]
	type x = span[float64]
	const live, restart = true, false
	rd := remediate.Defaults() // the engine's defaults, in one place
	f.configFile = o.str("config.file", "", "none", restart, "YAML file of flag values (keys are the flag names without dashes); flags on the command line win; reloaded on SIGHUP and when its content changes")
	o.values(&f.include, "interfaces", "all", restart, "comma-separated regexes of interfaces to watch, matched against the whole name")
	o.values(&f.exclude, "exclude-interfaces", "none", restart, "comma-separated regexes of interfaces to ignore")
	f.staleThreshold = o.duration("stale-threshold", 60*time.Second, d{time.Second, 24 * time.Hour, false}, live, "STALE this long makes an entry stale-long")
	f.listen = o.str("metrics.listen", DefaultMetricsListen, "", restart, "host:port for /metrics, /healthz and /readyz")
	o.lookup("metrics.listen").check = func() error {
		if _, _, err := net.SplitHostPort(*f.listen); err != nil {
			return fmt.Errorf("--metrics.listen %q is not host:port: %w", *f.listen, err)
		}
		return nil
	}
	f.webConfig = o.str("web.config.file", "", "none", restart, "exporter-toolkit web configuration file: TLS and basic auth on the metrics address")
	o.lookup("web.config.file").check = func() error {
		if *f.webConfig == "" {
			return nil
		}
		if err := web.Validate(*f.webConfig); err != nil {
			return fmt.Errorf("--web.config.file %s is invalid: %w", *f.webConfig, err)
		}
		return nil
	}
	f.maxConns = o.int("web.max-connections", 64, n{1, 65536, false}, restart, "most connections the metrics address holds at once; when all are taken, a new one takes the slot of a stalled or idle one (README: When the metrics address is full)")
	f.maxConnsIP = o.int("web.max-connections-per-ip", 8, n{1, 65536, false}, restart, "most connections from one client (an IPv4 address, an IPv6 /64); more are closed at accept")
	f.controlSocket = o.str("control.socket", DefaultControlSocket, "", restart, "Unix socket for the control API (status, events, the runtime remediation and datapath switches, profiles), mode 0600 from its first moment; the agent does not start without it; empty turns the API off")
	f.stuckCap = o.int("metrics.stuck-info-limit", 100, n{0, 10000, false}, restart, "most neighwatch_stuck_neighbour_info series per scrape")
	f.rcvbuf = o.int("netlink.receive-buffer", mirror.DefaultReceiveBuffer, n{64 << 10, 1 << 30, false}, restart, "netlink socket receive buffer in bytes (16 MiB); forced past rmem_max with CAP_NET_ADMIN")
	f.resync = o.duration("netlink.resync-interval", 5*time.Minute, d{10 * time.Second, 24 * time.Hour, true}, restart, "full dump that catches entries the kernel creates without telling netlink (0 turns it off)")
	f.conflict = o.duration("arp.conflict-window", 5*time.Second, d{100 * time.Millisecond, time.Hour, false}, restart, "two MACs answering for one IP in turn within this window are a conflict; one change is a move")
	f.tracer = o.str("tracer", "auto", "", restart, "bypass tracer: off, auto (fentry, else xmit), xmit, or fentry (falls back to xmit)")
	f.tracerInterval = o.duration("tracer.interval", time.Second, d{100 * time.Millisecond, time.Minute, false}, restart, "how often tracer hit counts and source-MAC sightings reach the table")
	f.tracerWindow = o.duration("tracer.window", time.Second, d{100 * time.Millisecond, time.Hour, false}, restart, "while some entry is stale-long, the per-packet hooks are attached for this long out of every --tracer.period (never while none is)")
	f.tracerPeriod = o.duration("tracer.period", 30*time.Second, d{100 * time.Millisecond, 24 * time.Hour, false}, restart, "how often the per-packet hooks get a window, at least --tracer.window; equal to it, they stay attached while needed")
	period := o.lookup("tracer.period")
	inRange := period.check
	period.check = func() error {
		if *f.tracerPeriod < *f.tracerWindow {
			return fmt.Errorf("--tracer.period %v is shorter than --tracer.window %v", *f.tracerPeriod, *f.tracerWindow)
		}
		return inRange()
	}
	f.maxMap = o.int("tracer.max-map-entries", 1<<22, n{1024, 1 << 22, false}, restart, "cap on the entries of each tracer map: the maps are sized for the node's gc_thresh3 (and grow when it is raised) up to it; STALE entries past it are counted in neighwatch_tracer_unmirrored_entries")
	o.values(&f.refuse, "debug.refuse-programs", "none", restart, "comma-separated tracer programs not to load, as if the kernel refused them: a drill of NeighwatchDetectionBlind (neighwatch tracer lists the programs)")
	o.values(&f.dpIfaces, "datapath.interfaces", "none", restart, "comma-separated interfaces to attach the eBPF forwarding datapath to (tcx ingress, or clsact before Linux 6.6)")
	f.dpMode = o.str("datapath.mode", "legacy", "", restart, "datapath mode: legacy (bpf_redirect), neigh (bpf_redirect_neigh), or auto (legacy, swapped to neigh by remediation where stuck entries get bypass traffic)")
	f.remMode = o.str("remediation", string(rd.Mode), "", live, "auto-remediation: off (sends nothing), dry-run (decides and reports, changes no entry; sends only the confirmations' unicast probes to an entry's own MAC, see --remediation.confirm) or on; change it at runtime with neighwatch remediation")
	f.remScope = o.str("remediation.scope", string(rd.Scope), "", live, "entries to act on: stuck (evidence the host is not at the entry's MAC), at-risk (and entries that bypassing traffic keeps from re-validation) or all-stale (every stale-long entry)")
	f.remStrategies = o.str("remediation.strategies", "", "`manage,probe,kick,flush`", live, remediate.StrategiesHelp())
	f.manageMax = o.int("manage.max", rd.Manage.Max, n{1, 1_000_000, false}, live, "most entries kept managed at once; more are refused (counted) and go to the next strategy")
	f.manageIdle = o.duration("manage.idle", rd.Manage.Idle, d{time.Second, 7 * 24 * time.Hour, true}, live, "release a managed entry after this long without bypass traffic (0: never)")
	f.manageFailed = o.duration("manage.failed-timeout", rd.Manage.FailedTimeout, d{time.Second, 24 * time.Hour, false}, live, "release a managed entry that stays FAILED this long: its host is gone")
	f.manageRelease = o.bool("manage.release-on-exit", rd.Manage.ReleaseOnExit, live, "release every managed entry on remediation off and on a clean shutdown")
	f.remRate = o.float("remediation.rate", rd.Rate, x{0.01, 10000, false}, live, "actions per second, all interfaces together (an action sends at most two probe packets)")
	f.remIfRate = o.float("remediation.interface-rate", rd.PerInterfaceRate, x{0.01, 10000, false}, live, "actions per second on one interface")
	f.remConc = o.int("remediation.concurrency", rd.MaxConcurrent, n{1, 256, false}, restart, "actions in flight at once")
	f.remQueue = o.int("remediation.queue", rd.QueueSize, n{1, 1_000_000, false}, restart, "candidates waiting for a worker; more are dropped and counted")
	f.remConfirm = o.bool("remediation.confirm", true, live, "before a host seen at another MAC makes its entry stuck, send up to 3 unicast ARP requests (or Neighbor Solicitations) to the entry's own MAC, as the kernel does for a STALE entry in use, in dry-run too (never in off): an answer means the host has two MACs; false leaves only silence for the stale threshold (at least 10s)")
	f.remVerify = o.duration("remediation.verify-timeout", rd.VerifyTimeout, d{100 * time.Millisecond, 5 * time.Minute, false}, live, "how long to wait for a probe's answer before the next strategy")
	f.remKernel = o.duration("remediation.kernel-timeout", rd.KernelTimeout, d{time.Second, 10 * time.Minute, false}, live, "how long to wait for the kernel's re-resolution after kick or swap")
	o.values(&f.remIf, "remediation.interfaces", "all", live, "comma-separated regexes of interfaces remediation may act on")
	o.values(&f.remExIf, "remediation.exclude-interfaces", "none", live, "comma-separated regexes of interfaces remediation leaves alone")
	o.values(&f.remAllow, "remediation.allow-cidrs", "all", live, "comma-separated prefixes remediation may act on")
	o.values(&f.remDeny, "remediation.deny-cidrs", "none", live, "comma-separated prefixes remediation leaves alone")
	f.level = o.str("log.level", "info", "", restart, "log level: debug, info, warn or error")
	f.format = o.str("log.format", "text", "", restart, "log format: text or json")
	return f, o
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
	f, opts := declareAgent(fs)
	configFile := f.configFile
	if err := parse(fs, args); err != nil {
		return nil, err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var file map[string]string
	if *configFile != "" {
		var err error
		if file, err = readConfigFile(*configFile, fs); err != nil {
			return nil, errUsage{err}
		}
	}
	for k, v := range file {
		if set[k] {
			continue // the command line wins
		}
		if err := fs.Set(k, v); err != nil {
			return nil, errUsage{fmt.Errorf("config file %s: %s: %v", *configFile, k, err)}
		}
	}
	st := &agentSetup{configFile: *configFile, modeSource: "default", values: map[string]string{}}
	switch {
	case set["remediation"]:
		st.modeSource = "flag"
	case file["remediation"] != "":
		st.modeSource = "file"
	}
	fs.VisitAll(func(f *flag.Flag) { st.values[f.Name] = f.Value.String() })
	log, err := newLogger(stderr, *f.level, *f.format)
	if err != nil {
		return nil, errUsage{err}
	}
	tmode, err := bpf.ParseTracerMode(*f.tracer)
	if err != nil {
		return nil, errUsage{fmt.Errorf("--tracer: %w", err)}
	}
	auto := *f.dpMode == "auto"
	if auto {
		*f.dpMode = string(bpf.ModeLegacy)
	}
	mode, err := bpf.ParseMode(*f.dpMode)
	if err != nil {
		return nil, errUsage{fmt.Errorf("--datapath.mode: %w (or auto)", err)}
	}
	rmode, err := remediate.ParseMode(*f.remMode)
	if err != nil {
		return nil, errUsage{fmt.Errorf("--remediation: %w", err)}
	}
	rscope, err := remediate.ParseScope(*f.remScope)
	if err != nil {
		return nil, errUsage{fmt.Errorf("--remediation.scope: %w", err)}
	}
	manageOK, manageWhy := remediate.ManagedSupported()
	var strategies []remediate.Strategy
	if *f.remStrategies == "" {
		strategies = remediate.DefaultStrategies(manageOK)
		if auto {
			strategies = append([]remediate.Strategy{remediate.StrategySwap}, strategies...)
		}
	} else if strategies, err = remediate.ParseStrategies(*f.remStrategies); err != nil {
		return nil, errUsage{fmt.Errorf("--remediation.strategies: %w", err)}
	}
	if err := opts.check(); err != nil {
		return nil, errUsage{err}
	}
	cfg := agent.Config{
		Include: f.include, Exclude: f.exclude,
		StaleThreshold:      *f.staleThreshold,
		MetricsListen:       *f.listen,
		WebConfigFile:       *f.webConfig,
		MaxConnections:      *f.maxConns,
		MaxConnectionsPerIP: *f.maxConnsIP,
		ControlSocket:       *f.controlSocket,
		StuckInfoCap:        *f.stuckCap,
		ReceiveBuffer:       *f.rcvbuf,
		ResyncInterval:      *f.resync,
		ConflictWindow:      *f.conflict,
		Tracer:              tmode,
		TracerInterval:      *f.tracerInterval,
		TracerWindow:        *f.tracerWindow,
		TracerPeriod:        *f.tracerPeriod,
		RefusePrograms:      f.refuse,
		TracerMaxMap:        *f.maxMap,
		DatapathInterfaces:  f.dpIfaces,
		DatapathMode:        mode,
		DatapathAuto:        auto,
		Remediation: remediate.Config{
			Mode: rmode, Scope: rscope, Strategies: strategies,
			Filter:           remediate.Filter{Interfaces: f.remIf, ExcludeInterfaces: f.remExIf, AllowCIDRs: f.remAllow, DenyCIDRs: f.remDeny},
			Rate:             *f.remRate,
			PerInterfaceRate: *f.remIfRate,
			MaxConcurrent:    *f.remConc,
			QueueSize:        *f.remQueue,
			VerifyTimeout:    *f.remVerify,
			KernelTimeout:    *f.remKernel,
			NoConfirm:        !*f.remConfirm,
			Manage: remediate.ManageConfig{Supported: manageOK, Max: *f.manageMax, Idle: *f.manageIdle,
				FailedTimeout: *f.manageFailed, ReleaseOnExit: *f.manageRelease},
		},
		Logger: log,
	}
	inert, fatal := remediate.Inert(cfg.Remediation, auto)
	if fatal != nil {
		return nil, errUsage{fatal}
	}
	st.cfg, st.manageOK, st.manageWhy, st.inert = cfg, manageOK, manageWhy, inert
	return st, nil
}

func runAgent(ctx context.Context, args []string, stderr io.Writer) error {
	st, err := agentConfig(args, stderr)
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
