package control

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/pprof"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/neighwatch/neighwatch/internal/quote"
	"github.com/neighwatch/neighwatch/metrics/connlimit"
	"github.com/neighwatch/neighwatch/table"
)

// maxSocketPath is the longest path a Unix socket address holds on Linux
// (sun_path is 108 bytes with its NUL).
const maxSocketPath = 107

// MaxSubscribers bounds the event streams open at once.
const MaxSubscribers = 16

// StreamBuffer is how many events a client of the event stream may
// fall behind by before it loses some (each counted, in
// neighwatch_events_dropped_total{subscriber="events"}): under 10,000
// changes a second to a million entries the stream carries about 20,000
// events a second, in bursts (a storm of entries turning stale-long),
// and a buffer of 1,024 lost 101,076 of them in a minute, this one none
// (BENCHMARKS.md). About 4 MiB a stream (an event is about 240 bytes),
// at most MaxSubscribers streams, for root only.
const StreamBuffer = 16384

// streamFlush is how long a line of the event stream may wait to be
// flushed to the client, with the lines that come after it.
const streamFlush = 10 * time.Millisecond

// streamWrite bounds one write of an event stream: a subscriber that
// stops reading is cut off once its socket buffer is full.
var streamWrite = 10 * time.Second

// Table is what the control API reads: a classified copy of every entry,
// and the event stream, which a *table.Table is.
type Table interface {
	Snapshot() ([]table.Entry, map[int32]string)
	Events() *table.Broadcaster
}

// Handler serves the control API for a table.
type Handler struct {
	table Table
	mux   *http.ServeMux
	subs  atomic.Int32
	plan  Planner
}

// Planner names what remediation would do next to an entry ("" for
// nothing); the agent wires the engine's in.
type Planner func(e *table.Entry, ifname string) string

// SetPlanner makes status show each entry's next action.
func (h *Handler) SetPlanner(p Planner) { h.plan = p }

// NewHandler returns the control API. extra handlers (remediation, ...) can
// be added with Handle.
func NewHandler(t Table) *Handler {
	h := &Handler{table: t, mux: http.NewServeMux()}
	h.mux.HandleFunc("GET /v1/status", h.status)
	h.mux.HandleFunc("GET /v1/events", h.events)
	// The runtime's profiles, for whoever may use the socket (root): a
	// heap profile with ?gc=1 is the live heap after a forced collection.
	h.mux.HandleFunc("GET /debug/pprof/", boundedProfile(pprof.Index))
	h.mux.HandleFunc("GET /debug/pprof/profile", boundedProfile(pprof.Profile))
	return h
}

// MaxProfileSeconds bounds a profile's ?seconds=: the CPU profile and the
// delta profiles (heap, allocs, ...) hold their connection that long, and
// net/http/pprof takes any number (an hour held a connection, and the one
// CPU profiler, for the hour). It is below the server's write timeout,
// which would cut the answer off.
const MaxProfileSeconds = 25

// boundedProfile refuses a profile request whose seconds are not a whole
// number from 1 to MaxProfileSeconds.
func boundedProfile(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if v := r.URL.Query()["seconds"]; len(v) > 0 {
			n, err := strconv.Atoi(v[0])
			if err != nil || n < 1 || n > MaxProfileSeconds || len(v) > 1 {
				http.Error(w, fmt.Sprintf("seconds=%s: want one whole number of seconds from 1 to %d", quote.Input(strings.Join(v, ",")), MaxProfileSeconds), http.StatusBadRequest)
				return
			}
		}
		next(w, r)
	}
}

// Handle adds an endpoint.
func (h *Handler) Handle(pattern string, fn http.HandlerFunc) { h.mux.HandleFunc(pattern, fn) }

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.mux.ServeHTTP(w, r) }

// Status returns every entry, sorted by interface, family and address;
// plan, when not nil, fills in each entry's next action.
func Status(t Table, plan Planner) []Entry {
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
		if plan != nil {
			out[i].NextAction = plan(&entries[i], names[entries[i].Ifindex])
		}
	}
	return out
}

func (h *Handler) status(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(Status(h.table, h.plan))
}

func (h *Handler) events(w http.ResponseWriter, r *http.Request) {
	fl, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming unsupported", http.StatusInternalServerError)
		return
	}
	if h.subs.Add(1) > MaxSubscribers {
		h.subs.Add(-1)
		http.Error(w, fmt.Sprintf("too many event streams open (%d); close one and retry", MaxSubscribers), http.StatusServiceUnavailable)
		return
	}
	defer h.subs.Add(-1)
	// The stream lasts as long as the client reads: each write has
	// streamWrite to complete, not the whole response the server's
	// WriteTimeout; a client that stops reading loses its stream (and
	// its slot) once the socket's buffer is full.
	rc := http.NewResponseController(w)
	_ = rc.SetWriteDeadline(time.Time{})
	sub := h.table.Events().SubscribeAs(table.SubscriberStream, StreamBuffer, nil)
	defer sub.Close()
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	fl.Flush()
	// Lines go out in batches: what is queued is written together, and
	// flushed within streamFlush of the first line written since the
	// last flush, not once a line (a write and a read a line for the
	// client, at 20,000 events a second under churn).
	var line []byte
	flush := time.NewTimer(time.Hour)
	flush.Stop()
	pending := false
	for {
		select {
		case <-r.Context().Done():
			return
		case <-flush.C:
			_ = rc.SetWriteDeadline(time.Now().Add(streamWrite))
			fl.Flush()
			pending = false
		case ev, ok := <-sub.C():
			if !ok {
				return
			}
			line = AppendEventJSON(line[:0], ev)
			for len(sub.C()) > 0 && len(line) < 32<<10 {
				line = AppendEventJSON(line, <-sub.C())
			}
			_ = rc.SetWriteDeadline(time.Now().Add(streamWrite))
			if _, err := w.Write(line); err != nil {
				return
			}
			if !pending {
				pending = true
				flush.Reset(streamFlush)
			}
		}
	}
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

// ReadJSON decodes a request body of at most 64 KiB into the struct v,
// strictly: field names must match the struct's JSON names exactly (not
// in another case), and unknown fields, a field given twice (the last
// would silently win) and anything after the object are errors.
func ReadJSON(r *http.Request, v any) error {
	body, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, 64<<10))
	if err != nil {
		return fmt.Errorf("bad request body: %w", err)
	}
	if err := checkFields(body, jsonNames(v)); err != nil {
		return fmt.Errorf("bad request body: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("bad request body: %w", err)
	}
	return nil
}

// checkFields reads body as one JSON object and refuses a field that is
// not known or that comes twice, and anything after the object.
func checkFields(body []byte, known map[string]bool) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return errors.New("want one JSON object")
	}
	seen := map[string]bool{}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return fmt.Errorf("want one JSON object: %w", err)
		}
		name, _ := t.(string)
		switch {
		case !known[name]:
			return fmt.Errorf("unknown field %s", quote.Input(name))
		case seen[name]:
			return fmt.Errorf("field %s given twice", quote.Input(name))
		}
		seen[name] = true
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return fmt.Errorf("want one JSON object: %w", err)
		}
	}
	if _, err := dec.Token(); err != nil {
		return fmt.Errorf("want one JSON object: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("want one JSON object, and nothing after it")
	}
	return nil
}

// jsonNames lists the JSON field names of the struct v points to.
func jsonNames(v any) map[string]bool {
	out := map[string]bool{}
	t := reflect.TypeOf(v)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		if name == "" {
			name = t.Field(i).Name
		}
		out[name] = true
	}
	return out
}

// RemediationRequest sets the remediation mode.
type RemediationRequest struct {
	Mode string `json:"mode"`
}

// RemediationStatus is `neighwatch remediation status`.
type RemediationStatus struct {
	Mode          string                       `json:"mode"`
	ModeSource    string                       `json:"mode_source"` // flag, file, default, or runtime (until the next reload)
	Scope         string                       `json:"scope"`
	Strategies    []string                     `json:"strategies"`
	Rate          float64                      `json:"rate"`
	InterfaceRate float64                      `json:"interface_rate"`
	Queue         int                          `json:"queue"`
	RateLimited   uint64                       `json:"rate_limited"`
	Dropped       uint64                       `json:"dropped"`
	Actions       map[string]map[string]uint64 `json:"actions"`
}

// MaxConnections bounds the control socket's open connections.
const MaxConnections = 64

// refusal is the whole answer a connection past MaxConnections reads.
var refusal = func() string {
	body := fmt.Sprintf("neighwatch: all %d connections of the control socket are in use (event streams or requests being answered); retry in a few seconds, or close an idle `neighwatch events`\n", MaxConnections)
	return fmt.Sprintf("HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
}()

// Server serves the control API, with every request bounded in time and
// the connections in number. Stop ends event streams cleanly, so a client
// can tell an agent that shut down from a broken connection.
type Server struct {
	srv    *http.Server
	cancel context.CancelFunc
	ln     atomic.Pointer[connlimit.Listener]
}

// NewServer returns a server for h.
func NewServer(h http.Handler) *Server {
	ctx, cancel := context.WithCancel(context.Background())
	return &Server{
		srv: &http.Server{
			Handler:           h,
			ReadHeaderTimeout: 5 * time.Second,
			ReadTimeout:       10 * time.Second,
			WriteTimeout:      30 * time.Second, // the event stream lifts it
			IdleTimeout:       time.Minute,
			MaxHeaderBytes:    16 << 10,
			BaseContext:       func(net.Listener) context.Context { return ctx },
		},
		cancel: cancel,
	}
}

// Serve serves on ln, at most MaxConnections at once, until Stop; it
// returns http.ErrServerClosed then.
func (s *Server) Serve(ln net.Listener) error {
	l := connlimit.Wrap(ln, MaxConnections, MaxConnections)
	// Whoever reaches the socket passed its mode: an answer earns no
	// process the right to keep idle connections, and a refused one is
	// told why instead of reading an end of file.
	l.TrustNone()
	l.RefuseWith([]byte(refusal))
	// The server tells the listener which connections are being answered
	// (an event stream, a request) and which are idle: only idle or
	// stalled ones give up their slot to a newcomer.
	l.Serve(s.srv)
	s.ln.Store(l)
	return s.srv.Serve(l)
}

// Stats returns the connection counts, zero before Serve.
func (s *Server) Stats() connlimit.Stats {
	if l := s.ln.Load(); l != nil {
		return l.Stats()
	}
	return connlimit.Stats{}
}

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
