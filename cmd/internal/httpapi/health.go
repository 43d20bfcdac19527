package httpapi

import (
	"context"
	"net/http"
	"time"

	"github.com/geisten/geist/engine/appliance"
)

// check is one health or readiness check.
type check struct {
	name  string
	ready bool // a readiness check only (/readyz), not liveness (/healthz)
	fn    func(context.Context) error
}

// Check adds a check: fn returns nil when all is well, or what is wrong.
// Liveness checks (readiness false) answer /healthz and /readyz: a failing
// one means the process should be restarted. Readiness checks answer
// /readyz only: a failing one means geist cannot serve requests now
// (model not loaded, storage not writable). fn gets 2 s.
func (s *Server) Check(name string, readiness bool, fn func(context.Context) error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.checks = append(s.checks, check{name: name, ready: readiness, fn: fn})
}

// healthReport is the body of /healthz and /readyz.
type healthReport struct {
	Status string            `json:"status"` // "ok", "degraded" (serving, with 200) or "fail"
	Checks map[string]string `json:"checks"` // by name: "ok" or what failed
	// Degraded names the parts working less than configured (storage,
	// broker, gpio) and why: geist serves on without them, so the status
	// code stays 200.
	Degraded map[appliance.Part]string `json:"degraded,omitempty"`
}

func (s *Server) runChecks(ctx context.Context, readiness bool) (healthReport, bool) {
	s.mu.Lock()
	checks := append([]check(nil), s.checks...)
	s.mu.Unlock()
	rep := healthReport{Status: "ok", Checks: map[string]string{}}
	ok := true
	for _, c := range checks {
		if c.ready && !readiness {
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		err := c.fn(cctx)
		cancel()
		if err != nil {
			rep.Checks[c.name] = err.Error()
			ok = false
			continue
		}
		rep.Checks[c.name] = "ok"
	}
	if rep.Degraded = s.core.Snapshot().Degraded; len(rep.Degraded) > 0 {
		rep.Status = "degraded"
	}
	if !ok {
		rep.Status = "fail"
	}
	return rep, ok
}

func (s *Server) health(readiness bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		rep, ok := s.runChecks(r.Context(), readiness)
		status := http.StatusOK
		if !ok {
			status = http.StatusServiceUnavailable
		}
		w.Header().Set("Cache-Control", "no-store")
		writeJSON(w, status, rep)
	}
}

// builtinChecks are the checks every server has: the core runs and
// accepts requests (liveness), the model is loaded (readiness).
func (s *Server) builtinChecks() {
	s.Check("core", false, func(context.Context) error {
		select {
		case <-s.core.Done():
			return errStopped
		default:
		}
		return nil
	})
	// A worker stuck on one request (the watchdog's Stuck) serves no
	// other: not ready, until it returns (or geist is restarted).
	s.Check("worker", true, func(context.Context) error {
		if st := s.core.Snapshot(); st.Stuck != "" {
			return healthError(st.Stuck)
		}
		return nil
	})
	s.Check("model", true, func(context.Context) error {
		if s.cfg.Model.Name == "" {
			return errNoModel
		}
		if st := s.core.Snapshot(); st.State == "stopping" {
			return errStopping
		}
		return nil
	})
}

type healthError string

func (e healthError) Error() string { return string(e) }

const (
	errStopped  = healthError("the appliance core has stopped")
	errStopping = healthError("geist is shutting down")
	errNoModel  = healthError("no model loaded")
)
