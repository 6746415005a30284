package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/cilium/ebpf/rlimit"
	"github.com/neighwatch/neighwatch/bpf"
	"github.com/neighwatch/neighwatch/metrics"
	"github.com/neighwatch/neighwatch/monitor"
	"github.com/neighwatch/neighwatch/remediate"
)

// ebpfParts holds the tracer and the datapath, whichever run.
type ebpfParts struct {
	tracer *bpf.Tracer
	feed   bpf.FeedCounters
	dp     *bpf.Datapath

	mu      sync.Mutex
	dpNames map[int]string // ifindex -> name of interfaces with the datapath
	auto    bool           // --datapath.mode=auto: remediation may swap to neigh
	log     *slog.Logger
}

// legacyFeeding returns the interfaces whose legacy datapath forwards to
// egress (the stuck entry's interface); when the datapath has no record of
// it, every interface still in legacy mode.
func (e *ebpfParts) legacyFeeding(egress int32) []int {
	if !e.auto || e.dp == nil {
		return nil
	}
	feeds, err := e.dp.FeedsInto(int(egress))
	if err != nil || len(feeds) == 0 {
		feeds = nil
		for i := range e.dp.Attached() {
			feeds = append(feeds, i)
		}
	}
	var out []int
	for _, i := range feeds {
		if e.dp.Mode(i) == bpf.ModeLegacy {
			out = append(out, i)
		}
	}
	return out
}

// CanSwap implements remediate.Swapper: some interface whose legacy
// datapath feeds the stuck entry's interface may be swapped
// (--datapath.mode=auto).
func (e *ebpfParts) CanSwap(egress int32) bool { return len(e.legacyFeeding(egress)) > 0 }

// Swap implements remediate.Swapper: each interface feeding egress moves
// to bpf_redirect_neigh, atomically.
func (e *ebpfParts) Swap(egress int32) error {
	for _, in := range e.legacyFeeding(egress) {
		if err := e.dp.SetMode(in, bpf.ModeNeigh); err != nil {
			return err
		}
		e.mu.Lock()
		name := e.dpNames[in]
		e.mu.Unlock()
		e.log.Warn("datapath swapped to neigh (bpf_redirect_neigh): it forwards to an interface with a stuck entry that receives bypass traffic",
			"interface", name, "egress_ifindex", egress)
	}
	return nil
}

var (
	_ metrics.BPFSource = (*ebpfParts)(nil)
	_ remediate.Swapper = (*ebpfParts)(nil)
)

func (e *ebpfParts) TracerMode() string {
	if e.tracer == nil {
		return "off"
	}
	return string(e.tracer.Mode)
}

func (e *ebpfParts) TracerStats() (bpf.TracerStats, bool) {
	if e.tracer == nil {
		return bpf.TracerStats{}, false
	}
	s, err := e.tracer.Stats()
	return s, err == nil
}

func (e *ebpfParts) FeedCounters() *bpf.FeedCounters { return &e.feed }

func (e *ebpfParts) Redirects() ([3][2]uint64, bool) {
	if e.tracer == nil {
		return [3][2]uint64{}, false
	}
	c, ok, err := e.tracer.Redirects()
	return c, ok && err == nil
}

func (e *ebpfParts) DatapathCounts() (map[bpf.Decision]uint64, bool) {
	if e.dp == nil {
		return nil, false
	}
	c, err := e.dp.Counts()
	return c, err == nil
}

func (e *ebpfParts) DatapathModes() map[string]bpf.Mode {
	out := map[string]bpf.Mode{}
	if e.dp == nil {
		return out
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	for idx, m := range e.dp.Attached() {
		// Follow renames: the name as the kernel has it now.
		if ifi, err := net.InterfaceByIndex(idx); err == nil && ifi.Name != e.dpNames[idx] {
			e.dpNames[idx] = ifi.Name
		}
		out[e.dpNames[idx]] = m
	}
	return out
}

// SetDatapathMode swaps the datapath of a named interface.
func (e *ebpfParts) SetDatapathMode(name string, m bpf.Mode) error {
	if e.dp == nil {
		return errors.New("no datapath is attached (start the agent with --datapath.interfaces)")
	}
	e.mu.Lock()
	idx := -1
	for i, n := range e.dpNames {
		if n == name {
			idx = i
		}
	}
	e.mu.Unlock()
	if idx < 0 {
		return fmt.Errorf("interface %q has no datapath attached", name)
	}
	return e.dp.SetMode(idx, m)
}

// startEBPF loads what the configuration asks for. The tracer is optional:
// if it cannot run, the agent says why in one line and goes on. The
// datapath was asked for explicitly, so failing to attach it is an error.
func startEBPF(cfg Config, caps uint64, log *slog.Logger) (*ebpfParts, error) {
	e := &ebpfParts{dpNames: make(map[int]string), auto: cfg.DatapathAuto, log: log}
	bpfOK := hasCap(caps, capSysAdmin) || (hasCap(caps, capBPF) && hasCap(caps, capPerfmon))
	if (cfg.Tracer != bpf.TracerOff || len(cfg.DatapathInterfaces) > 0) && bpfOK {
		// Kernels before 5.11 charge BPF memory to RLIMIT_MEMLOCK.
		if err := rlimit.RemoveMemlock(); err != nil {
			log.Debug("raising RLIMIT_MEMLOCK failed", "err", err)
		}
	}
	if len(cfg.DatapathInterfaces) > 0 {
		if !bpfOK || !hasCap(caps, capNetAdmin) {
			return nil, errors.New("--datapath.interfaces needs CAP_BPF, CAP_PERFMON and CAP_NET_ADMIN (or root)")
		}
		dp, err := bpf.LoadDatapath()
		if err != nil {
			return nil, err
		}
		for _, name := range cfg.DatapathInterfaces {
			ifi, err := net.InterfaceByName(name)
			if err != nil {
				dp.Close()
				return nil, fmt.Errorf("--datapath.interfaces: interface %q: %w", name, err)
			}
			if err := dp.Attach(ifi.Index, cfg.DatapathMode); err != nil {
				dp.Close()
				return nil, err
			}
			e.dpNames[ifi.Index] = name
			log.Info("datapath attached", "interface", name, "mode", cfg.DatapathMode, "auto_swap", cfg.DatapathAuto, "skip_neigh", dp.SkipNeigh)
		}
		e.dp = dp
	}
	switch {
	case cfg.Tracer == bpf.TracerOff:
		log.Info("tracer disabled by --tracer=off: bypass traffic is not counted; stuck needs ARP evidence")
	case !bpfOK:
		log.Warn("tracer disabled: needs CAP_BPF and CAP_PERFMON (or root); bypass traffic is not counted")
	default:
		tr, err := bpf.LoadTracer(bpf.TracerOptions{Mode: cfg.Tracer})
		switch {
		case errors.Is(err, bpf.ErrNoBTF):
			log.Warn("tracer disabled: " + err.Error())
		case err != nil:
			log.Warn("tracer disabled: loading it failed", "err", err)
		default:
			if tr.Fallback != nil {
				log.Warn("fentry tracer unavailable, counting at transmit (xmit mode) instead", "reason", tr.Fallback.Error())
			}
			e.tracer = tr
		}
	}
	return e, nil
}

func (e *ebpfParts) run(ctx context.Context, mon *monitor.Monitor, interval time.Duration, log *slog.Logger) error {
	if e.tracer == nil {
		<-ctx.Done()
		return nil
	}
	return e.tracer.Feed(ctx, mon, interval, &e.feed, log.With("component", "tracer"))
}

// Close detaches the datapath (the kernel forwards normally again) and the
// tracer.
func (e *ebpfParts) Close() error {
	var errs []error
	if e.tracer != nil {
		errs = append(errs, e.tracer.Close())
	}
	if e.dp != nil {
		errs = append(errs, e.dp.Close())
	}
	return errors.Join(errs...)
}
