package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/geisten/geist/engine/appliance"
)

// ollamaMessage is a message of Ollama's /api/chat.
type ollamaMessage struct {
	Role       string            `json:"role"`
	Content    string            `json:"content"`
	Thinking   string            `json:"thinking,omitempty"`
	Images     []json.RawMessage `json:"images,omitempty"`
	ToolCalls  []ollamaToolCall  `json:"tool_calls,omitempty"`
	ToolName   string            `json:"tool_name,omitempty"`
	ToolCallID string            `json:"tool_call_id,omitempty"`
}

type ollamaToolCall struct {
	ID       string             `json:"id,omitempty"`
	Function ollamaToolFunction `json:"function"`
}

type ollamaToolFunction struct {
	Index     int             `json:"index"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
}

// ollamaCommon are the fields /api/chat and /api/generate share.
type ollamaCommon struct {
	Model       string                     `json:"model"`
	Stream      *bool                      `json:"stream"`
	Format      json.RawMessage            `json:"format"`
	Options     map[string]json.RawMessage `json:"options"`
	KeepAlive   json.RawMessage            `json:"keep_alive"`
	Think       json.RawMessage            `json:"think"`
	Truncate    *bool                      `json:"truncate"`
	Shift       *bool                      `json:"shift"`
	Logprobs    bool                       `json:"logprobs"`
	TopLogprobs int                        `json:"top_logprobs"`
}

type chatRequest struct {
	ollamaCommon
	Messages []ollamaMessage   `json:"messages"`
	Tools    []json.RawMessage `json:"tools"`
}

type generateRequest struct {
	ollamaCommon
	Prompt   string            `json:"prompt"`
	Suffix   string            `json:"suffix"`
	System   string            `json:"system"`
	Template string            `json:"template"`
	Context  []int             `json:"context"`
	Raw      bool              `json:"raw"`
	Images   []json.RawMessage `json:"images"`
}

// chatResponse is one object of /api/chat's answer.
type chatResponse struct {
	Model      string        `json:"model"`
	CreatedAt  time.Time     `json:"created_at"`
	Message    ollamaMessage `json:"message"`
	Done       bool          `json:"done"`
	DoneReason string        `json:"done_reason,omitempty"`
	timings
}

// generateResponse is one object of /api/generate's answer.
type generateResponse struct {
	Model      string    `json:"model"`
	CreatedAt  time.Time `json:"created_at"`
	Response   string    `json:"response"`
	Thinking   string    `json:"thinking,omitempty"`
	Done       bool      `json:"done"`
	DoneReason string    `json:"done_reason,omitempty"`
	Context    []int     `json:"context,omitempty"`
	timings
}

// badRequest is a request geist refuses before it reaches the core.
type badRequest struct {
	status int
	msg    string
}

func (e *badRequest) Error() string { return e.msg }

func badf(format string, a ...any) *badRequest {
	return &badRequest{http.StatusBadRequest, fmt.Sprintf(format, a...)}
}

// errorWriter writes an error body in one API's shape (Ollama's or
// OpenAI's).
type errorWriter func(w http.ResponseWriter, status int, msg string)

// refuse writes the refusal of a generation request in Ollama's shape.
func (s *Server) refuse(w http.ResponseWriter, err error) { s.refuseAs(w, err, writeError) }

// refuseAs writes a refusal with write and counts it in the core's state
// (the core counts its own refusals).
func (s *Server) refuseAs(w http.ResponseWriter, err error, write errorWriter) {
	var b *badRequest
	var eb *errBody
	var ae *appliance.Error
	switch {
	case errors.As(err, &b):
		s.core.Reject(appliance.SourceHTTP, appliance.CodeBadRequest)
		write(w, b.status, b.msg)
	case errors.As(err, &eb):
		code := appliance.CodeBadRequest
		if eb.status == http.StatusRequestEntityTooLarge {
			code = appliance.CodeTooLong
		}
		s.core.Reject(appliance.SourceHTTP, code)
		write(w, eb.status, eb.msg)
	case errors.As(err, &ae):
		s.failedAs(w, ae, write)
	default:
		write(w, http.StatusInternalServerError, err.Error())
	}
}

// checkModel refuses a request naming another model than the loaded one.
func (s *Server) checkModel(name string) error {
	if s.isLoaded(name) {
		return nil
	}
	if s.cfg.Models != nil {
		return &badRequest{http.StatusNotFound, fmt.Sprintf("model %q not found: it is not in geist's model store (GET /api/tags lists the models; geist pull NAME or POST /api/pull stores one)", name)}
	}
	return &badRequest{http.StatusNotFound, fmt.Sprintf("model %q not found: geist serves %q (one model, chosen when geist starts: geist serve -m MODEL)", name, s.cfg.Model.tagged())}
}

// options applies Ollama's options to req: those geist's sampler has,
// num_predict, num_ctx (up to the most the model and memory allow) and stop; the rest (hardware, mirostat, penalties other than
// repeat_penalty) are accepted and ignored, as Ollama ignores options it
// does not know.
func options(opts map[string]json.RawMessage, req *appliance.Request) error {
	num := func(k string) (float64, bool, error) {
		raw, ok := opts[k]
		if !ok || string(raw) == "null" {
			return 0, false, nil
		}
		var f float64
		if err := json.Unmarshal(raw, &f); err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			return 0, false, badf("options.%s must be a number, not %s", k, raw)
		}
		return f, true, nil
	}
	integer := func(k string) (int64, bool, error) {
		f, ok, err := num(k)
		if err != nil || !ok {
			return 0, ok, err
		}
		if f != math.Trunc(f) || math.Abs(f) > 1<<53 {
			return 0, false, badf("options.%s must be an integer, not %s", k, opts[k])
		}
		return int64(f), true, nil
	}
	fl := func(k string, dst **float64) error {
		f, ok, err := num(k)
		if ok {
			*dst = &f
		}
		return err
	}
	for _, k := range []struct {
		key string
		dst **float64
	}{{"temperature", &req.Temperature}, {"top_p", &req.TopP}, {"min_p", &req.MinP}, {"repeat_penalty", &req.RepeatPenalty}} {
		if err := fl(k.key, k.dst); err != nil {
			return err
		}
	}
	if n, ok, err := integer("top_k"); err != nil {
		return err
	} else if ok {
		k := int(max(n, 0))
		req.TopK = &k
	}
	if n, ok, err := integer("seed"); err != nil {
		return err
	} else if ok && n >= 0 {
		seed := uint64(n)
		req.Seed = &seed
	}
	if n, ok, err := integer("num_predict"); err != nil {
		return err
	} else if ok && n > 0 {
		req.MaxTokens = int(min(n, math.MaxInt32))
	}
	if n, ok, err := integer("num_ctx"); err != nil {
		return err
	} else if ok && n < 0 {
		return badf("options.num_ctx must not be negative, not %d (the context of this request in tokens, up to the most the model and memory allow; 0 or none: the server's)", n)
	} else if ok && n > 0 {
		req.NumCtx = int(min(n, math.MaxInt32))
	}
	if raw, ok := opts["stop"]; ok && string(raw) != "null" {
		stop, err := stopList(raw)
		if err != nil {
			return badf("options.stop: %v", err)
		}
		req.Stop = stop
	}
	return nil
}

// stopList reads a stop setting: a string or a list of strings.
func stopList(raw json.RawMessage) ([]string, error) {
	var list []string
	if err := json.Unmarshal(raw, &list); err == nil {
		return slices.DeleteFunc(list, func(s string) bool { return s == "" }), nil
	}
	var one string
	if err := json.Unmarshal(raw, &one); err != nil {
		return nil, errors.New("want a string or a list of strings")
	}
	if one == "" {
		return nil, nil
	}
	return []string{one}, nil
}

// common checks what chat and generate share and applies it to req; it
// returns whether to stream and how to read the answer.
func (s *Server) common(c *ollamaCommon, req *appliance.Request) (stream bool, o genOptions, err error) {
	if err := s.checkModel(c.Model); err != nil {
		return false, o, err
	}
	if err := options(c.Options, req); err != nil {
		return false, o, err
	}
	think, err := thinkValue(c.Think)
	if err != nil {
		return false, o, err
	}
	canThink := slices.Contains(s.cfg.Model.Capabilities, "thinking")
	if think != nil && *think && !canThink {
		// Ollama's answer (and words): asking a model without a
		// thinking block to think is an error, not silently ignored.
		name := c.Model
		if name == "" {
			name = s.cfg.Model.Name
		}
		return false, o, badf("%q does not support thinking", name)
	}
	req.Think = think // nil: the core's policy for HTTP (think)
	o.thinking = (think == nil || *think) && canThink
	ollamaFormat(req, c.Format)
	if s.cfg.First != nil {
		// The keep_alive of the model serve started with: it holds until
		// the model is unloaded (0: after this answer).
		ka, err := parseKeepAlive(c.KeepAlive)
		if err != nil {
			return false, o, err
		}
		if ka != KeepAliveDefault {
			s.cfg.First.KeepAlive(ka)
		}
	}
	return c.Stream == nil || *c.Stream, o, nil
}

// thinkValue reads Ollama's think: a bool, or a level ("low", "medium",
// "high", "max"), which means true; absent: nil.
func thinkValue(raw json.RawMessage) (*bool, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var b bool
	if json.Unmarshal(raw, &b) == nil {
		return &b, nil
	}
	var level string
	if json.Unmarshal(raw, &level) == nil {
		switch level {
		case "low", "medium", "high", "max":
			t := true
			return &t, nil
		}
	}
	return nil, badf("think %s: want true, false, or \"low\", \"medium\", \"high\"", raw)
}

func (s *Server) ollamaChat(w http.ResponseWriter, r *http.Request) {
	var c chatRequest
	if eb := s.decode(w, r, &c); eb != nil {
		s.refuse(w, eb)
		return
	}
	req := appliance.Request{}
	stream, o, err := s.common(&c.ollamaCommon, &req)
	if err == nil {
		err = chatMessages(c.Messages, &req)
	}
	if err != nil {
		s.refuse(w, err)
		return
	}
	if len(c.Messages) == 0 {
		s.loadOnly(w, &c.ollamaCommon, true)
		return
	}
	req.Tools = c.Tools // the core parses the calls out of the answer (or refuses them: appliance.Config.NoTools)
	toolConstraint(&req, c.Tools, nil)
	g, err := s.submit(r, req, o)
	if err != nil {
		s.refuse(w, err)
		return
	}
	model := s.cfg.Model.tagged()
	msg := func(p piece) ollamaMessage {
		return ollamaMessage{Role: "assistant", Content: p.content, Thinking: p.thinking, ToolCalls: ollamaCalls(p.calls)}
	}
	if !stream {
		out, last := g.wait()
		if out.Err != nil {
			s.failed(w, out.Err)
			return
		}
		writeJSON(w, http.StatusOK, chatResponse{Model: model, CreatedAt: time.Now().UTC(), Message: msg(last), Done: true,
			DoneReason: doneReason(&out, len(last.calls) > 0), timings: g.timingsOf(&out)})
		return
	}
	nd := newNDJSON(w)
	calls := 0
	out, last := g.stream(w, func(p piece) error {
		calls += len(p.calls)
		return nd.write(chatResponse{Model: model, CreatedAt: time.Now().UTC(), Message: msg(p)})
	})
	s.finishStream(w, g, nd, &out, func() any {
		calls += len(last.calls)
		return chatResponse{Model: model, CreatedAt: time.Now().UTC(), Message: msg(last), Done: true,
			DoneReason: doneReason(&out, calls > 0), timings: g.timingsOf(&out)}
	})
}

// chatMessages turns Ollama's messages into the core's.
func chatMessages(msgs []ollamaMessage, req *appliance.Request) error {
	for i, m := range msgs {
		if len(m.Images) > 0 {
			return badf("messages[%d].images: geist runs text-only models; images are not supported", i)
		}
		am := appliance.Message{Role: strings.ToLower(m.Role), Content: m.Content, ToolName: m.ToolName, ToolCallID: m.ToolCallID}
		for _, tc := range m.ToolCalls {
			am.ToolCalls = append(am.ToolCalls, appliance.ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments})
		}
		req.Messages = append(req.Messages, am)
	}
	req.History = historyOf(req.Messages)
	return nil
}

// historyOf is how many messages (after a leading system message) come
// before the last user message: the earlier turns a stateless client
// resends, which the engine may leave out, oldest first, when the whole
// conversation does not fit the context (as Ollama drops old messages).
func historyOf(msgs []appliance.Message) int {
	sys := 0
	if len(msgs) > 0 && msgs[0].Role == "system" {
		sys = 1
	}
	for i := len(msgs) - 1; i >= sys; i-- {
		if msgs[i].Role == "user" {
			return i - sys
		}
	}
	return 0
}

func ollamaCalls(calls []appliance.ToolCall) []ollamaToolCall {
	if len(calls) == 0 {
		return nil
	}
	out := make([]ollamaToolCall, len(calls))
	for i, c := range calls {
		out[i] = ollamaToolCall{Function: ollamaToolFunction{Index: i, Name: c.Name, Arguments: c.Arguments}}
	}
	return out
}

// loadOnly answers Ollama's "load the model" request (no messages, or no
// prompt): the model is loaded (again, when it was unloaded) and its
// prompt cache warmed; with keep_alive 0 it is unloaded instead (Config.First;
// without it, geist keeps its one model loaded and refuses).
func (s *Server) loadOnly(w http.ResponseWriter, c *ollamaCommon, chatForm bool) {
	ka, err := parseKeepAlive(c.KeepAlive)
	if err != nil {
		s.refuse(w, err)
		return
	}
	if ka == 0 {
		if s.cfg.First == nil {
			writeError(w, http.StatusBadRequest, "geist keeps the model it started with ("+s.cfg.Model.tagged()+") loaded for as long as it runs; it cannot unload it (the other stored models unload with keep_alive 0)")
			return
		}
		s.cfg.First.Unload()
		now := time.Now().UTC()
		if chatForm {
			writeJSON(w, http.StatusOK, chatResponse{Model: s.cfg.Model.tagged(), CreatedAt: now, Message: ollamaMessage{Role: "assistant"}, Done: true, DoneReason: "unload"})
			return
		}
		writeJSON(w, http.StatusOK, generateResponse{Model: s.cfg.Model.tagged(), CreatedAt: now, Done: true, DoneReason: "unload"})
		return
	}
	s.cfg.Core.Warm()
	now := time.Now().UTC()
	if chatForm {
		writeJSON(w, http.StatusOK, chatResponse{Model: s.cfg.Model.tagged(), CreatedAt: now, Message: ollamaMessage{Role: "assistant"}, Done: true, DoneReason: "load"})
		return
	}
	writeJSON(w, http.StatusOK, generateResponse{Model: s.cfg.Model.tagged(), CreatedAt: now, Done: true, DoneReason: "load"})
}

// failed answers a request whose generation failed before anything was
// streamed, in Ollama's shape.
func (s *Server) failed(w http.ResponseWriter, e *appliance.Error) { s.failedAs(w, e, writeError) }

// failedAs writes a failed outcome with write: busy (and shutting down)
// as 503 with Retry-After.
func (s *Server) failedAs(w http.ResponseWriter, e *appliance.Error, write errorWriter) {
	status := statusOf(e.Code)
	if e.Code == appliance.CodeBusy || e.Code == appliance.CodeCancelled && strings.Contains(e.Message, "shutting down") {
		status = http.StatusServiceUnavailable
		w.Header().Set("Retry-After", strconv.Itoa(int((s.cfg.RetryAfter+time.Second-1)/time.Second)))
	}
	write(w, status, e.Message)
}

// finishStream ends an NDJSON stream: the final object, or the error (as
// a status when nothing was sent yet, else as Ollama's {"error": ...}
// line).
func (s *Server) finishStream(w http.ResponseWriter, g *generation, nd *ndjson, out *appliance.Outcome, final func() any) {
	if !g.writeOK {
		return // the client is gone
	}
	if out.Err != nil {
		if !g.wrote {
			s.failed(w, out.Err)
			return
		}
		nd.write(apiError{Error: errorText(out.Err)})
		return
	}
	nd.write(final())
}

// ndjson writes a stream of JSON objects, one a line.
type ndjson struct {
	w       http.ResponseWriter
	started bool
}

func newNDJSON(w http.ResponseWriter) *ndjson { return &ndjson{w: w} }

func (n *ndjson) write(v any) error {
	if !n.started {
		n.w.Header().Set("Content-Type", "application/x-ndjson")
		n.w.WriteHeader(http.StatusOK)
		n.started = true
	}
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if _, err := n.w.Write(append(b, '\n')); err != nil {
		return err
	}
	http.NewResponseController(n.w).Flush()
	return nil
}

func (s *Server) ollamaGenerate(w http.ResponseWriter, r *http.Request) {
	var c generateRequest
	if eb := s.decode(w, r, &c); eb != nil {
		s.refuse(w, eb)
		return
	}
	req := appliance.Request{}
	var seen string
	stream, o, err := s.common(&c.ollamaCommon, &req)
	if err == nil {
		seen, err = s.generatePrompt(&c, &req)
	}
	if err != nil {
		s.refuse(w, err)
		return
	}
	if strings.TrimSpace(c.Prompt) == "" && len(c.Context) == 0 {
		s.loadOnly(w, &c.ollamaCommon, false)
		return
	}
	g, err := s.submit(r, req, o)
	if err != nil {
		s.refuse(w, err)
		return
	}
	model := s.cfg.Model.tagged()
	var answer strings.Builder
	context := func(o *appliance.Outcome) []int {
		if seen == "" || s.cfg.Model.Tokenize == nil {
			return nil // as Ollama: raw mode returns no context
		}
		return s.cfg.Model.Tokenize(seen+o.Text, false)
	}
	if !stream {
		out, last := g.wait()
		if out.Err != nil {
			s.failed(w, out.Err)
			return
		}
		writeJSON(w, http.StatusOK, generateResponse{Model: model, CreatedAt: time.Now().UTC(), Response: last.content, Thinking: last.thinking,
			Done: true, DoneReason: doneReason(&out, false), Context: context(&out), timings: g.timingsOf(&out)})
		return
	}
	nd := newNDJSON(w)
	out, _ := g.stream(w, func(p piece) error {
		answer.WriteString(p.content)
		return nd.write(generateResponse{Model: model, CreatedAt: time.Now().UTC(), Response: p.content, Thinking: p.thinking})
	})
	s.finishStream(w, g, nd, &out, func() any {
		return generateResponse{Model: model, CreatedAt: time.Now().UTC(), Done: true, DoneReason: doneReason(&out, false),
			Context: context(&out), timings: g.timingsOf(&out)}
	})
}

// generatePrompt turns /api/generate's prompt, system, raw and context
// into the core's request, and returns the prompt text the model reads
// ("" when unknown), from which the answer's context is made. With
// context (the token ids an earlier answer returned), the prompt is the
// earlier conversation's text followed by the new turn rendered through
// the template, read raw, as Ollama does.
func (s *Server) generatePrompt(c *generateRequest, req *appliance.Request) (string, error) {
	switch {
	case len(c.Images) > 0:
		return "", badf("images: geist runs text-only models; images are not supported")
	case c.Suffix != "":
		return "", badf("suffix (fill-in-the-middle) is not supported by geist")
	case c.Template != "":
		return "", badf("template: geist renders the model's own chat template (Jinja, see /api/show); a Go template cannot replace it")
	}
	m := &s.cfg.Model
	turn := c.Prompt
	if !c.Raw && m.RenderPrompt != nil && strings.TrimSpace(c.Prompt) != "" {
		p, err := m.RenderPrompt(c.System, c.Prompt)
		if err != nil {
			return "", badf("rendering the prompt: %v", err)
		}
		turn = p
	}
	if len(c.Context) == 0 {
		req.Text, req.Raw, req.System = c.Prompt, c.Raw, c.System
		if c.Raw || m.RenderPrompt == nil {
			return "", nil
		}
		return turn, nil
	}
	if m.Detokenize == nil || m.RenderPrompt == nil {
		return "", badf("context is not supported by this server")
	}
	if len(c.Context) > 1<<20 {
		return "", badf("context of %d tokens is too long", len(c.Context))
	}
	req.Text, req.Raw = m.Detokenize(c.Context)+turn, true
	return req.Text, nil
}
