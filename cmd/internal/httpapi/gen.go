package httpapi

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/geisten/geist/engine/appliance"
)

// piece is what a generation produced since the last one: content,
// thinking, and tool calls complete by now (the core shapes them).
type piece struct {
	content, thinking string
	calls             []appliance.ToolCall
	progress          *promptProgress // the prompt read so far (genOptions.progress)
}

func (p *piece) empty() bool {
	return p.content == "" && p.thinking == "" && len(p.calls) == 0 && p.progress == nil
}

// promptProgress is llama-server's prompt_progress: of the prompt's total
// tokens, processed are in the model's state, cache of them came from the
// cache; time_ms since the request arrived.
type promptProgress struct {
	Total     int   `json:"total"`
	Cache     int   `json:"cache"`
	Processed int   `json:"processed"`
	TimeMS    int64 `json:"time_ms"`
}

// genOptions say how to show a generation.
type genOptions struct {
	thinking bool // the client sees the thinking (the core splits it off)
	progress bool // the client hears the prompt's progress (return_progress)
}

// show turns the core's piece of an answer into this API's: the
// thinking kept when asked for.
func (o genOptions) show(in appliance.Piece) piece {
	p := piece{content: in.Content, calls: in.Calls}
	if o.thinking {
		p.thinking = in.Thinking
	}
	return p
}

// pipe carries text from the core's worker (the Sink, which must not
// block) to the handler goroutine, which writes it to the network.
type pipe struct {
	mu              sync.Mutex
	content, thinks strings.Builder
	calls           []appliance.ToolCall
	wake            chan struct{}
	start           time.Time
	cache           int             // the prompt's first progress: tokens from the cache (-1: none yet)
	progress        *promptProgress // the latest, not yet taken
}

func newPipe() *pipe { return &pipe{wake: make(chan struct{}, 1), start: time.Now(), cache: -1} }

// prompt is appliance.Request.OnPromptProgress: it keeps the latest.
func (p *pipe) prompt(done, total int) {
	p.mu.Lock()
	if p.cache < 0 {
		p.cache = done
	}
	p.progress = &promptProgress{Total: total, Cache: p.cache, Processed: done, TimeMS: time.Since(p.start).Milliseconds()}
	p.mu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

func (p *pipe) takeProgress() *promptProgress {
	p.mu.Lock()
	defer p.mu.Unlock()
	pp := p.progress
	p.progress = nil
	return pp
}

func (p *pipe) sink(piece appliance.Piece) {
	p.mu.Lock()
	p.content.WriteString(piece.Content)
	p.thinks.WriteString(piece.Thinking)
	p.calls = append(p.calls, piece.Calls...)
	p.mu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

func (p *pipe) take() appliance.Piece {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := appliance.Piece{Content: p.content.String(), Thinking: p.thinks.String(), Calls: p.calls}
	p.content.Reset()
	p.thinks.Reset()
	p.calls = nil
	return out
}

// generation is one request of the core as the handler sees it.
type generation struct {
	s       *Server
	start   time.Time
	ticket  *appliance.Ticket
	pipe    *pipe
	cancel  context.CancelFunc
	opts    genOptions
	wrote   bool // a chunk went out (the status is sent)
	writeOK bool
}

// submit hands req to the core, cancelled when the client goes away (or
// a write to it fails). A refusal comes back as an *appliance.Error.
func (s *Server) submit(r *http.Request, req appliance.Request, o genOptions) (*generation, error) {
	req.Source = appliance.SourceHTTP
	ctx, cancel := context.WithCancel(r.Context())
	g := &generation{s: s, start: time.Now(), pipe: newPipe(), cancel: cancel, opts: o, writeOK: true}
	if o.progress {
		req.OnPromptProgress = g.pipe.prompt
	}
	t, err := s.core.Submit(ctx, req, g.pipe.sink)
	if err != nil {
		cancel()
		return nil, err
	}
	g.ticket = t
	return g, nil
}

// stream delivers the generation as it goes: write is called with every
// non-empty piece and must write and flush it (returning the error of a
// write that failed: the request is cancelled). It returns the outcome
// and, when it failed, what the end of the answer released (not sent).
func (g *generation) stream(w http.ResponseWriter, write func(piece) error) (appliance.Outcome, piece) {
	defer g.cancel()
	rc := http.NewResponseController(w)
	send := func(p piece) {
		if p.empty() || !g.writeOK {
			return
		}
		rc.SetWriteDeadline(time.Now().Add(g.s.cfg.WriteTimeout))
		if err := write(p); err != nil {
			g.writeOK = false
			g.cancel()
			return
		}
		g.wrote = true
		rc.Flush()
	}
	for {
		select {
		case <-g.pipe.wake:
			if g.opts.progress {
				if pp := g.pipe.takeProgress(); pp != nil {
					send(piece{progress: pp})
				}
			}
			send(g.opts.show(g.pipe.take()))
		case <-g.ticket.Done():
			o := g.ticket.Outcome()
			last := g.opts.show(g.pipe.take())
			if o.Err == nil {
				// What the end released (held-back text, calls completed
				// by it) goes out as a chunk before the final object, as
				// Ollama sends calls.
				send(last)
				last = piece{}
			}
			return o, last
		}
	}
}

// wait waits for the whole answer.
func (g *generation) wait() (appliance.Outcome, piece) {
	defer g.cancel()
	o := g.ticket.Outcome()
	return o, g.opts.show(appliance.Piece{Content: o.Text, Thinking: o.Thinking, Calls: o.Calls})
}

// statusOf maps the core's error codes to HTTP statuses.
func statusOf(c appliance.Code) int {
	switch c {
	case appliance.CodeBadRequest, appliance.CodeTooLong:
		return http.StatusBadRequest
	case appliance.CodeBusy:
		return http.StatusServiceUnavailable
	case appliance.CodeDuplicate:
		return http.StatusConflict
	case appliance.CodeTimeout:
		return http.StatusGatewayTimeout
	case appliance.CodeCancelled:
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

// doneReason is Ollama's done_reason (and, via finishReason, OpenAI's)
// for the engine's stop reason.
func doneReason(o *appliance.Outcome, calls bool) string {
	switch {
	case calls:
		return "stop"
	case o.Usage.StopReason == "length" || o.Usage.StopReason == "context":
		return "length"
	}
	return "stop"
}

// timings are the measured durations of an answer, Ollama's way.
type timings struct {
	TotalDuration      int64 `json:"total_duration,omitempty"`
	LoadDuration       int64 `json:"load_duration,omitempty"`
	PromptEvalCount    int   `json:"prompt_eval_count,omitempty"`
	PromptEvalDuration int64 `json:"prompt_eval_duration,omitempty"`
	EvalCount          int   `json:"eval_count,omitempty"`
	EvalDuration       int64 `json:"eval_duration,omitempty"`
}

// timingsOf measures o: total from the request's arrival, load as the
// time the request waited for the engine (the model stays loaded),
// prompt evaluation as the prompt tokens the model evaluated (as Ollama
// counts them: not those whose KV state was held or restored from the
// prompt cache) and the time to the first token (prefill), evaluation
// as the decoding after it.
func (g *generation) timingsOf(o *appliance.Outcome) timings {
	u := &o.Usage
	eval := u.Duration - u.TTFT
	if eval <= 0 && u.GeneratedTokens > 0 {
		eval = time.Nanosecond
	}
	return timings{
		TotalDuration:      int64(time.Since(g.start)),
		LoadDuration:       int64(u.Queued),
		PromptEvalCount:    u.EvaluatedTokens(),
		PromptEvalDuration: int64(u.TTFT),
		EvalCount:          u.GeneratedTokens,
		EvalDuration:       int64(eval),
	}
}

// errorText is the message of a failed outcome for a client.
func errorText(e *appliance.Error) string {
	return fmt.Sprintf("%s: %s", e.Code, e.Message)
}
