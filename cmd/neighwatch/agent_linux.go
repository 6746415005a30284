package main

import (
	"context"
	"flag"
	"fmt"
	"io"
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

// agentConfig builds the agent's configuration from the command line and,
// for flags the command line does not set, the values of --config.file.
func agentConfig(args []string, stderr io.Writer) (*agentSetup, error) {
	fs := flag.NewFlagSet("agent", flag.ContinueOnError)
	configFile := fs.String("config.file", "", "YAML file of flag values (keys are the flag names without dashes); flags given here win; reloaded on SIGHUP and when it changes")
	var include, exclude regexList
	fs.Var(&include, "interfaces", "comma-separated regexes of interfaces to watch, matched against the whole name (default: all)")
	fs.Var(&exclude, "exclude-interfaces", "comma-separated regexes of interfaces to ignore")
	staleThreshold := fs.Duration("stale-threshold", 60*time.Second, "how long an entry must stay STALE to count as stale-long")
	listen := fs.String("metrics.listen", DefaultMetricsListen, "address for /metrics, /healthz and /readyz")
	webConfig := fs.String("web.config.file", "", "exporter-toolkit web config file for TLS and basic auth on the metrics address")
	maxConns := fs.Int("web.max-connections", 64, "most connections the metrics address holds at once; more are closed at accept (1 to 65536)")
	maxConnsIP := fs.Int("web.max-connections-per-ip", 8, "most connections from one client: an IPv4 address or an IPv6 /64 (1 to 65536)")
	controlSocket := fs.String("control.socket", DefaultControlSocket, "Unix socket for the control API (status, events, the remediation switch), mode 0600; the agent does not start without it; \"\" turns the API off")
	stuckCap := fs.Int("metrics.stuck-info-limit", 100, "most neighwatch_stuck_neighbour_info series per scrape")
	rcvbuf := fs.Int("netlink.receive-buffer", mirror.DefaultReceiveBuffer, "netlink socket receive buffer in bytes")
	resync := fs.Duration("netlink.resync-interval", 5*time.Minute, "full dump to catch entries the kernel creates silently (0 disables)")
	conflict := fs.Duration("arp.conflict-window", 5*time.Second, "two MACs answering for one IP in turn within this window are a conflict; one change is a move")
	tracer := fs.String("tracer", "auto", "bypass tracer: off, auto (fentry, else xmit), xmit or fentry (falls back to xmit)")
	tracerInterval := fs.Duration("tracer.interval", time.Second, "how often tracer hit counts and source-MAC sightings reach the table")
	tracerWindow := fs.Duration("tracer.window", time.Second, "while some entry is stale-long, attach the per-packet hooks for this long out of every --tracer.period (never while none is)")
	tracerPeriod := fs.Duration("tracer.period", 30*time.Second, "how often the per-packet hooks get a window; equal to --tracer.window: attached all the time while needed")
	maxMap := fs.Int("tracer.max-map-entries", 1<<22, "cap on the entries of each tracer map; the maps are sized for the node's gc_thresh3 up to it, and STALE entries past it are counted as unmirrored (1,024 to 4,194,304)")
	var refuse stringList
	fs.Var(&refuse, "debug.refuse-programs", "comma-separated tracer programs not to load, as if the kernel refused them (drills of the NeighwatchDetectionBlind alert; see neighwatch tracer)")
	var dpIfaces stringList
	fs.Var(&dpIfaces, "datapath.interfaces", "comma-separated interfaces to attach the eBPF forwarding datapath to (tcx ingress, or clsact before Linux 6.6)")
	dpMode := fs.String("datapath.mode", "legacy", "datapath mode: legacy (bpf_redirect), neigh (bpf_redirect_neigh), or auto (legacy, swapped to neigh by remediation where stuck entries get bypass traffic)")
	remMode := fs.String("remediation", "dry-run", "auto-remediation: off, dry-run (decide and report, touch nothing) or on; change at runtime with 'neighwatch remediation'")
	remScope := fs.String("remediation.scope", "stuck", "entries to act on: stuck (evidence the host is not at the entry's MAC), at-risk (and entries bypassing traffic keeps from re-validation) or all-stale (every stale-long entry)")
	remStrategies := fs.String("remediation.strategies", "", "strategies in order, from manage, probe, kick, swap, flush (default manage,probe,kick,flush, without manage on kernels before 5.16; swap first with --datapath.mode=auto)")
	manageMax := fs.Int("manage.max", 1024, "most entries the manage strategy keeps managed at once; more are refused and counted (1 to 1,000,000)")
	manageIdle := fs.Duration("manage.idle", 30*time.Minute, "release a managed entry after this long without bypass traffic (0: never)")
	manageFailed := fs.Duration("manage.failed-timeout", 5*time.Minute, "release a managed entry that stays FAILED this long: its host is gone")
	manageRelease := fs.Bool("manage.release-on-exit", true, "release every managed entry on remediation off and on a clean shutdown")
	remRate := fs.Float64("remediation.rate", 10, "actions per second, all interfaces together (an action sends at most two probe packets)")
	remIfRate := fs.Float64("remediation.interface-rate", 5, "actions per second on one interface")
	remConc := fs.Int("remediation.concurrency", 4, "actions in flight at once")
	remQueue := fs.Int("remediation.queue", 1024, "candidates waiting for a worker; more are dropped and counted")
	remVerify := fs.Duration("remediation.verify-timeout", 2*time.Second, "how long to wait for a probe's answer before the next strategy")
	remKernel := fs.Duration("remediation.kernel-timeout", 10*time.Second, "how long to wait for the kernel's re-resolution after kick or swap")
	var remIf, remExIf regexList
	fs.Var(&remIf, "remediation.interfaces", "comma-separated regexes of interfaces remediation may act on (default: all watched)")
	fs.Var(&remExIf, "remediation.exclude-interfaces", "comma-separated regexes of interfaces remediation leaves alone")
	var remAllow, remDeny prefixList
	fs.Var(&remAllow, "remediation.allow-cidrs", "comma-separated prefixes remediation may act on (default: all)")
	fs.Var(&remDeny, "remediation.deny-cidrs", "comma-separated prefixes remediation leaves alone")
	level := fs.String("log.level", "info", "log level: debug, info, warn or error")
	format := fs.String("log.format", "text", "log format: text or json")
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
	log, err := newLogger(stderr, *level, *format)
	if err != nil {
		return nil, errUsage{err}
	}
	tmode, err := bpf.ParseTracerMode(*tracer)
	if err != nil {
		return nil, errUsage{fmt.Errorf("--tracer: %w", err)}
	}
	auto := *dpMode == "auto"
	if auto {
		*dpMode = string(bpf.ModeLegacy)
	}
	mode, err := bpf.ParseMode(*dpMode)
	if err != nil {
		return nil, errUsage{fmt.Errorf("--datapath.mode: %w (or auto)", err)}
	}
	rmode, err := remediate.ParseMode(*remMode)
	if err != nil {
		return nil, errUsage{fmt.Errorf("--remediation: %w", err)}
	}
	rscope, err := remediate.ParseScope(*remScope)
	if err != nil {
		return nil, errUsage{fmt.Errorf("--remediation.scope: %w", err)}
	}
	manageOK, manageWhy := remediate.ManagedSupported()
	var strategies []remediate.Strategy
	if *remStrategies == "" {
		strategies = remediate.DefaultStrategies(manageOK)
		if auto {
			strategies = append([]remediate.Strategy{remediate.StrategySwap}, strategies...)
		}
	} else if strategies, err = remediate.ParseStrategies(*remStrategies); err != nil {
		return nil, errUsage{fmt.Errorf("--remediation.strategies: %w", err)}
	}
	if err := checkLimits([]limit{
		durationIn("stale-threshold", staleThreshold, time.Second, 24*time.Hour, false),
		intIn("metrics.stuck-info-limit", stuckCap, 0, 10000),
		intIn("web.max-connections", maxConns, 1, 65536),
		intIn("web.max-connections-per-ip", maxConnsIP, 1, 65536),
		intIn("netlink.receive-buffer", rcvbuf, 64<<10, 1<<30),
		durationIn("netlink.resync-interval", resync, 10*time.Second, 24*time.Hour, true),
		durationIn("arp.conflict-window", conflict, 100*time.Millisecond, time.Hour, false),
		durationIn("tracer.interval", tracerInterval, 100*time.Millisecond, time.Minute, false),
		durationIn("tracer.window", tracerWindow, 100*time.Millisecond, time.Hour, false),
		durationIn("tracer.period", tracerPeriod, *tracerWindow, 24*time.Hour, false),
		floatIn("remediation.rate", remRate, 0.01, 10000),
		floatIn("remediation.interface-rate", remIfRate, 0.01, 10000),
		intIn("remediation.concurrency", remConc, 1, 256),
		intIn("remediation.queue", remQueue, 1, 1_000_000),
		durationIn("remediation.verify-timeout", remVerify, 100*time.Millisecond, 5*time.Minute, false),
		durationIn("remediation.kernel-timeout", remKernel, time.Second, 10*time.Minute, false),
		intIn("manage.max", manageMax, 1, 1_000_000),
		intIn("tracer.max-map-entries", maxMap, 1024, 1<<22),
		durationIn("manage.idle", manageIdle, time.Second, 7*24*time.Hour, true),
		durationIn("manage.failed-timeout", manageFailed, time.Second, 24*time.Hour, false),
	}); err != nil {
		return nil, errUsage{err}
	}
	cfg := agent.Config{
		Include: include, Exclude: exclude,
		StaleThreshold:      *staleThreshold,
		MetricsListen:       *listen,
		WebConfigFile:       *webConfig,
		MaxConnections:      *maxConns,
		MaxConnectionsPerIP: *maxConnsIP,
		ControlSocket:       *controlSocket,
		StuckInfoCap:        *stuckCap,
		ReceiveBuffer:       *rcvbuf,
		ResyncInterval:      *resync,
		ConflictWindow:      *conflict,
		Tracer:              tmode,
		TracerInterval:      *tracerInterval,
		TracerWindow:        *tracerWindow,
		TracerPeriod:        *tracerPeriod,
		RefusePrograms:      refuse,
		TracerMaxMap:        *maxMap,
		DatapathInterfaces:  dpIfaces,
		DatapathMode:        mode,
		DatapathAuto:        auto,
		Remediation: remediate.Config{
			Mode: rmode, Scope: rscope, Strategies: strategies,
			Filter:           remediate.Filter{Interfaces: remIf, ExcludeInterfaces: remExIf, AllowCIDRs: remAllow, DenyCIDRs: remDeny},
			Rate:             *remRate,
			PerInterfaceRate: *remIfRate,
			MaxConcurrent:    *remConc,
			QueueSize:        *remQueue,
			VerifyTimeout:    *remVerify,
			KernelTimeout:    *remKernel,
			Manage: remediate.ManageConfig{Supported: manageOK, Max: *manageMax, Idle: *manageIdle,
				FailedTimeout: *manageFailed, ReleaseOnExit: *manageRelease},
		},
		Logger: log,
	}
	if err := cfg.Validate(); err != nil {
		return nil, errUsage{err}
	}
	fatal, inert := remediate.Inert(cfg.Remediation, auto)
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
	log.Info("starting neighwatch", "version", metrics.Version, "revision", metrics.BuildRevision())
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
