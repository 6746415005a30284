package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"runtime/debug"
	"sort"
	"strings"
	"time"

	"github.com/neighwatch/neighwatch/internal/agent"
)

// configPoll is how often the configuration file is read for changes. A
// ConfigMap update (an atomic swap of the ..data symlink) shows up as
// new content at the same path.
const configPoll = 2 * time.Second

// reloadLoop reloads the configuration on SIGHUP and when the file's
// content changes. A broken file keeps the running configuration: one
// line says why, and the reload metrics say it failed. Changes to keys
// that need a restart are named in one line.
func reloadLoop(ctx context.Context, args []string, st *agentSetup, hup <-chan os.Signal, out chan<- agent.Reload) {
	log := st.cfg.Logger
	applied := make(map[string]string, len(st.values))
	for k, v := range st.values {
		applied[k] = v
	}
	var last []byte
	if st.configFile != "" {
		last, _ = readConfigBytes(st.configFile)
	}
	send := func(r agent.Reload) {
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
		next, err := agentConfig(args, io.Discard)
		if err != nil {
			log.Error("configuration reload failed, keeping the running configuration: "+err.Error(), "trigger", trigger)
			send(agent.Reload{Err: err})
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
		send(agent.Reload{Config: next.cfg, ModeSource: next.modeSource})
		log.Info("configuration reloaded", "file", st.configFile, "trigger", trigger, "remediation", next.cfg.Remediation.Mode, "mode_source", next.modeSource)
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
			last, _ = readConfigBytes(st.configFile)
			reload("SIGHUP")
		case <-tick.C:
			if st.configFile == "" {
				continue
			}
			b, err := readConfigBytes(st.configFile)
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
