package control

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/neighwatch/neighwatch/bpf"
	"github.com/neighwatch/neighwatch/remediate"
)

// Datapath is the forwarding datapath as the control API drives it.
type Datapath interface {
	// Modes returns the mode of each interface with the datapath, by name.
	Modes() map[string]bpf.Mode
	// SetMode swaps the datapath of a named interface.
	SetMode(name string, m bpf.Mode) error
}

// Remediation is the runtime remediation switch.
type Remediation interface {
	Status() RemediationStatus
	// SetMode switches the mode; an error wrapping ErrCannotAct means the
	// mode is impossible in this agent (the request conflicts with it).
	SetMode(m remediate.Mode) error
}

// ErrCannotAct marks a remediation mode the agent cannot take.
var ErrCannotAct = errors.New("remediation cannot act in this agent")

// Routes are the endpoints beyond the table and its events: the datapath
// modes, the tracer's state and the remediation switch.
type Routes struct {
	Datapath    Datapath
	Remediation Remediation
	Tracer      func() TracerStatus
	Log         *slog.Logger
}

// Serve adds the routes to the handler.
func (h *Handler) Serve(r Routes) {
	log := r.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	h.Handle("GET /v1/datapath", func(w http.ResponseWriter, _ *http.Request) {
		WriteJSON(w, http.StatusOK, r.Datapath.Modes())
	})
	h.Handle("POST /v1/datapath", func(w http.ResponseWriter, req *http.Request) {
		var in DatapathRequest
		if err := ReadJSON(req, &in); err != nil {
			WriteError(w, http.StatusBadRequest, err)
			return
		}
		m, err := bpf.ParseMode(in.Mode)
		if err == nil {
			err = r.Datapath.SetMode(in.Interface, m)
		}
		if err != nil {
			WriteError(w, http.StatusBadRequest, err)
			return
		}
		log.Info("datapath mode changed", "interface", in.Interface, "mode", m, "by", "control socket")
		WriteJSON(w, http.StatusOK, r.Datapath.Modes())
	})
	h.Handle("GET /v1/tracer", func(w http.ResponseWriter, _ *http.Request) {
		WriteJSON(w, http.StatusOK, r.Tracer())
	})
	h.Handle("GET /v1/remediation", func(w http.ResponseWriter, _ *http.Request) {
		WriteJSON(w, http.StatusOK, r.Remediation.Status())
	})
	h.Handle("POST /v1/remediation", func(w http.ResponseWriter, req *http.Request) {
		var in RemediationRequest
		if err := ReadJSON(req, &in); err != nil {
			WriteError(w, http.StatusBadRequest, err)
			return
		}
		m, err := remediate.ParseMode(in.Mode)
		if err != nil {
			WriteError(w, http.StatusBadRequest, err)
			return
		}
		if err := r.Remediation.SetMode(m); err != nil {
			code := http.StatusBadRequest
			if errors.Is(err, ErrCannotAct) {
				code = http.StatusConflict
			}
			WriteError(w, code, fmt.Errorf("%w; only off and dry-run are possible", err))
			return
		}
		WriteJSON(w, http.StatusOK, r.Remediation.Status())
	})
}
