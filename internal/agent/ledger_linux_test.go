package agent

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/neighwatch/neighwatch/remediate"
	"github.com/neighwatch/neighwatch/table"
)

// The tests in this file guard rules of the ledger (docs/rules.md).

// TestFailedReloadKeepsTheRunningConfiguration: a reload that failed
// applies nothing and says so (neighwatch_config_last_reload_successful
// 0); the next good one applies.
func TestFailedReloadKeepsTheRunningConfiguration(t *testing.T) {
	a := &agent{config: &configState{}}
	a.config.set(true)
	reloads := make(chan Reload)
	var applied []time.Duration
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- a.reloader(reloads, []func(Config){func(c Config) { applied = append(applied, c.StaleThreshold) }})(ctx)
	}()
	reloads <- Reload{Err: errors.New("config file: bad")}
	reloads <- Reload{Config: Config{StaleThreshold: 90 * time.Second}} // the sentinel: read after the failure
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if len(applied) != 1 || applied[0] != 90*time.Second {
		t.Errorf("applied %v, want only the good reload's 90s", applied)
	}
	if ok, _ := a.config.LastReload(); !ok {
		t.Error("the last reload (good) not counted as successful")
	}
	// And a failure last: the metric says so.
	reloads = make(chan Reload)
	ctx, cancel = context.WithCancel(context.Background())
	go func() { done <- a.reloader(reloads, nil)(ctx) }()
	reloads <- Reload{Err: errors.New("config file: bad")}
	reloads <- Reload{Err: errors.New("config file: bad")} // the sentinel
	cancel()
	<-done
	if ok, _ := a.config.LastReload(); ok {
		t.Error("a failed reload counted as successful")
	}
}

// TestNoOnWithoutTheMeansToAct: where acting is impossible (no
// capabilities), a reloaded "on" becomes dry-run and the runtime switch
// refuses "on"; dry-run and off are as asked.
func TestNoOnWithoutTheMeansToAct(t *testing.T) {
	tb := table.New(time.Minute, nil)
	r := &remediation{cannotAct: errors.New("acting needs CAP_NET_ADMIN and CAP_NET_RAW (run as root)"), log: slog.New(slog.DiscardHandler)}
	r.engine = remediate.New(remediate.Config{Mode: remediate.ModeDryRun, Scope: remediate.ScopeStuck}, tb, nil, nil)
	c := Config{Remediation: remediate.Config{Mode: remediate.ModeOn, Scope: remediate.ScopeStuck}, ModeSource: "file"}
	r.reconfigure(c)
	if m := r.engine.Mode(); m != remediate.ModeDryRun {
		t.Errorf("reloaded on without the means to act: %s, want dry-run", m)
	}
	if err := r.SetMode(remediate.ModeOn); err == nil || r.engine.Mode() == remediate.ModeOn {
		t.Errorf("runtime on without the means to act: %v, mode %s; want refused", err, r.engine.Mode())
	}
	if err := r.SetMode(remediate.ModeOff); err != nil || r.engine.Mode() != remediate.ModeOff || r.engine.ModeSource() != "runtime" {
		t.Errorf("runtime off: %v, mode %s from %s", err, r.engine.Mode(), r.engine.ModeSource())
	}
}
