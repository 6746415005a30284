package control

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/neighwatch/neighwatch/internal/table"
)

// Handler serves the control API for a table.
type Handler struct {
	table *table.Table
	mux   *http.ServeMux
}

// NewHandler returns the control API. extra handlers (remediation, ...) can
// be added with Handle.
func NewHandler(t *table.Table) *Handler {
	h := &Handler{table: t, mux: http.NewServeMux()}
	h.mux.HandleFunc("GET /v1/status", h.status)
	h.mux.HandleFunc("GET /v1/events", h.events)
	return h
}

// Handle adds an endpoint.
func (h *Handler) Handle(pattern string, fn http.HandlerFunc) { h.mux.HandleFunc(pattern, fn) }

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.mux.ServeHTTP(w, r) }

// Status returns every entry, sorted by interface, family and address.
func Status(t *table.Table) []Entry {
	entries, names := t.Snapshot()
	now := time.Now()
	out := make([]Entry, len(entries))
	sort.Slice(entries, func(i, j int) bool {
		a, b := entries[i], entries[j]
		if names[a.Ifindex] != names[b.Ifindex] {
			return names[a.Ifindex] < names[b.Ifindex]
		}
		return a.Addr.Less(b.Addr)
	})
	for i := range entries {
		out[i] = EntryFromTable(&entries[i], names[entries[i].Ifindex], now)
	}
	return out
}

func (h *Handler) status(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(Status(h.table))
}

func (h *Handler) events(w http.ResponseWriter, r *http.Request) {
	fl, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming unsupported", http.StatusInternalServerError)
		return
	}
	sub := h.table.Events().Subscribe(4096)
	defer sub.Close()
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	fl.Flush()
	enc := json.NewEncoder(w)
	for {
		select {
		case <-r.Context().Done():
			return
		case ev, ok := <-sub.C():
			if !ok {
				return
			}
			if err := enc.Encode(EventFromTable(ev)); err != nil {
				return
			}
			for len(sub.C()) > 0 { // write what is queued before flushing
				if err := enc.Encode(EventFromTable(<-sub.C())); err != nil {
					return
				}
			}
			fl.Flush()
		}
	}
}

// Listen creates the control socket at path, mode 0600, replacing a stale
// socket left by a previous run but refusing to replace anything else.
func Listen(path string) (net.Listener, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("create directory for control socket %s: %w", path, err)
	}
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode()&os.ModeSocket == 0 {
			return nil, fmt.Errorf("control socket path %s exists and is not a socket; remove it or choose another --control.socket", path)
		}
		if c, err := net.DialTimeout("unix", path, 200*time.Millisecond); err == nil {
			c.Close()
			return nil, fmt.Errorf("another agent is listening on %s; stop it or choose another --control.socket", path)
		}
		_ = os.Remove(path)
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	l, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("listen on control socket %s: %w", path, err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		l.Close()
		return nil, fmt.Errorf("restrict control socket %s to mode 0600: %w", path, err)
	}
	return l, nil
}

// DatapathRequest asks for a datapath mode on an interface.
type DatapathRequest struct {
	Interface string `json:"interface"`
	Mode      string `json:"mode"`
}

// WriteJSON answers with v as JSON.
func WriteJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// WriteError answers with an error message.
func WriteError(w http.ResponseWriter, code int, err error) {
	http.Error(w, err.Error(), code)
}

// ReadJSON decodes a request body of at most 64 KiB, refusing unknown fields.
func ReadJSON(r *http.Request, v any) error {
	dec := json.NewDecoder(http.MaxBytesReader(nil, r.Body, 64<<10))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("bad request body: %w", err)
	}
	return nil
}

// RemediationRequest sets the remediation mode.
type RemediationRequest struct {
	Mode string `json:"mode"`
}

// RemediationStatus is `neighwatch remediation status`.
type RemediationStatus struct {
	Mode          string                       `json:"mode"`
	Scope         string                       `json:"scope"`
	Strategies    []string                     `json:"strategies"`
	Rate          float64                      `json:"rate"`
	InterfaceRate float64                      `json:"interface_rate"`
	Queue         int                          `json:"queue"`
	RateLimited   uint64                       `json:"rate_limited"`
	Dropped       uint64                       `json:"dropped"`
	Actions       map[string]map[string]uint64 `json:"actions"`
}

// Server serves the control API. Stop ends event streams cleanly, so a
// client can tell an agent that shut down from a broken connection.
type Server struct {
	srv    *http.Server
	cancel context.CancelFunc
}

// NewServer returns a server for h.
func NewServer(h http.Handler) *Server {
	ctx, cancel := context.WithCancel(context.Background())
	return &Server{
		srv: &http.Server{
			Handler:           h,
			ReadHeaderTimeout: 10 * time.Second,
			BaseContext:       func(net.Listener) context.Context { return ctx },
		},
		cancel: cancel,
	}
}

// Serve serves on ln until Stop; it returns http.ErrServerClosed then.
func (s *Server) Serve(ln net.Listener) error { return s.srv.Serve(ln) }

// Stop ends every request: event streams finish their response, the
// rest get up to 5 s, then connections are closed.
func (s *Server) Stop() {
	s.cancel()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.srv.Shutdown(ctx); err != nil {
		_ = s.srv.Close()
	}
}
