package control

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/neighwatch/neighwatch/bpf"
	"github.com/neighwatch/neighwatch/remediate"
	"github.com/neighwatch/neighwatch/table"
)

// modes is the datapath as the handler sees it: the modes of the named
// interfaces, which SetMode changes only for a name it has.
type modes map[string]bpf.Mode

func (m modes) Modes() map[string]bpf.Mode { return m }
func (m modes) SetMode(name string, mode bpf.Mode) error {
	if _, ok := m[name]; !ok {
		return errors.New("no datapath on " + name)
	}
	m[name] = mode
	return nil
}

// switchOnly is the remediation switch: it refuses on, as an agent
// without CAP_NET_ADMIN does.
type switchOnly struct{ mode remediate.Mode }

func (s *switchOnly) Status() RemediationStatus { return RemediationStatus{Mode: string(s.mode)} }
func (s *switchOnly) SetMode(m remediate.Mode) error {
	if m == remediate.ModeOn {
		return ErrCannotAct
	}
	s.mode = m
	return nil
}

// FuzzHandler sends the control API any method, path and body. Whatever
// comes, the handler answers (no panic) with a status code; a refusal is
// one line of at most 1 KiB; and state changes only by a request that
// was answered 200 and asked for it: the remediation mode and the
// datapath modes are one of the values a request may set.
func FuzzHandler(f *testing.F) {
	for _, s := range []struct{ method, path, body string }{
		{"GET", "/v1/status", ""},
		{"GET", "/v1/events", ""},
		{"GET", "/v1/remediation", ""},
		{"POST", "/v1/remediation", `{"mode":"dry-run"}`},
		{"POST", "/v1/remediation", `{"mode":"on"}`},
		{"POST", "/v1/remediation", `{"mode":"off","mode":"dry-run"}`},
		{"POST", "/v1/datapath", `{"interface":"eth0","mode":"neigh"}`},
		{"GET", "/v1/datapath", ""},
		{"GET", "/v1/tracer", ""},
		{"GET", "/debug/pprof/heap?seconds=1", ""},
		{"GET", "/debug/pprof/profile?seconds=99", ""},
		{"PUT", "/v1/status/../remediation", "{}"},
	} {
		f.Add(s.method, s.path, []byte(s.body))
	}
	tb := table.New(time.Minute, nil)
	tb.SetLinkName(2, "eth0")
	tb.Apply(table.CauseNetlink, table.Update{Family: table.FamilyInet, Ifindex: 2, State: table.StateStale,
		Addr: netip.MustParseAddr("10.0.0.7"), LLAddr: net.HardwareAddr{2, 0, 0, 0, 0, 7}})
	f.Fuzz(func(t *testing.T, method, path string, body []byte) {
		dp := modes{"eth0": bpf.ModeLegacy}
		rem := &switchOnly{mode: remediate.ModeOff}
		h := NewHandler(tb)
		h.Serve(Routes{Datapath: dp, Remediation: rem, Tracer: func() TracerStatus { return TracerStatus{} }})
		// An ended request: streams and profiles return at once.
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		req, err := http.NewRequestWithContext(ctx, method, "http://neighwatch"+path, strings.NewReader(string(body)))
		if err != nil {
			return // not a request a client can send
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		code := w.Code
		if code < 200 || code > 599 {
			t.Fatalf("%s %s: status %d", method, path, code)
		}
		if code >= 400 {
			msg := strings.TrimSuffix(w.Body.String(), "\n")
			if strings.Contains(msg, "\n") || len(msg) > 1024 {
				t.Fatalf("%s %s: refusal of %d bytes, lines %d: %.200q", method, path, len(msg), strings.Count(msg, "\n")+1, msg)
			}
		}
		if code != http.StatusOK || method != http.MethodPost {
			if rem.mode != remediate.ModeOff || dp["eth0"] != bpf.ModeLegacy || len(dp) != 1 {
				t.Fatalf("%s %s answered %d but changed the state: remediation %s, datapath %v", method, path, code, rem.mode, dp)
			}
		}
		if rem.mode != remediate.ModeOff && rem.mode != remediate.ModeDryRun {
			t.Fatalf("remediation mode %q", rem.mode)
		}
	})
}
