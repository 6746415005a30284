package agent

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// Part is one long-running piece of the agent.
type Part interface {
	// Run runs the part until ctx ends; an error stops the whole agent.
	Run(ctx context.Context) error
	// Ready is closed once the part does its job.
	Ready() <-chan struct{}
}

// part is a Part with the name readiness and errors report, and whether
// /readyz waits for it.
type part struct {
	Part
	name string
	gate bool
}

// task turns a function into a Part that is ready as soon as it runs,
// optionally only after another channel closes.
type task struct {
	after <-chan struct{} // nil: start at once
	run   func(ctx context.Context) error
	ready chan struct{}
}

func newTask(after <-chan struct{}, run func(ctx context.Context) error) *task {
	return &task{after: after, run: run, ready: make(chan struct{})}
}

func (t *task) Ready() <-chan struct{} { return t.ready }

func (t *task) Run(ctx context.Context) error {
	if t.after != nil {
		select {
		case <-t.after:
		case <-ctx.Done():
			return nil
		}
	}
	close(t.ready)
	return t.run(ctx)
}

// after delays a part until ch closes; its readiness is the part's own.
type afterPart struct {
	Part
	ch <-chan struct{}
}

func (a afterPart) Run(ctx context.Context) error {
	select {
	case <-a.ch:
	case <-ctx.Done():
		return nil
	}
	return a.Part.Run(ctx)
}

// burstEntries is how many entries promoted at once make a burst whose
// garbage (events, heap moves) is returned to the OS.
const burstEntries = 10000

// classifier promotes entries that crossed the stale threshold, so events
// announce them even when nobody scrapes; burst is told when a step
// promoted burstEntries or more (a large table created at once crossing
// together).
func classifier(t interface{ Advance() int }, burst func()) *task {
	return newTask(nil, func(ctx context.Context) error {
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return nil
			case <-tick.C:
				if t.Advance() >= burstEntries && burst != nil {
					burst()
				}
			}
		}
	})
}

// httpPart serves HTTP on a listener bound before the agent starts, so a
// taken port fails start-up rather than a running agent.
type httpPart struct {
	serve func() error // until stop; http.ErrServerClosed then
	stop  func()
	ready chan struct{}
}

func (h *httpPart) Ready() <-chan struct{} { return h.ready }

func (h *httpPart) Run(ctx context.Context) error {
	errc := make(chan error, 1)
	go func() { errc <- h.serve() }()
	close(h.ready)
	select {
	case err := <-errc:
		if errors.Is(err, http.ErrServerClosed) {
			return nil
		}
		return err
	case <-ctx.Done():
	}
	h.stop()
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// readiness reports the parts' readiness: /readyz waits for the gating
// parts, /readyz/PART for one part, and the same as metrics.
type readiness struct {
	parts []part
	notes []string // said with every /readyz answer
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// ready reports whether every gating part is ready.
func (r *readiness) ready() bool {
	for _, p := range r.parts {
		if p.gate && !isClosed(p.Ready()) {
			return false
		}
	}
	return true
}

// wait returns once every gating part is ready, or ctx ends.
func (r *readiness) wait(ctx context.Context) bool {
	for _, p := range r.parts {
		if !p.gate {
			continue
		}
		select {
		case <-p.Ready():
		case <-ctx.Done():
			return false
		}
	}
	return true
}

// disabler is a part that may find out it cannot run (the tracer, when the
// kernel refuses it).
type disabler interface{ Disabled() error }

// detailer is a part that says more than "ready" on /readyz/PART (the
// tracer: its features).
type detailer interface{ Detail() string }

// state says "ready", "waiting" or "disabled: why".
func (p part) state() string {
	if isClosed(p.Ready()) {
		return "ready"
	}
	if d, ok := p.Part.(disabler); ok {
		if err := d.Disabled(); err != nil {
			return "disabled: " + err.Error()
		}
	}
	return "waiting"
}

// status lists every part as "name: state", then the notes.
func (r *readiness) status() string {
	var b strings.Builder
	for _, p := range r.parts {
		fmt.Fprintf(&b, "%s: %s\n", p.name, p.state())
	}
	for _, n := range r.notes {
		fmt.Fprintln(&b, n)
	}
	return b.String()
}

// ServeHTTP answers /readyz (every gating part) and /readyz/PART.
func (r *readiness) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	name := req.PathValue("part")
	if name == "" {
		if r.ready() {
			fmt.Fprint(w, "ready\n"+r.status())
			return
		}
		http.Error(w, "not ready\n"+strings.TrimSuffix(r.status(), "\n"), http.StatusServiceUnavailable)
		return
	}
	for _, p := range r.parts {
		if p.name != name {
			continue
		}
		if st := p.state(); st == "ready" {
			fmt.Fprintln(w, "ready")
			if d, ok := p.Part.(detailer); ok {
				fmt.Fprint(w, d.Detail())
			}
		} else {
			http.Error(w, name+": "+st, http.StatusServiceUnavailable)
		}
		return
	}
	http.Error(w, fmt.Sprintf("no part %q in this agent (parts: %s)", name, r.names()), http.StatusNotFound)
}

func (r *readiness) names() string {
	var ns []string
	for _, p := range r.parts {
		ns = append(ns, p.name)
	}
	return strings.Join(ns, ", ")
}

// AgentReady implements metrics.ReadinessSource.
func (r *readiness) AgentReady() bool { return r.ready() }

// PartsReady implements metrics.ReadinessSource.
func (r *readiness) PartsReady() map[string]bool {
	out := make(map[string]bool, len(r.parts))
	for _, p := range r.parts {
		out[p.name] = isClosed(p.Ready())
	}
	return out
}
