package main

import (
	"fmt"

	"github.com/neighwatch/neighwatch/bpf"
	"github.com/neighwatch/neighwatch/internal/agent"
)

// datapathMode is --datapath.mode: legacy, neigh, or auto (legacy that
// remediation may swap).
type datapathMode struct{ c *agent.DatapathConfig }

func (v datapathMode) String() string {
	switch {
	case v.c == nil:
		return ""
	case v.c.Auto:
		return "auto"
	}
	return string(v.c.Mode)
}

func (v datapathMode) Set(s string) error {
	if s == "auto" {
		v.c.Mode, v.c.Auto = bpf.ModeLegacy, true
		return nil
	}
	m, err := bpf.ParseMode(s)
	if err != nil {
		return fmt.Errorf("%w (or auto)", err)
	}
	v.c.Mode, v.c.Auto = m, false
	return nil
}
