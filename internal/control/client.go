package control

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"syscall"
)

// Client talks to a running agent over its control socket.
type Client struct {
	path string
	hc   *http.Client
}

// NewClient returns a client for the socket at path.
func NewClient(path string) *Client {
	tr := &http.Transport{
		// The socket's directories and owner checked before it is
		// reached, and reached through the checked directory.
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return dialSocket(ctx, path)
		},
		// One connection per request: a client made for one command
		// leaves nothing open on the agent's bounded socket.
		DisableKeepAlives: true,
	}
	return &Client{path: path, hc: &http.Client{Transport: tr}}
}

func (c *Client) explain(err error) error {
	switch {
	case errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.ENOENT):
		return fmt.Errorf("no agent at %s (socket missing): is `neighwatch agent` running, with this --control.socket?", c.path)
	case errors.Is(err, syscall.ECONNREFUSED):
		return fmt.Errorf("no agent listening on %s (connection refused): the agent is not running or exited", c.path)
	case errors.Is(err, os.ErrPermission) || errors.Is(err, syscall.EACCES):
		return fmt.Errorf("permission denied on %s: the control socket is root-only, run as root", c.path)
	}
	return fmt.Errorf("talk to agent at %s: %w", c.path, err)
}

func (c *Client) do(ctx context.Context, method, path string, body io.Reader) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, "http://neighwatch"+path, body)
	if err != nil {
		return nil, err
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, c.explain(err)
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		resp.Body.Close()
		return nil, fmt.Errorf("agent refused %s %s: %s: %s", method, path, resp.Status, strings.TrimSpace(string(b)))
	}
	return resp, nil
}

// Get decodes the JSON answer of a GET.
func (c *Client) Get(ctx context.Context, path string, v any) error {
	resp, err := c.do(ctx, http.MethodGet, path, nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		return fmt.Errorf("decode agent answer to %s: %w", path, err)
	}
	return nil
}

// Post sends a JSON body and decodes the JSON answer.
func (c *Client) Post(ctx context.Context, path string, in, out any) error {
	b, err := json.Marshal(in)
	if err != nil {
		return err
	}
	resp, err := c.do(ctx, http.MethodPost, path, strings.NewReader(string(b)))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if out == nil {
		return nil
	}
	return json.NewDecoder(resp.Body).Decode(out)
}

// Status returns the agent's table.
func (c *Client) Status(ctx context.Context) ([]Entry, error) {
	var out []Entry
	return out, c.Get(ctx, "/v1/status", &out)
}

// EventStream is an open subscription to the agent's events.
type EventStream struct {
	ctx  context.Context
	path string
	body io.ReadCloser
	sc   *bufio.Scanner
}

// OpenEvents subscribes to the agent's events. It returns once the agent
// has subscribed: every event after that reaches the stream (unless the
// stream falls behind by thousands, which the agent counts as dropped).
func (c *Client) OpenEvents(ctx context.Context) (*EventStream, error) {
	resp, err := c.do(ctx, http.MethodGet, "/v1/events", nil)
	if err != nil {
		return nil, err
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	return &EventStream{ctx: ctx, path: c.path, body: resp.Body, sc: sc}, nil
}

// ErrStreamClosed is Next's error when the agent ended the stream, as it
// does when it shuts down.
var ErrStreamClosed = errors.New("agent closed the event stream (it is shutting down)")

// Next blocks for the next event. It returns ErrStreamClosed when the
// agent ends the stream, and io.EOF when ctx ended.
func (s *EventStream) Next() (Event, error) {
	line, err := s.NextJSON()
	if err != nil {
		return Event{}, err
	}
	var ev Event
	if err := json.Unmarshal(line, &ev); err != nil {
		return Event{}, fmt.Errorf("decode event: %w", err)
	}
	return ev, nil
}

// NextJSON is Next, the event as the agent sent it: one JSON object,
// checked to be one, valid until the next call. A client that prints
// the stream as JSON passes it on without decoding and encoding it.
func (s *EventStream) NextJSON() ([]byte, error) {
	if !s.sc.Scan() {
		if s.ctx.Err() != nil {
			return nil, io.EOF
		}
		if err := s.sc.Err(); err != nil {
			return nil, fmt.Errorf("event stream from %s broke: %w", s.path, err)
		}
		return nil, ErrStreamClosed
	}
	line := s.sc.Bytes()
	if !json.Valid(line) {
		return nil, fmt.Errorf("decode event: not JSON: %.80q", line)
	}
	return line, nil
}

// Close ends the subscription.
func (s *EventStream) Close() error { return s.body.Close() }

// Events calls fn for each event until ctx ends (then it returns nil) or
// the agent goes away.
func (c *Client) Events(ctx context.Context, fn func(Event) error) error {
	return c.EventsJSON(ctx, func(line []byte) error {
		var ev Event
		if err := json.Unmarshal(line, &ev); err != nil {
			return fmt.Errorf("decode event: %w", err)
		}
		return fn(ev)
	})
}

// EventsJSON is Events, each event as the agent sent it (NextJSON):
// valid only until fn returns.
func (c *Client) EventsJSON(ctx context.Context, fn func(line []byte) error) error {
	s, err := c.OpenEvents(ctx)
	if err != nil {
		return err
	}
	defer s.Close()
	for {
		line, err := s.NextJSON()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := fn(line); err != nil {
			return err
		}
	}
}
