package agent

import (
	"errors"
	"fmt"
	"log/slog"

	"github.com/neighwatch/neighwatch/monitor"
	"github.com/neighwatch/neighwatch/remediate"
)

// remediation is the engine and what it acts through.
type remediation struct {
	engine *remediate.Engine
	actor  *remediate.NetActor
	// cannotAct says why mode "on" is refused, nil when it is possible.
	cannotAct error
}

// startRemediation builds the engine. Where acting is impossible (no
// netlink handle, missing capabilities) a requested "on" becomes dry-run,
// with one log line saying why; "off" and "dry-run" stay as asked.
func startRemediation(cfg Config, caps uint64, mon *monitor.Monitor, eb *ebpfParts, log *slog.Logger) (*remediation, error) {
	r := &remediation{}
	rcfg := cfg.Remediation
	rcfg.Logger = log.With("component", "remediation")
	var actor remediate.Actor
	na, err := remediate.NewNetActor()
	switch {
	case err != nil:
		r.cannotAct = err
	case !hasCap(caps, capNetAdmin) || !hasCap(caps, capNetRaw):
		na.Close()
		r.cannotAct = errors.New("acting needs CAP_NET_ADMIN and CAP_NET_RAW (run as root)")
	default:
		r.actor, actor = na, na
	}
	if r.cannotAct != nil && rcfg.Mode == remediate.ModeOn {
		log.Warn("remediation switched from on to dry-run: " + r.cannotAct.Error())
		rcfg.Mode = remediate.ModeDryRun
	}
	var swapper remediate.Swapper
	if cfg.DatapathAuto {
		swapper = eb
	}
	r.engine = remediate.New(rcfg, mon.Table(), actor, swapper)
	c := r.engine.Config()
	log.Info("remediation", "mode", c.Mode, "scope", c.Scope, "strategies", fmt.Sprint(c.Strategies), "rate", c.Rate)
	return r, nil
}

// Close releases the actor's netlink handle.
func (r *remediation) Close() {
	if r.actor != nil {
		r.actor.Close()
	}
}
