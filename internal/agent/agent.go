package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"regexp"
	"time"

	"github.com/neighwatch/neighwatch/bpf"
	"github.com/neighwatch/neighwatch/internal/control"
	"github.com/neighwatch/neighwatch/metrics"
	"github.com/neighwatch/neighwatch/monitor"
	"github.com/neighwatch/neighwatch/remediate"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/exporter-toolkit/web"
	"golang.org/x/sync/errgroup"
)

// Config is everything the agent needs; cmd/neighwatch fills it from flags.
type Config struct {
	Include, Exclude []*regexp.Regexp
	StaleThreshold   time.Duration
	MetricsListen    string
	WebConfigFile    string
	ControlSocket    string
	StuckInfoCap     int
	ReceiveBuffer    int
	ResyncInterval   time.Duration
	ConflictWindow   time.Duration
	Tracer           bpf.TracerMode
	TracerInterval   time.Duration
	// DatapathInterfaces get the forwarding datapath in DatapathMode.
	DatapathInterfaces []string
	DatapathMode       bpf.Mode
	// DatapathAuto starts in DatapathMode (legacy) and lets remediation
	// swap an interface to neigh.
	DatapathAuto bool
	Remediation  remediate.Config
	Logger       *slog.Logger
	// OnListen, if set, is told the metrics address once it is bound
	// (tests use port 0).
	OnListen func(addr net.Addr)
}

// Validate checks what flags alone cannot.
func (c *Config) Validate() error {
	if c.StaleThreshold <= 0 {
		return fmt.Errorf("--stale-threshold must be positive, got %v", c.StaleThreshold)
	}
	if c.StuckInfoCap < 0 {
		return fmt.Errorf("--metrics.stuck-info-limit must be 0 or more, got %d", c.StuckInfoCap)
	}
	if c.WebConfigFile != "" {
		if err := web.Validate(c.WebConfigFile); err != nil {
			return fmt.Errorf("--web.config.file %s is invalid: %w", c.WebConfigFile, err)
		}
	}
	if c.TracerInterval <= 0 {
		return fmt.Errorf("--tracer.interval must be positive, got %v", c.TracerInterval)
	}
	if _, _, err := net.SplitHostPort(c.MetricsListen); err != nil {
		return fmt.Errorf("--metrics.listen %q is not host:port: %w", c.MetricsListen, err)
	}
	return nil
}

// Run runs the agent until ctx ends.
func Run(ctx context.Context, cfg Config) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	log := cfg.Logger
	caps := effectiveCaps()
	arp := true
	if !hasCap(caps, capNetRaw) {
		arp = false
		log.Warn("ARP listener disabled: needs CAP_NET_RAW (run as root); mismatch detection is off")
	}
	if !hasCap(caps, capNetAdmin) {
		log.Warn("netlink receive buffer not forced past net.core.rmem_max: needs CAP_NET_ADMIN; bursts may overflow and cost resyncs")
	}
	mon, err := monitor.New(monitor.Config{
		Include: cfg.Include, Exclude: cfg.Exclude,
		StaleThreshold: cfg.StaleThreshold,
		ReceiveBuffer:  cfg.ReceiveBuffer,
		ResyncInterval: cfg.ResyncInterval,
		ConflictWindow: cfg.ConflictWindow,
		ARP:            arp,
		Logger:         log.With("component", "monitor"),
	})
	if err != nil {
		return err
	}
	eb, err := startEBPF(cfg, caps, log)
	if err != nil {
		return err
	}
	defer eb.Close()
	coll := metrics.NewCollector(metrics.MonitorSource{M: mon}, cfg.StuckInfoCap, log)
	readyGauge := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "neighwatch_ready", Help: "1 once the first dump is loaded and the listeners are up.",
	}, func() float64 {
		select {
		case <-mon.Ready():
			return 1
		default:
			return 0
		}
	})
	rem, err := startRemediation(cfg, caps, mon, eb, log)
	if err != nil {
		return err
	}
	defer rem.Close()
	engine := rem.engine
	reg, err := metrics.NewRegistry(coll, readyGauge, metrics.NewBPFCollector(eb), metrics.NewRemediationCollector(engine))
	if err != nil {
		return fmt.Errorf("register metrics: %w", err)
	}

	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error { return mon.Run(ctx) })
	g.Go(func() error { return eb.run(ctx, mon, cfg.TracerInterval, log) })
	g.Go(func() error {
		select {
		case <-mon.Ready():
		case <-ctx.Done():
			return nil
		}
		return engine.Run(ctx)
	})

	// Metrics, health and readiness.
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelError)}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		select {
		case <-mon.Ready():
			fmt.Fprintln(w, "ready")
		default:
			http.Error(w, "not ready: initial neighbour dump not loaded yet", http.StatusServiceUnavailable)
		}
	})
	ml, err := net.Listen("tcp", cfg.MetricsListen)
	if err != nil {
		return fmt.Errorf("listen on --metrics.listen %s: %w", cfg.MetricsListen, err)
	}
	if cfg.OnListen != nil {
		cfg.OnListen(ml.Addr())
	}
	msrv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	webCfg := cfg.WebConfigFile
	systemd := false
	g.Go(func() error {
		err := web.Serve(ml, msrv, &web.FlagConfig{WebListenAddresses: &[]string{cfg.MetricsListen}, WebSystemdSocket: &systemd, WebConfigFile: &webCfg}, log)
		if errors.Is(err, http.ErrServerClosed) {
			return nil
		}
		return err
	})
	log.Info("serving metrics", "address", ml.Addr().String())

	// Control socket: without it the agent still monitors and exports.
	var csrv *http.Server
	if cfg.ControlSocket != "" {
		cl, err := control.Listen(cfg.ControlSocket)
		if err != nil {
			log.Warn("control socket disabled: status and events subcommands will not reach this agent", "err", err)
		} else {
			h := controlHandler(mon, eb, rem, log)
			csrv = &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
			g.Go(func() error {
				if err := csrv.Serve(cl); !errors.Is(err, http.ErrServerClosed) {
					return err
				}
				return nil
			})
			log.Info("serving control socket", "path", cfg.ControlSocket)
		}
	}
	g.Go(func() error {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = msrv.Shutdown(sctx)
		if csrv != nil {
			// Event streams never end on their own: close them.
			_ = csrv.Close()
			_ = os.Remove(cfg.ControlSocket)
		}
		return nil
	})
	go func() {
		select {
		case <-mon.Ready():
			log.Info("ready", "entries", mon.Table().Len())
		case <-ctx.Done():
		}
	}()
	return g.Wait()
}

// controlHandler is the control API: the table and events, the datapath
// modes, and the remediation switch.
func controlHandler(mon *monitor.Monitor, eb *ebpfParts, rem *remediation, log *slog.Logger) *control.Handler {
	h := control.NewHandler(mon.Table())
	h.Handle("GET /v1/datapath", func(w http.ResponseWriter, _ *http.Request) {
		control.WriteJSON(w, http.StatusOK, eb.DatapathModes())
	})
	h.Handle("POST /v1/datapath", func(w http.ResponseWriter, r *http.Request) {
		var req control.DatapathRequest
		if err := control.ReadJSON(r, &req); err != nil {
			control.WriteError(w, http.StatusBadRequest, err)
			return
		}
		m, err := bpf.ParseMode(req.Mode)
		if err == nil {
			err = eb.SetDatapathMode(req.Interface, m)
		}
		if err != nil {
			control.WriteError(w, http.StatusBadRequest, err)
			return
		}
		log.Info("datapath mode changed", "interface", req.Interface, "mode", m, "by", "control socket")
		control.WriteJSON(w, http.StatusOK, eb.DatapathModes())
	})
	h.Handle("GET /v1/remediation", func(w http.ResponseWriter, _ *http.Request) {
		control.WriteJSON(w, http.StatusOK, remediationStatus(rem.engine))
	})
	h.Handle("POST /v1/remediation", func(w http.ResponseWriter, r *http.Request) {
		var req control.RemediationRequest
		if err := control.ReadJSON(r, &req); err != nil {
			control.WriteError(w, http.StatusBadRequest, err)
			return
		}
		m, err := remediate.ParseMode(req.Mode)
		if err != nil {
			control.WriteError(w, http.StatusBadRequest, err)
			return
		}
		if m == remediate.ModeOn && rem.cannotAct != nil {
			control.WriteError(w, http.StatusConflict, fmt.Errorf("remediation cannot act in this agent: %w; only off and dry-run are possible", rem.cannotAct))
			return
		}
		rem.engine.SetMode(m)
		control.WriteJSON(w, http.StatusOK, remediationStatus(rem.engine))
	})
	return h
}

func remediationStatus(e *remediate.Engine) control.RemediationStatus {
	c := e.Config()
	st := control.RemediationStatus{
		Mode: string(e.Mode()), Scope: string(c.Scope), Rate: c.Rate, InterfaceRate: c.PerInterfaceRate,
		Queue: e.QueueLen(), RateLimited: e.C.RateLimited.Load(), Dropped: e.C.Dropped.Load(),
		Actions: map[string]map[string]uint64{},
	}
	for _, s := range c.Strategies {
		st.Strategies = append(st.Strategies, string(s))
	}
	for _, s := range remediate.Strategies() {
		for _, o := range remediate.Outcomes() {
			if n := e.C.Actions(s, o); n > 0 {
				if st.Actions[string(s)] == nil {
					st.Actions[string(s)] = map[string]uint64{}
				}
				st.Actions[string(s)][string(o)] = n
			}
		}
	}
	return st
}
