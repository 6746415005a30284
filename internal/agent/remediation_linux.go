package agent

import (
	"errors"
	"fmt"
	"log/slog"

	"github.com/neighwatch/neighwatch/internal/control"
	"github.com/neighwatch/neighwatch/remediate"
	"github.com/neighwatch/neighwatch/table"
	"golang.org/x/sys/unix"
)

// remediation is the engine and what it acts through.
type remediation struct {
	engine *remediate.Engine
	actor  *remediate.NetActor
	// cannotAct says why mode "on" is refused, nil when it is possible.
	cannotAct error
	log       *slog.Logger
}

// newRemediation builds the engine. Where acting is impossible (no
// netlink handle, missing capabilities) a requested "on" becomes dry-run,
// with one log line saying why; "off" and "dry-run" stay as asked.
func newRemediation(cfg remediate.Config, c caps, tbl *table.Table, swapper remediate.Swapper, log *slog.Logger) *remediation {
	r := &remediation{log: log}
	cfg.Logger = log
	var actor remediate.Actor
	na, err := remediate.NewNetActor()
	switch {
	case err != nil:
		r.cannotAct = err
	case !c.has(unix.CAP_NET_ADMIN) || !c.has(unix.CAP_NET_RAW):
		na.Close()
		r.cannotAct = errors.New("acting needs CAP_NET_ADMIN and CAP_NET_RAW (run as root)")
	default:
		r.actor, actor = na, na
	}
	if r.cannotAct != nil && cfg.Mode == remediate.ModeOn {
		log.Warn("remediation switched from on to dry-run: " + r.cannotAct.Error())
		cfg.Mode = remediate.ModeDryRun
	}
	r.engine = remediate.New(cfg, tbl, actor, swapper)
	ec := r.engine.Config()
	log.Info("remediation", "mode", ec.Mode, "scope", ec.Scope, "strategies", fmt.Sprint(ec.Strategies), "rate", ec.Rate)
	return r
}

// reconfigure applies a reloaded configuration's remediation settings
// (all of them live); "on" where acting is impossible is dry-run.
func (r *remediation) reconfigure(c Config) {
	rc := c.Remediation
	if r.cannotAct != nil && rc.Mode == remediate.ModeOn {
		r.log.Warn("reloaded configuration asks for remediation on, but " + r.cannotAct.Error() + ": dry-run instead")
		rc.Mode = remediate.ModeDryRun
	}
	r.engine.Reconfigure(rc)
	r.engine.SetModeSource(c.ModeSource)
}

// Close releases the actor's netlink handle.
func (r *remediation) Close() {
	if r.actor != nil {
		r.actor.Close()
	}
}

// Status implements control.Remediation.
func (r *remediation) Status() control.RemediationStatus {
	c := r.engine.Config()
	st := r.engine.Stats()
	out := control.RemediationStatus{
		Mode: string(r.engine.Mode()), ModeSource: r.engine.ModeSource(), Scope: string(c.Scope), Rate: c.Rate, InterfaceRate: c.PerInterfaceRate,
		Queue: st.Queue, RateLimited: st.Counts[remediate.RateLimited], Dropped: st.Counts[remediate.QueueFull],
		Actions: map[string]map[string]uint64{},
	}
	for _, s := range c.Strategies {
		out.Strategies = append(out.Strategies, string(s))
	}
	for s, outs := range st.Actions {
		for o, n := range outs {
			if n == 0 {
				continue
			}
			if out.Actions[string(s)] == nil {
				out.Actions[string(s)] = map[string]uint64{}
			}
			out.Actions[string(s)][string(o)] = n
		}
	}
	return out
}

// SetMode implements control.Remediation: the runtime switch.
func (r *remediation) SetMode(m remediate.Mode) error {
	if m == remediate.ModeOn && r.cannotAct != nil {
		return fmt.Errorf("%w: %w", control.ErrCannotAct, r.cannotAct)
	}
	r.engine.SetMode(m)
	r.engine.SetModeSource("runtime")
	return nil
}

// controlHandler is the control API: the table and events, the datapath
// modes, the tracer, and the remediation switch.
func controlHandler(tbl *table.Table, dp *datapathPart, rem *remediation, det *detection, log *slog.Logger) *control.Handler {
	h := control.NewHandler(tbl)
	h.SetPlanner(func(e *table.Entry, ifname string) string { return string(rem.engine.Next(e, ifname)) })
	h.Serve(control.Routes{Datapath: dp, Remediation: rem, Tracer: det.status, Log: log})
	return h
}
