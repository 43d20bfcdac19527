package httpapi

// The status and chat page at / and its live feed (issue 13): one
// self-contained HTML file embedded in the binary (inline CSS and
// JavaScript, allowed by their hashes in the Content-Security-Policy,
// so the page loads nothing from anywhere), and /api/geist/events, a
// server-sent event stream of the core's state and finished requests.
// The page's chat box speaks Ollama's /api/chat, as any client does.

import (
	"bytes"
	"crypto/sha256"
	_ "embed"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/geisten/geist/engine/appliance"
)

//go:embed page/index.html
var statusHTML []byte

// StatusCore is what the status page needs of the appliance core.
type StatusCore interface {
	Snapshot() appliance.State
	Recent(n int) []appliance.RequestRecord
	Watch(fn func(appliance.Event)) (stop func())
}

// StatusConfig configures the status page.
type StatusConfig struct {
	// ShowText lets the page show the questions and answers of recent
	// requests (the core must keep them: appliance.Config.RecentText).
	// Off, the feed never carries them.
	ShowText bool
	// ChatModel is the model name the page's chat sends to /api/chat
	// (the name /api/tags lists; the page asks /api/tags first).
	ChatModel string
	// Plain, if set, answers GET / for clients that do not ask for HTML
	// (curl, scripts and Ollama clients probing "Ollama is running"):
	// only browsers get the page.
	Plain http.Handler
	// MaxFeeds bounds the live feeds open at once (16); more get 503.
	MaxFeeds int
	// Tick is how often the feed sends the state while a request runs
	// (500 ms), so that the page's decode speed moves.
	Tick   time.Duration
	Logger *slog.Logger
}

// StatusPage serves the page and its feed.
type StatusPage struct {
	core  StatusCore
	cfg   StatusConfig
	csp   string
	feeds chan struct{}
}

// NewStatusPage returns the page over core.
func NewStatusPage(cfg StatusConfig, core StatusCore) *StatusPage {
	if cfg.MaxFeeds <= 0 {
		cfg.MaxFeeds = 16
	}
	if cfg.Tick <= 0 {
		cfg.Tick = 500 * time.Millisecond
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &StatusPage{core: core, cfg: cfg, csp: pagePolicy(statusHTML), feeds: make(chan struct{}, cfg.MaxFeeds)}
}

// Register mounts GET / (the page) and GET /api/geist/events (the feed)
// on mux: an *http.ServeMux, or the Server, whose Handle puts them
// behind its guard.
func (p *StatusPage) Register(mux interface{ Handle(string, http.Handler) }) {
	mux.Handle("GET /{$}", http.HandlerFunc(p.ServePage))
	mux.Handle("GET /api/geist/events", http.HandlerFunc(p.ServeEvents))
}

var inlineBlock = regexp.MustCompile(`(?s)<(script|style)>(.*?)</(?:script|style)>`)

// pagePolicy is the Content-Security-Policy of the page: nothing from
// other hosts, no other inline code than the page's own (by hash).
func pagePolicy(html []byte) string {
	var scripts, styles []string
	for _, m := range inlineBlock.FindAllSubmatch(html, -1) {
		sum := sha256.Sum256(m[2])
		h := "'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'"
		if string(m[1]) == "script" {
			scripts = append(scripts, h)
		} else {
			styles = append(styles, h)
		}
	}
	return "default-src 'none'; connect-src 'self'; img-src data:; script-src " + strings.Join(scripts, " ") +
		"; style-src " + strings.Join(styles, " ") + "; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
}

// publicPage reports a request for GET / (or HEAD): the page, static and
// without data, or the liveness text. It passes the token check (not the
// allow-list), so that a browser on the LAN can load the page, which then
// asks for the token and sends it with every request that reads or asks.
func publicPage(r *http.Request) bool {
	return (r.Method == http.MethodGet || r.Method == http.MethodHead) && r.URL.Path == "/"
}

// ServePage serves the page to browsers (Accept: text/html), and hands
// other clients to Plain.
func (p *StatusPage) ServePage(w http.ResponseWriter, r *http.Request) {
	if p.cfg.Plain != nil && !strings.Contains(r.Header.Get("Accept"), "text/html") {
		p.cfg.Plain.ServeHTTP(w, r)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Content-Security-Policy", p.csp)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-cache")
	http.ServeContent(w, r, "index.html", time.Time{}, bytes.NewReader(statusHTML))
}

// The feed's events, in JSON.
type (
	statusState struct {
		State      string            `json:"state"`
		Busy       bool              `json:"busy"`
		Queue      int               `json:"queue"`
		Model      string            `json:"model"`
		ChatModel  string            `json:"chat_model,omitempty"`
		Version    string            `json:"version"`
		UptimeS    float64           `json:"uptime_s"`
		LastTokS   float64           `json:"last_tok_s"`
		Acceptance float64           `json:"acceptance_rate"`
		CacheHit   float64           `json:"cache_hit_rate"`
		Served     int64             `json:"served"`
		Refused    int64             `json:"refused"`
		Failed     int64             `json:"failed"`
		Prompt     int64             `json:"prompt_tokens"`
		Cached     int64             `json:"cached_tokens"`
		Generated  int64             `json:"generated_tokens"`
		Drafted    int64             `json:"drafted"`
		Accepted   int64             `json:"accepted"`
		Degraded   map[string]string `json:"degraded,omitempty"`
		Jobs       []statusJob       `json:"jobs"`
		TextOK     bool              `json:"text_allowed"`
	}
	statusJob struct {
		Source   string  `json:"source"`
		State    string  `json:"state"`
		Tokens   int64   `json:"tokens"`
		TokS     float64 `json:"tok_s"`
		RunningS float64 `json:"running_s"`
		WaitingS float64 `json:"waiting_s"`
		// The prompt read so far: prompt_done of prompt_total tokens
		// (running; both 0 before the engine starts on it).
		PromptDone  int `json:"prompt_done"`
		PromptTotal int `json:"prompt_total"`
	}
	statusRecord struct {
		Source     string  `json:"source"`
		Outcome    string  `json:"outcome"`
		AgoS       float64 `json:"ago_s"`
		Prompt     int     `json:"prompt_tokens"`
		Cached     int     `json:"cached_tokens"`
		Generated  int     `json:"generated_tokens"`
		TokS       float64 `json:"tok_s"`
		Drafted    int     `json:"drafted"`
		Accepted   int     `json:"accepted"`
		DurationMS int64   `json:"duration_ms"`
		QueuedMS   int64   `json:"queued_ms"`
		TTFTMS     int64   `json:"ttft_ms"`
		Question   string  `json:"question,omitempty"`
		Answer     string  `json:"answer,omitempty"`
	}
)

// Times go out as ages and durations in seconds, so that a phone whose
// clock differs from the box's shows them right.

func (p *StatusPage) state(now time.Time) statusState {
	s := p.core.Snapshot()
	out := statusState{State: s.State, Busy: s.Busy, Queue: s.Queue, Model: s.Model, ChatModel: p.cfg.ChatModel, Version: s.Version,
		UptimeS: now.Sub(s.Started).Seconds(), LastTokS: s.LastTokS, Acceptance: s.AcceptanceRate, CacheHit: s.CacheHitRate,
		Served: s.Served, Refused: s.Refused, Failed: s.Failed, Prompt: s.PromptTokens, Cached: s.CachedTokens,
		Generated: s.GeneratedTokens, Drafted: s.Drafted, Accepted: s.Accepted, Jobs: []statusJob{}, TextOK: p.cfg.ShowText}
	if len(s.Degraded) > 0 {
		out.Degraded = map[string]string{}
		for k, v := range s.Degraded {
			out.Degraded[string(k)] = v
		}
	}
	for _, j := range s.Jobs {
		sj := statusJob{Source: string(j.Source), State: j.State, Tokens: j.Tokens, PromptDone: j.PromptDone, PromptTotal: j.PromptTotal}
		if j.State == "running" {
			sj.RunningS = now.Sub(j.Started).Seconds()
			if !j.FirstToken.IsZero() && j.Tokens > 1 {
				if d := now.Sub(j.FirstToken).Seconds(); d > 0 {
					sj.TokS = float64(j.Tokens-1) / d
				}
			}
		} else {
			sj.WaitingS = now.Sub(j.Queued).Seconds()
		}
		out.Jobs = append(out.Jobs, sj)
	}
	return out
}

func statusRecordOf(r *appliance.RequestRecord, now time.Time, text bool) statusRecord {
	u := r.Usage
	out := statusRecord{Source: string(r.Source), Outcome: r.Outcome, AgoS: now.Sub(r.Finished).Seconds(),
		Prompt: u.PromptTokens, Cached: u.CachedTokens, Generated: u.GeneratedTokens, TokS: u.TokS, Drafted: u.Drafted,
		Accepted: u.Accepted, DurationMS: u.Duration.Milliseconds(), QueuedMS: u.Queued.Milliseconds(), TTFTMS: u.TTFT.Milliseconds()}
	if text {
		out.Question, out.Answer = r.Question, r.Answer
	}
	return out
}

// ServeEvents streams the feed: "state" and "recent" (the last finished
// requests, newest first) at once, then "request" for every finished
// request and "state" whenever something changed (at most every Tick;
// every Tick while a request runs); a comment every 15 s keeps proxies
// from closing it. ?text=1 adds the texts when ShowText allows them.
func (p *StatusPage) ServeEvents(w http.ResponseWriter, r *http.Request) {
	select {
	case p.feeds <- struct{}{}:
		defer func() { <-p.feeds }()
	default:
		w.Header().Set("Retry-After", "5")
		http.Error(w, "too many live feeds open", http.StatusServiceUnavailable)
		return
	}
	rc := http.NewResponseController(w)
	text := p.cfg.ShowText && r.URL.Query().Get("text") == "1"
	// The core's watcher must not wait: it marks the feed dirty and
	// queues finished requests' ids (dropping them past 64 behind).
	var mu sync.Mutex
	var finished []string
	wake := make(chan struct{}, 1)
	stop := p.core.Watch(func(ev appliance.Event) {
		mu.Lock()
		if ev.Kind == appliance.EventFinished && len(finished) < 64 {
			finished = append(finished, ev.ID)
		}
		mu.Unlock()
		select {
		case wake <- struct{}{}:
		default:
		}
	})
	defer stop()

	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	send := func(event string, v any) bool {
		b, err := json.Marshal(v)
		if err != nil {
			p.cfg.Logger.Error("status feed: encoding", "event", event, "err", err)
			return false
		}
		rc.SetWriteDeadline(time.Now().Add(10 * time.Second))
		if _, err := fmt.Fprintf(w, "event: %s\ndata: %s\n\n", event, b); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	now := time.Now()
	recs := p.core.Recent(64)
	list := make([]statusRecord, len(recs))
	for i := range recs {
		list[i] = statusRecordOf(&recs[i], now, text)
	}
	if !send("state", p.state(now)) || !send("recent", list) {
		return
	}
	tick := time.NewTicker(p.cfg.Tick)
	defer tick.Stop()
	ping := time.NewTicker(15 * time.Second)
	defer ping.Stop()
	dirty, busy := false, p.core.Snapshot().Busy
	for {
		select {
		case <-r.Context().Done():
			return
		case <-wake:
			mu.Lock()
			ids := finished
			finished = nil
			mu.Unlock()
			if len(ids) > 0 {
				now := time.Now()
				recs := p.core.Recent(64)
				for _, id := range ids {
					for i := range recs {
						if recs[i].ID == id {
							if !send("request", statusRecordOf(&recs[i], now, text)) {
								return
							}
							break
						}
					}
				}
			}
			dirty = true
		case <-tick.C:
			if !dirty && !busy {
				continue
			}
			st := p.state(time.Now())
			if !send("state", st) {
				return
			}
			dirty, busy = false, st.Busy
		case <-ping.C:
			rc.SetWriteDeadline(time.Now().Add(10 * time.Second))
			if _, err := fmt.Fprint(w, ": ping\n\n"); err != nil || rc.Flush() != nil {
				return
			}
		}
	}
}
