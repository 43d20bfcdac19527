// Package httpapi is geist's HTTP front end: the listener, its guard
// (allow-list, bearer token, body bounds, timeouts), Ollama's API
// (/api/...), OpenAI's (/v1/...), Prometheus metrics (/metrics) and
// health checks (/healthz, /readyz). Every generation it serves is a
// request of the appliance core (SourceHTTP): queued, cancelled when the
// client goes away, refused as busy (503 with Retry-After) when the queue
// is full, counted in the core's state.
//
// Other front ends mount their handlers on the same listener with Handle
// (behind the same guard) and register their metrics with Registry; Check
// adds a health or readiness check.
package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/geisten/geist/engine/appliance"
)

// DefaultAddr is Ollama's address, so that clients work unchanged.
const DefaultAddr = "127.0.0.1:11434"

// Core is what the HTTP front end needs of the appliance core
// (*appliance.Core): generations, the refusals it counts, the state and
// its events for metrics and health, and when it stopped.
type Core interface {
	Submit(ctx context.Context, r appliance.Request, sink appliance.Sink) (*appliance.Ticket, error)
	Reject(src appliance.Source, code appliance.Code)
	Snapshot() appliance.State
	Watch(fn func(appliance.Event)) (stop func())
	Done() <-chan struct{}
	// Warm brings the prompt cache's last prefix back into memory in the
	// background (Ollama's load request); false if it cannot.
	Warm() bool
}

// Config configures a Server; zero values take the defaults noted.
type Config struct {
	// Core answers the generations. Required.
	Core Core
	// Model is the loaded model: what /api/tags, /api/show, /api/ps and
	// /v1/models describe and what requests must name.
	Model Model
	// Embedder, if set, answers /api/embed, /api/embeddings and
	// /v1/embeddings; nil: they are 501.
	Embedder Embedder
	// Store, if set, lists other stored models (/api/show) and pulls new
	// ones (/api/pull); nil refuses pulls.
	Store ModelStore
	// Models, if set, answers for the other stored models: loaded on
	// demand by name, unloaded after their keep_alive (switch.go). Nil:
	// the one model.
	Models ModelSwitch
	// First, if set, unloads and reloads the model serve started with
	// (keep_alive, /api/ps); nil: it stays loaded.
	First FirstModel
	// Allow lists the networks besides loopback whose clients may connect;
	// others get 403.
	Allow []netip.Prefix
	// Token, if set, is the bearer token every request from a non-loopback
	// address must carry (Authorization: Bearer TOKEN); others get 401.
	Token string
	// Hosts adds names a request's Host header may carry (exact, or
	// *.SUFFIX; "*" turns the check off) to IP literals, localhost and
	// the machine's host name and NAME.local; others get 403 (DNS
	// rebinding). --http-host.
	Hosts []string
	// Origins lists the origins of other pages allowed to use the API
	// from a browser (exact, * for any characters: http://localhost:*),
	// as OLLAMA_ORIGINS does; others get 403. A pull and the feed's
	// texts need the token from them even so. --http-origins.
	Origins []string
	// Pull says who may pull models (PullLoopback by default).
	Pull PullPolicy
	// MaxBody bounds a request body in bytes (512 KiB): larger ones get
	// 413 before they are read.
	MaxBody int64
	// MaxConns bounds the requests handled at once (64); more get 503.
	// A request takes its slot once its headers and body are read; the
	// operations routes (/healthz, /readyz, /metrics, /api/version, /)
	// have OpsConns of their own (16), pulls MaxPulls (2), the live feed
	// MaxFeeds (16); bodies being read MaxBodies (4·MaxConns), each
	// within BodyTimeout.
	MaxConns, OpsConns, MaxPulls, MaxFeeds, MaxBodies int
	// ReadHeaderTimeout bounds the time to read a request's headers (10 s);
	// BodyTimeout the time to read its body (30 s); IdleTimeout how long
	// a kept-alive connection may wait for its next request (120 s);
	// WriteTimeout how long one write of a response may take (30 s): a
	// client that stops reading a stream is dropped and its request
	// cancelled.
	ReadHeaderTimeout, BodyTimeout, IdleTimeout, WriteTimeout time.Duration
	// RetryAfter is the Retry-After of a busy refusal (5 s).
	RetryAfter time.Duration
	// Version is geist's version (/api/version, build info).
	Version string
	// Registry receives the metrics; nil: a new registry with the Go and
	// process collectors.
	Registry *prometheus.Registry
	Logger   *slog.Logger
}

func (c *Config) defaults() {
	if c.MaxBody <= 0 {
		c.MaxBody = 512 << 10
	}
	if c.MaxConns <= 0 {
		c.MaxConns = 64
	}
	if c.OpsConns <= 0 {
		c.OpsConns = 16
	}
	if c.MaxPulls <= 0 {
		c.MaxPulls = 2
	}
	if c.MaxFeeds <= 0 {
		c.MaxFeeds = 16
	}
	if c.MaxBodies <= 0 {
		c.MaxBodies = 4 * c.MaxConns
	}
	if c.Pull == "" {
		c.Pull = PullLoopback
	}
	if c.ReadHeaderTimeout <= 0 {
		c.ReadHeaderTimeout = 10 * time.Second
	}
	if c.BodyTimeout <= 0 {
		c.BodyTimeout = 30 * time.Second
	}
	if c.IdleTimeout <= 0 {
		c.IdleTimeout = 120 * time.Second
	}
	if c.WriteTimeout <= 0 {
		c.WriteTimeout = 30 * time.Second
	}
	if c.RetryAfter <= 0 {
		c.RetryAfter = 5 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
}

// Server is the HTTP front end. Create it with New, mount further
// handlers with Handle, then run it with Serve or ListenAndServe.
type Server struct {
	cfg       Config
	log       *slog.Logger
	core      Core
	mux       *http.ServeMux
	reg       *prometheus.Registry
	metrics   *metrics
	slots     map[budget]chan struct{} // requests in flight, per budget
	hosts     []string                 // names the Host may carry besides IPs and localhost
	allowDesc string                   // Config.Allow in words, for Serve's log line
	started   time.Time

	mu     sync.Mutex
	checks []check
	page   http.Handler // GET /, when another front end serves a page there
	pulls  sync.WaitGroup
}

// New returns a Server for cfg with geist's routes mounted.
func New(cfg Config) (*Server, error) {
	if cfg.Core == nil {
		return nil, errors.New("httpapi: no core")
	}
	cfg.defaults()
	s := &Server{cfg: cfg, log: cfg.Logger, core: cfg.Core, mux: http.NewServeMux(), reg: cfg.Registry,
		started: time.Now(), hosts: hostNames(cfg.Hosts), slots: map[budget]chan struct{}{
			budgetGeneral: make(chan struct{}, cfg.MaxConns), budgetOps: make(chan struct{}, cfg.OpsConns),
			budgetPull: make(chan struct{}, cfg.MaxPulls), budgetFeed: make(chan struct{}, cfg.MaxFeeds),
			budgetBody: make(chan struct{}, cfg.MaxBodies)}}
	if s.reg == nil {
		s.reg = prometheus.NewRegistry()
		s.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	var err error
	if s.metrics, err = newMetrics(s); err != nil {
		return nil, err
	}
	s.allowDesc = s.allowString() // here: Serve runs beside whoever holds the Server
	s.routes()
	return s, nil
}

// Handle mounts h on pattern (http.ServeMux syntax: "GET /events",
// "/page/") behind the server's guard: allow-list, token, the bound on
// requests in flight. Patterns geist serves itself (the Ollama and
// OpenAI routes, /metrics, /healthz, /readyz) are taken; "GET /{$}"
// replaces the liveness text at "/" (HEAD / stays Ollama's). Call it
// before Serve.
func (s *Server) Handle(pattern string, h http.Handler) {
	if pattern == "GET /{$}" || pattern == "/{$}" {
		s.mu.Lock()
		s.page = h
		s.mu.Unlock()
		return
	}
	s.mux.Handle(pattern, h)
}

// Registry is where the server's metrics live; other front ends register
// theirs here (Registry().MustRegister(collector)), and /metrics serves
// them all.
func (s *Server) Registry() *prometheus.Registry { return s.reg }

// Handler returns the server's whole handler: the guard around the routes.
func (s *Server) Handler() http.Handler { return s.guard(s.mux) }

// Serve serves on ln until ctx ends, then shuts down: no new
// connections; streams end as the core finishes or cancels their requests
// (within its shutdown grace), and what is left after 15 s is closed. It
// returns when every handler has returned.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: s.cfg.ReadHeaderTimeout,
		IdleTimeout:       s.cfg.IdleTimeout,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
		BaseContext:       func(net.Listener) context.Context { return context.WithoutCancel(ctx) },
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	s.log.Info("HTTP API listening", "addr", ln.Addr().String(), "allow", s.allowDesc, "token", s.cfg.Token != "")
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	// Streams end when the core finishes or cancels their requests; give
	// them the time the core takes, then close what is left.
	sctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	err := srv.Shutdown(sctx)
	if err != nil {
		srv.Close()
	}
	<-done
	s.pulls.Wait()
	return nil
}

// ListenAndServe listens on addr and serves until ctx ends.
func (s *Server) ListenAndServe(ctx context.Context, addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("http: %w", err)
	}
	return s.Serve(ctx, ln)
}

func (s *Server) allowString() string {
	parts := []string{"loopback"}
	for _, p := range s.cfg.Allow {
		parts = append(parts, p.String())
	}
	return strings.Join(parts, ",")
}

// ParseAllow parses a comma-separated list of networks (CIDR) or single
// addresses.
func ParseAllow(list []string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, item := range list {
		for _, f := range strings.Split(item, ",") {
			f = strings.TrimSpace(f)
			if f == "" {
				continue
			}
			if p, err := netip.ParsePrefix(f); err == nil {
				out = append(out, p.Masked())
				continue
			}
			a, err := netip.ParseAddr(f)
			if err != nil {
				return nil, fmt.Errorf("http allow %q: not a network (CIDR such as 192.168.1.0/24) or an address", f)
			}
			out = append(out, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
		}
	}
	return out, nil
}

// apiError is Ollama's (and, wrapped, OpenAI's) error body.
type apiError struct {
	Error string `json:"error"`
}

// writeJSON writes v as the whole response.
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"error":"encoding the response failed"}`)
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}

// writeError writes Ollama's {"error": msg}.
func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, apiError{Error: msg})
}
