package remediate

import (
	"log/slog"
	"sync/atomic"
)

// settings are the engine's mode, where it came from, and the
// configuration in force: read by every part of the engine, changed at
// runtime (the toggle, a reload).
type settings struct {
	cfg    atomic.Pointer[Config] // replaced whole by Reconfigure
	source atomic.Value           // string: where the mode came from
	mode   atomic.Value           // Mode
	log    *slog.Logger
	// modeChanged is told the new mode when it changes; reconfigured,
	// the new configuration.
	modeChanged  func(Mode)
	reconfigured func(*Config)
}

func newSettings(cfg *Config, modeChanged func(Mode), reconfigured func(*Config)) *settings {
	s := &settings{log: cfg.Logger, modeChanged: modeChanged, reconfigured: reconfigured}
	s.cfg.Store(cfg)
	s.mode.Store(cfg.Mode)
	return s
}

// ModeSource says where the mode in force came from (flag, file,
// default, runtime), as the agent set it.
func (s *settings) ModeSource() string {
	src, _ := s.source.Load().(string)
	return src
}

// SetModeSource records where the mode in force came from.
func (s *settings) SetModeSource(src string) { s.source.Store(src) }

// conf returns the configuration in force.
func (s *settings) conf() *Config { return s.cfg.Load() }

// Config returns the configuration in force.
func (s *settings) Config() Config { return *s.conf() }

// Reconfigure applies a new configuration at runtime: the mode, scope,
// strategies, filters, rates, timeouts and the manage settings. The
// queue size and the number of workers stay as they started.
func (s *settings) Reconfigure(cfg Config) {
	old := s.conf()
	cfg.defaults()
	cfg.QueueSize, cfg.MaxConcurrent, cfg.Logger = old.QueueSize, old.MaxConcurrent, old.Logger
	cfg.Manage.Supported = old.Manage.Supported
	s.cfg.Store(&cfg)
	s.reconfigured(&cfg)
	s.SetMode(cfg.Mode)
}

// Mode returns the current mode.
func (s *settings) Mode() Mode { return s.mode.Load().(Mode) }

// SetMode changes the mode at runtime.
func (s *settings) SetMode(m Mode) Mode {
	old := s.mode.Swap(m).(Mode)
	if old != m {
		s.log.Info("remediation mode changed", "from", old, "to", m)
		s.modeChanged(m)
	}
	return old
}
