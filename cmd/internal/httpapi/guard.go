package httpapi

import (
	"bytes"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/geisten/geist/engine/appliance"
)

// guard wraps next with what every request passes first: the allow-list,
// the bearer token, the bound on requests in flight and on the body, and
// a recovery that turns a handler's panic into a 500.
func (s *Server) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &statusRecorder{ResponseWriter: w}
		defer func() {
			if p := recover(); p != nil {
				if p == http.ErrAbortHandler {
					panic(p)
				}
				s.log.Error("HTTP handler panic", "method", r.Method, "path", r.URL.Path, "panic", fmt.Sprint(p))
				if !rec.wrote {
					writeError(rec, http.StatusInternalServerError, "internal error")
				}
			}
			s.metrics.observeHTTP(r, rec.status(), time.Since(start))
			s.log.Debug("http", "method", r.Method, "path", r.URL.Path, "status", rec.status(), "remote", r.RemoteAddr, "ms", time.Since(start).Milliseconds())
		}()
		peer, loopback := peerAddr(r)
		if !loopback && !s.allowed(peer) {
			writeError(rec, http.StatusForbidden, fmt.Sprintf("%s is not allowed to use this geist (start geist with --http-allow listing its network)", peer))
			return
		}
		if !s.boundary(rec, r, loopback) {
			return
		}
		if s.cfg.Token != "" && !loopback && !s.tokenOK(r) && !publicPage(r) {
			rec.Header().Set("WWW-Authenticate", `Bearer realm="geist"`)
			writeError(rec, http.StatusUnauthorized, "a bearer token is required (Authorization: Bearer TOKEN, the contents of geist's --http-token-file)")
			return
		}
		if r.ContentLength > s.cfg.MaxBody {
			s.core.Reject(appliance.SourceHTTP, appliance.CodeTooLong)
			tooLarge(rec, r.ContentLength, s.cfg.MaxBody)
			return
		}
		if hasBody(r) {
			// The body is read before a slot is taken, under its own
			// deadline and budget: slow bodies cannot hold the slots.
			if !s.take(rec, budgetBody) {
				return
			}
			body, eb := s.readBody(rec, r)
			<-s.slots[budgetBody]
			if eb != nil {
				if eb.status == http.StatusRequestEntityTooLarge {
					s.core.Reject(appliance.SourceHTTP, appliance.CodeTooLong)
					rec.Header().Set("Connection", "close")
				}
				writeError(rec, eb.status, eb.msg)
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
		} else {
			r.Body = http.NoBody
		}
		b := budgetOf(r)
		if !s.take(rec, b) {
			return
		}
		defer func() { <-s.slots[b] }()
		next.ServeHTTP(rec, r)
	})
}

func tooLarge(w http.ResponseWriter, n, limit int64) {
	w.Header().Set("Connection", "close")
	msg := fmt.Sprintf("request body larger than the limit of %d bytes (--http-max-body)", limit)
	if n > 0 {
		msg = fmt.Sprintf("request body of %d bytes exceeds the limit of %d bytes (--http-max-body)", n, limit)
	}
	writeError(w, http.StatusRequestEntityTooLarge, msg)
}

// budget is a class of routes with slots of its own.
type budget int

const (
	budgetGeneral budget = iota // the API: chat, generate, show, tags...
	budgetOps                   // /healthz, /readyz, /metrics, /api/version, /
	budgetPull                  // /api/pull
	budgetFeed                  // the status page's live feed
	budgetBody                  // bodies being read
)

var budgetNames = [...]string{"requests", "operations requests", "pulls", "live feeds", "request bodies being read"}

func budgetOf(r *http.Request) budget {
	switch r.URL.Path {
	case "/healthz", "/readyz", "/metrics", "/api/version", "/":
		return budgetOps
	case "/api/pull":
		return budgetPull
	case "/api/geist/events":
		return budgetFeed
	}
	return budgetGeneral
}

// take takes a slot of budget b, or answers 503.
func (s *Server) take(w http.ResponseWriter, b budget) bool {
	ch := s.slots[b]
	select {
	case ch <- struct{}{}:
		return true
	default:
		s.busy(w, fmt.Sprintf("too many %s at once (%d); retry later", budgetNames[b], cap(ch)))
		return false
	}
}

// readBody reads a request's whole body within BodyTimeout and MaxBody.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) ([]byte, *errBody) {
	rc := http.NewResponseController(w)
	rc.SetReadDeadline(time.Now().Add(s.cfg.BodyTimeout))
	// Clear the deadline once the body is read: the server's watch for
	// the client going away reads the connection after the body, and a
	// passed deadline would end (cancel) a long stream.
	defer rc.SetReadDeadline(time.Time{})
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.MaxBody))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return nil, &errBody{http.StatusRequestEntityTooLarge, fmt.Sprintf("request body larger than the limit of %d bytes (--http-max-body)", tooBig.Limit)}
		}
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return nil, &errBody{http.StatusRequestTimeout, fmt.Sprintf("the request body did not arrive within %v", s.cfg.BodyTimeout)}
		}
		return nil, &errBody{http.StatusBadRequest, "reading the request body: " + err.Error()}
	}
	return body, nil
}

// busy refuses a request with 503 and Retry-After.
func (s *Server) busy(w http.ResponseWriter, msg string) {
	w.Header().Set("Retry-After", strconv.Itoa(int((s.cfg.RetryAfter+time.Second-1)/time.Second)))
	writeError(w, http.StatusServiceUnavailable, msg)
}

// peerAddr returns the client's address and whether it is loopback.
func peerAddr(r *http.Request) (netip.Addr, bool) {
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		// Not TCP (a test's pipe, a unix socket): local by construction.
		return netip.Addr{}, true
	}
	a := ap.Addr().Unmap()
	return a, a.IsLoopback()
}

func (s *Server) allowed(a netip.Addr) bool {
	for _, p := range s.cfg.Allow {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

func (s *Server) tokenOK(r *http.Request) bool {
	h := r.Header.Get("Authorization")
	tok, ok := strings.CutPrefix(h, "Bearer ")
	if !ok {
		tok, ok = strings.CutPrefix(h, "bearer ")
	}
	return ok && subtle.ConstantTimeCompare([]byte(strings.TrimSpace(tok)), []byte(s.cfg.Token)) == 1
}

// errBody is a request body that could not be read or decoded; status is
// what the client gets.
type errBody struct {
	status int
	msg    string
}

func (e *errBody) Error() string { return e.msg }

// decode reads r's JSON body into v (the guard has read it, within the
// body timeout and the size bound). An empty body decodes as {}.
func (s *Server) decode(w http.ResponseWriter, r *http.Request, v any) *errBody {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return &errBody{http.StatusBadRequest, "reading the request body: " + err.Error()}
	}
	if len(strings.TrimSpace(string(body))) == 0 {
		body = []byte("{}")
	}
	if err := json.Unmarshal(body, v); err != nil {
		return &errBody{http.StatusBadRequest, jsonError(err)}
	}
	return nil
}

// jsonError describes a JSON decoding error the way a client can act on.
func jsonError(err error) string {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return fmt.Sprintf("invalid JSON at byte %d: %v", se.Offset, se)
	case errors.As(err, &te):
		if te.Field != "" {
			return fmt.Sprintf("invalid JSON: field %q must be %s, not %s", te.Field, te.Type, te.Value)
		}
		return fmt.Sprintf("invalid JSON: want %s, not %s", te.Type, te.Value)
	}
	return "invalid JSON: " + err.Error()
}

// statusRecorder remembers the status written, and passes Flush and the
// ResponseController's methods through.
type statusRecorder struct {
	http.ResponseWriter
	code  int
	wrote bool
}

func (r *statusRecorder) WriteHeader(code int) {
	if !r.wrote {
		r.code, r.wrote = code, true
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *statusRecorder) Write(b []byte) (int, error) {
	if !r.wrote {
		r.code, r.wrote = http.StatusOK, true
	}
	return r.ResponseWriter.Write(b)
}

func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

func (r *statusRecorder) Flush() {
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (r *statusRecorder) status() int {
	if !r.wrote {
		return http.StatusOK
	}
	return r.code
}
