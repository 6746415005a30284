package agent

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/neighwatch/neighwatch/bpf"
	"github.com/neighwatch/neighwatch/internal/control"
	"github.com/neighwatch/neighwatch/metrics"
	"github.com/neighwatch/neighwatch/metrics/connlimit"
	"github.com/neighwatch/neighwatch/monitor/addrs"
	"github.com/neighwatch/neighwatch/monitor/evidence"
	"github.com/neighwatch/neighwatch/monitor/feed"
	"github.com/neighwatch/neighwatch/monitor/mirror"
	"github.com/neighwatch/neighwatch/monitor/neightbl"
	"github.com/neighwatch/neighwatch/remediate"
	"github.com/neighwatch/neighwatch/table"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/exporter-toolkit/web"
	"github.com/vishvananda/netns"
	"golang.org/x/sync/errgroup"
	"golang.org/x/sys/unix"
)

// Config is everything the agent needs; load (options_linux.go) fills it
// from the flags and the configuration file.
type Config struct {
	// StaleThreshold: STALE this long makes an entry stale-long. The
	// table and remediation read it; a reload applies it live.
	StaleThreshold time.Duration
	Mirror         mirror.Config   // OnLink and Logger are the agent's
	Evidence       evidence.Config // Logger is the agent's
	Tracer         TracerConfig
	Datapath       DatapathConfig
	Remediation    remediate.Config
	Metrics        MetricsConfig
	// ControlSocket is the control API's socket; empty turns the API off.
	ControlSocket string
	Logger        *slog.Logger
	// OnListen, if set, is told the metrics address once it is bound
	// (tests use port 0).
	OnListen func(addr net.Addr)
	// ModeSource says where Remediation.Mode came from (flag, file,
	// default), for `remediation status`.
	ModeSource string
	// Reloads, if set, delivers configurations reloaded from the
	// configuration file: the stale threshold and remediation apply
	// live; a Reload with Err counts as a failed reload.
	Reloads <-chan Reload
}

// TracerConfig is the tracer's: how it counts, what it must not load,
// its maps' cap, and the feed's pace.
type TracerConfig struct {
	Mode bpf.TracerMode
	// Refuse are tracer programs not to load, as if the kernel had
	// refused them (drills of the blind-spot alert).
	Refuse []string
	// MaxMap caps the capacity of each tracer map.
	MaxMap int
	Feed   feed.Config // Logger is the agent's
}

// DatapathConfig is the forwarding datapath's: Interfaces get it in
// Mode; Auto starts in Mode (legacy) and lets remediation swap an
// interface to neigh.
type DatapathConfig struct {
	Interfaces []string
	Mode       bpf.Mode
	Auto       bool
}

// MetricsConfig is the metrics address's.
type MetricsConfig struct {
	Listen        string
	WebConfigFile string
	// MaxConnections and MaxConnectionsPerIP bound the listener.
	MaxConnections, MaxConnectionsPerIP int
	StuckInfoCap                        int
}

// Defaults is the configuration on every default, each taken from the
// part it configures: the one set of defaults the flags show (the
// metrics address and control socket are the command's).
func Defaults() Config {
	return Config{
		StaleThreshold: time.Minute,
		Mirror:         mirror.Defaults(),
		Evidence:       evidence.Defaults(),
		Tracer:         TracerConfig{Mode: bpf.TracerAuto, MaxMap: bpf.MaxMapEntries, Feed: feed.Defaults()},
		Datapath:       DatapathConfig{Mode: bpf.ModeLegacy},
		Remediation:    remediate.Defaults(),
		Metrics:        MetricsConfig{MaxConnections: 64, MaxConnectionsPerIP: 8, StuckInfoCap: 100},
	}
}

// Reload is one configuration reload: a Config (its ModeSource too), or
// the Err that kept the running one.
type Reload struct {
	Config Config
	Err    error
}

// Run runs the agent until ctx ends. The configuration is load's, which
// checks every value against the option table (options.go).
func Run(ctx context.Context, cfg Config) error {
	a, err := build(cfg)
	if err != nil {
		return err
	}
	defer a.close()
	return a.run(ctx)
}

// agent is the built agent: the table, the parts that run around it, and
// what to release when they stop.
type agent struct {
	log         *slog.Logger
	table       *table.Table
	parts       []part
	ready       *readiness
	closers     []func()
	httpSources map[string]metrics.ConnSource // the HTTP listeners, by name
	memory      memReleaser
	config      *configState
}

func (a *agent) close() {
	for i := len(a.closers) - 1; i >= 0; i-- {
		a.closers[i]()
	}
}

// run runs every part under one errgroup: the first to fail stops the
// others, and the agent returns once all have stopped.
func (a *agent) run(ctx context.Context) error {
	g, ctx := errgroup.WithContext(ctx)
	for _, p := range a.parts {
		g.Go(func() error {
			if err := p.Run(ctx); err != nil {
				return fmt.Errorf("%s: %w", p.name, err)
			}
			return nil
		})
	}
	g.Go(func() error {
		if a.ready.wait(ctx) {
			a.log.Info("ready", "entries", a.table.Len())
			// The first dump's garbage (and the tracer's seeding, which
			// releases its own) would otherwise stay with the process
			// until the runtime's next cycle, minutes away on an idle
			// agent.
			a.memory.release("the table is loaded")
		}
		return nil
	})
	return g.Wait()
}

// build makes every part, in the order data flows through them: each
// step adds its parts and what the later steps read (the wiring).
func build(cfg Config) (a *agent, err error) {
	a = &agent{log: cfg.Logger, table: table.New(cfg.StaleThreshold, nil), httpSources: map[string]metrics.ConnSource{},
		memory: memReleaser{log: cfg.Logger}, ready: &readiness{}, config: &configState{ok: true, at: time.Now()}}
	defer func() {
		if err != nil {
			a.close()
		}
	}()
	w := &wiring{cfg: cfg, caps: effectiveCaps(), log: cfg.Logger}
	for _, step := range []func(*wiring, *agent) error{
		(*wiring).plan,        // the memory plan, the capabilities
		(*wiring).sources,     // the mirror, and the evidence it tells of links
		(*wiring).datapath,    // the forwarding datapath, where asked for
		(*wiring).tracer,      // the bypass tracer and its feed
		(*wiring).classifier,  // stale-long and stuck, as time passes
		(*wiring).remediation, // the engine, and the live options it owns
		(*wiring).reloads,     // reloaded options, to the parts that own them
		(*wiring).control,     // the control socket
		(*wiring).metrics,     // the metrics address
	} {
		if err := step(w, a); err != nil {
			return a, err
		}
	}
	a.ready.parts = a.parts
	return a, nil
}

// wiring is what the steps of build hand on to the later ones.
type wiring struct {
	cfg  Config
	caps caps
	log  *slog.Logger

	ml      memlock
	mir     *mirror.Mirror
	ev      *evidence.Watcher // nil without CAP_NET_RAW
	dp      *datapathPart
	tp      *tracerPart
	tracing bool // the tracer part runs
	rem     *remediation
	// live apply the options a reload may change, each by the part that
	// owns them.
	live       []func(Config)
	collectors []prometheus.Collector
	controlSrv *httpPart // nil when the control API is off
}

func (w *wiring) add(a *agent, p Part, name string, gate bool) {
	a.parts = append(a.parts, part{Part: p, name: name, gate: gate})
}

// plan says, before anything loads, what the node's tables will cost the
// pod and what the missing capabilities will cost.
func (w *wiring) plan(*agent) error {
	most, now := nodeNeighbours()
	if msg := memWarning(now, tracerMapSlots(w.cfg.Tracer, w.caps, now), most, tracerMapSlots(w.cfg.Tracer, w.caps, most), cgroupMemoryLimit(), kernelTracerCost()); msg != "" {
		w.log.Warn(msg)
	}
	if !w.caps.has(unix.CAP_NET_ADMIN) {
		w.log.Warn("netlink receive buffer not forced past net.core.rmem_max: needs CAP_NET_ADMIN; bursts may overflow and cost resyncs")
	}
	if (w.cfg.Tracer.Mode != bpf.TracerOff || len(w.cfg.Datapath.Interfaces) > 0) && w.caps.bpf() {
		w.ml = raiseMemlock(w.log)
	}
	return nil
}

// sources builds the mirror of the kernel's tables and the ARP and NDP
// listeners, which listen on the links the mirror learns.
func (w *wiring) sources(a *agent) error {
	if w.caps.has(unix.CAP_NET_RAW) {
		ecfg := w.cfg.Evidence
		ecfg.Logger = w.log.With("component", "evidence")
		w.ev = evidence.New(ecfg, a.table)
	} else {
		w.log.Warn("ARP listener disabled: needs CAP_NET_RAW (run as root); mismatch detection is off")
	}
	mcfg := w.cfg.Mirror
	mcfg.OnLink, mcfg.Logger = linksToEvidence(w.ev), w.log.With("component", "mirror")
	w.mir = mirror.New(mcfg, a.table)
	w.add(a, w.mir, "mirror", true)
	if w.ev != nil {
		w.add(a, afterPart{w.ev, w.mir.LinksReady()}, "evidence", true)
	}
	w.collectors = append(w.collectors,
		metrics.NewTableCollector(a.table, w.cfg.Metrics.StuckInfoCap, addrs.NewReader(netns.None()).Segments, w.log),
		metrics.NewNetlinkCollector(w.mir, w.log),
		metrics.NewKernelTableCollector(neightbl.NewReader(netns.None()), w.log))
	if w.ev != nil {
		w.collectors = append(w.collectors, metrics.NewEvidenceCollector(w.ev, a.table.LinkName, w.log))
	}
	return nil
}

// datapath takes an earlier agent's clsact filters away and attaches the
// forwarding datapath where the configuration asks for it.
func (w *wiring) datapath(a *agent) error {
	if w.caps.has(unix.CAP_NET_ADMIN) {
		// Before 6.6 the programs hang on clsact filters, which outlive a
		// killed agent: take an earlier agent's away before attaching.
		if n, err := bpf.RemoveStaleFilters(); err != nil {
			w.log.Warn("removing an earlier agent's clsact filters failed", "removed", n, "err", err)
		} else if n > 0 {
			w.log.Info("removed an earlier agent's clsact filters", "filters", n)
		}
	}
	dp, err := attachDatapath(w.cfg.Datapath, w.caps, w.ml, w.log)
	if err != nil {
		return err
	}
	w.dp = dp
	a.closers = append(a.closers, func() { _ = dp.Close() })
	if dp.dp != nil {
		w.collectors = append(w.collectors, metrics.NewDatapathCollector(dp, w.log))
	}
	return nil
}

// tracer builds the tracer's part: it loads beside the mirror's first
// dump and seeds once it is in.
func (w *wiring) tracer(a *agent) error {
	tlog := w.log.With("component", "tracer")
	fcfg := w.cfg.Tracer.Feed
	fcfg.Logger = tlog
	w.tp = &tracerPart{mode: w.cfg.Tracer.Mode, refuse: w.cfg.Tracer.Refuse, memlock: w.ml, maxMap: w.cfg.Tracer.MaxMap,
		table: a.table, synced: w.mir.Ready(), links: w.mir, log: tlog, ready: make(chan struct{}), cfg: fcfg}
	w.tracing = tracerWanted(w.cfg.Tracer.Mode, w.caps, w.log)
	if w.tracing {
		w.add(a, w.tp, "tracer", false)
	}
	w.collectors = append(w.collectors, metrics.NewTracerCollector(w.tp.reads, a.table.LinkName, w.log))
	return nil
}

// classifier moves entries between classes as time passes; a burst of
// them crossing the stale threshold gives its memory back after.
func (w *wiring) classifier(a *agent) error {
	w.add(a, classifier(a.table, func() { a.memory.release("a burst of entries crossing the stale threshold") }), "classifier", false)
	// The table owns the stale threshold.
	w.live = append(w.live, func(c Config) { a.table.SetThreshold(c.StaleThreshold) })
	return nil
}

// remediation builds the engine; it runs once the first dump is in.
func (w *wiring) remediation(a *agent) error {
	w.rem = newRemediation(w.cfg.Remediation, w.caps, a.table, w.dp.swapper(), w.log.With("component", "remediation"))
	a.closers = append(a.closers, w.rem.Close)
	w.rem.engine.SetModeSource(w.cfg.ModeSource)
	w.add(a, newTask(w.mir.Ready(), w.rem.engine.Run), "remediation", false)
	w.live = append(w.live, w.rem.reconfigure)
	w.collectors = append(w.collectors, metrics.NewRemediationCollector(w.rem.engine, w.log))
	return nil
}

// reloads hands each reloaded configuration to the parts that own its
// live options.
func (w *wiring) reloads(a *agent) error {
	w.add(a, newTask(nil, a.reloader(w.cfg.Reloads, w.live)), "config", false)
	w.collectors = append(w.collectors, metrics.NewConfigCollector(a.config, w.log))
	return nil
}

// control binds the control socket (before the metrics address: the
// agent does not start without it).
func (w *wiring) control(a *agent) error {
	det := &detection{tracerWanted: w.tracing, tracer: w.tp, links: w.mir, engine: w.rem.engine}
	w.collectors = append(w.collectors, metrics.NewDetectionCollector(det, w.log), metrics.NewReadinessCollector(a.ready, w.log))
	var err error
	w.controlSrv, err = a.controlServer(w.cfg.ControlSocket, controlHandler(a.table, w.dp, w.rem, det, w.log))
	return err
}

// metrics binds the metrics address; it and the control socket are the
// last parts.
func (w *wiring) metrics(a *agent) error {
	srv, err := a.metricsServer(w.cfg, append(w.collectors, metrics.NewHTTPCollector(a.httpSources, w.log)))
	if err != nil {
		return err
	}
	w.add(a, srv, "metrics", true)
	if w.controlSrv != nil {
		w.add(a, w.controlSrv, "control", true)
	}
	return nil
}

// linksToEvidence tells the evidence watcher which interfaces to listen
// on, as the mirror learns them.
func linksToEvidence(ev *evidence.Watcher) func(int32, *mirror.Link) {
	if ev == nil {
		return nil
	}
	return func(ifindex int32, l *mirror.Link) {
		switch {
		case l == nil:
			ev.ForgetLink(ifindex)
		case !l.Watched || !l.Ethernet:
			ev.SetLink(ifindex, nil)
		default:
			ev.SetLink(ifindex, &evidence.Link{Name: l.Name, HardwareAddr: l.HardwareAddr, MTU: l.MTU})
		}
	}
}

// metricsServer binds the metrics address and serves /metrics, /healthz
// and /readyz through exporter-toolkit (TLS and basic auth).
func (a *agent) metricsServer(cfg Config, collectors []prometheus.Collector) (*httpPart, error) {
	reg, err := metrics.NewRegistry(collectors...)
	if err != nil {
		return nil, fmt.Errorf("register metrics: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorLog: slog.NewLogLogger(a.log.Handler(), slog.LevelError)}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.Handle("/readyz", a.ready)
	mux.Handle("/readyz/{part}", a.ready)
	landing, err := web.NewLandingPage(web.LandingConfig{
		Name:        "neighwatch",
		Description: "Watches the kernel's neighbour tables for entries that stay STALE while traffic flows to them",
		Version:     metrics.Version(),
		Profiling:   "false",
		Links: []web.LandingLinks{
			{Address: "/metrics", Text: "Metrics"},
			{Address: "/readyz", Text: "Readiness", Description: "each part of the agent and whether it is ready"},
			{Address: "/healthz", Text: "Health"},
		},
	})
	if err != nil {
		return nil, fmt.Errorf("landing page: %w", err)
	}
	mux.Handle("/", landing)
	tcp, err := net.Listen("tcp", cfg.Metrics.Listen)
	if err != nil {
		return nil, fmt.Errorf("listen on --metrics.listen %s: %w", cfg.Metrics.Listen, err)
	}
	ln := connlimit.Wrap(tcp, cfg.Metrics.MaxConnections, cfg.Metrics.MaxConnectionsPerIP)
	ln.OnDrain(func() { a.memory.release("a flood of connections has gone") })
	a.httpSources["metrics"] = ln
	a.closers = append(a.closers, func() { ln.Close() })
	if cfg.OnListen != nil {
		cfg.OnListen(ln.Addr())
	}
	a.log.Info("serving metrics", "address", ln.Addr().String())
	webCfg, systemd := cfg.Metrics.WebConfigFile, false
	flags := &web.FlagConfig{WebListenAddresses: &[]string{cfg.Metrics.Listen}, WebSystemdSocket: &systemd, WebConfigFile: &webCfg}
	// Every request is bounded in time: a client that sends a header or a
	// body slowly, or never, holds its connection for seconds, not for
	// ever.
	srv := &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       2 * time.Minute, // longer than any scrape interval
		MaxHeaderBytes:    16 << 10,
		ErrorLog:          slog.NewLogLogger(a.log.Handler(), slog.LevelDebug),
	}
	// The listener learns which connections are being answered and which
	// clients were answered with success: they keep their slots when a
	// flood fills the listener.
	ln.Serve(srv)
	return &httpPart{
		serve: func() error { return web.Serve(ln, srv, flags, a.log) },
		stop: func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = srv.Shutdown(ctx)
		},
		ready: make(chan struct{}),
	}, nil
}

// controlServer binds the control socket; the agent does not start
// without it, unless path is empty: then the control API is off, said in
// the log and in /readyz, and it returns nil.
func (a *agent) controlServer(path string, h http.Handler) (*httpPart, error) {
	if path == "" {
		const off = `control API off (--control.socket=""): status, events and the runtime remediation switch do not reach this agent; remediation changes need a restart`
		a.log.Warn(off)
		a.ready.notes = append(a.ready.notes, off)
		return nil, nil
	}
	ln, err := control.Listen(path)
	if err != nil {
		return nil, fmt.Errorf("--control.socket: %w (or --control.socket=\"\" to run without the control API)", err)
	}
	// Closing the listener removes the socket, through the directory it
	// was checked in, and only while it is still the agent's.
	a.closers = append(a.closers, func() { ln.Close() })
	a.log.Info("serving control socket", "path", path)
	srv := control.NewServer(h)
	a.httpSources["control"] = srv
	return &httpPart{
		serve: func() error { return srv.Serve(ln) },
		stop: func() {
			srv.Stop() // event streams end cleanly: clients see a shutdown
			ln.Close() // removes the socket
		},
		ready: make(chan struct{}),
	}, nil
}
