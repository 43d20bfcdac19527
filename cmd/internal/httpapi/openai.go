package httpapi

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strings"
	"time"

	"github.com/geisten/geist/engine/appliance"
)

// openaiError is OpenAI's error body.
type openaiError struct {
	Error openaiErrorBody `json:"error"`
}

type openaiErrorBody struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}

func writeOpenAIError(w http.ResponseWriter, status int, msg string) {
	typ := "invalid_request_error"
	var code *string
	switch status {
	case http.StatusNotFound:
		c := "model_not_found"
		code = &c
	case http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		typ = "server_error"
	case http.StatusInternalServerError:
		typ = "server_error"
	}
	writeJSON(w, status, openaiError{Error: openaiErrorBody{Message: msg, Type: typ, Code: code}})
}

// openaiRefuse writes a refusal in OpenAI's shape and counts it.
func (s *Server) openaiRefuse(w http.ResponseWriter, err error) { s.refuseAs(w, err, writeOpenAIError) }

func (s *Server) openaiFailed(w http.ResponseWriter, e *appliance.Error) {
	s.failedAs(w, e, writeOpenAIError)
}

// openaiMessage is a message of OpenAI's chat completions.
type openaiMessage struct {
	Role       string           `json:"role"`
	Content    json.RawMessage  `json:"content"` // a string, null, or a list of parts
	Name       string           `json:"name,omitempty"`
	ToolCalls  []openaiToolCall `json:"tool_calls,omitempty"`
	ToolCallID string           `json:"tool_call_id,omitempty"`
}

type openaiToolCall struct {
	Index    *int   `json:"index,omitempty"`
	ID       string `json:"id,omitempty"`
	Type     string `json:"type,omitempty"`
	Function struct {
		Name      string `json:"name,omitempty"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

// openaiCommon are the fields chat completions and completions share.
type openaiCommon struct {
	Model         string `json:"model"`
	Stream        bool   `json:"stream"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	MaxTokens   *int64          `json:"max_tokens"`
	Temperature *float64        `json:"temperature"`
	TopP        *float64        `json:"top_p"`
	N           *int            `json:"n"`
	Stop        json.RawMessage `json:"stop"`
	Seed        *int64          `json:"seed"`
	// ResponseFormat is enforced (text, json_object, json_schema);
	// Grammar is llama-server's extension: a GBNF grammar for the answer.
	ResponseFormat json.RawMessage `json:"response_format"`
	Grammar        string          `json:"grammar"`
	// ReturnProgress is llama-server's: a streamed answer tells the
	// prompt's progress (prompt_progress chunks) while it is read.
	ReturnProgress bool `json:"return_progress"`
	// Accepted and ignored: presence_penalty, frequency_penalty,
	// logit_bias, user, reasoning_effort, store, metadata, service_tier,
	// top_logprobs (without logprobs).
}

func (c *openaiCommon) includeUsage() bool {
	return c.StreamOptions != nil && c.StreamOptions.IncludeUsage
}

type openaiChatRequest struct {
	openaiCommon
	Messages   []openaiMessage   `json:"messages"`
	Tools      []json.RawMessage `json:"tools"`
	ToolChoice json.RawMessage   `json:"tool_choice"`
	// ParallelToolCalls false: at most one call per answer (the grammar
	// of tool_choice allows one, the core keeps the first and stops
	// there: appliance.Request.OneToolCall); true or absent: any number.
	ParallelToolCalls   *bool  `json:"parallel_tool_calls"`
	MaxCompletionTokens *int64 `json:"max_completion_tokens"`
	Logprobs            bool   `json:"logprobs"`
}

// openaiSampling applies OpenAI's common settings to req.
func openaiSampling(req *appliance.Request, c *openaiCommon, logprobs bool) error {
	maxTokens, temperature, topP, n, stop, seed := c.MaxTokens, c.Temperature, c.TopP, c.N, c.Stop, c.Seed
	if n != nil && *n != 1 {
		return badf("n=%d: geist answers with one choice (n=1)", *n)
	}
	if logprobs {
		return badf("logprobs are not supported by geist")
	}
	if maxTokens != nil {
		if *maxTokens < 0 {
			return badf("max_tokens must not be negative")
		}
		req.MaxTokens = int(min(*maxTokens, math.MaxInt32))
	}
	req.Temperature, req.TopP = temperature, topP
	if seed != nil {
		v := uint64(*seed)
		req.Seed = &v
	}
	if len(stop) > 0 && string(stop) != "null" {
		list, err := stopList(stop)
		if err != nil {
			return badf("stop: %v", err)
		}
		if len(list) > 4 {
			return badf("stop: at most 4 sequences")
		}
		req.Stop = list
	}
	if c.Grammar != "" {
		if len(c.ResponseFormat) > 0 && string(c.ResponseFormat) != "null" {
			return badf("grammar and response_format cannot both be enforced")
		}
		constraintOf(req).GBNF = c.Grammar
		return nil
	}
	return openaiResponseFormat(req, c.ResponseFormat)
}

// content reads a message's content: a string, null, or a list of text
// parts. Images, audio and files (Home Assistant's AI Task attachments:
// image_url parts, and a PDF as a text part "[File: NAME]\nContent:
// BASE64") are refused naming the model geist runs, which reads text only.
func (s *Server) content(raw json.RawMessage, i int) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	var str string
	if json.Unmarshal(raw, &str) == nil {
		return str, s.attachedPDF(str, i, -1)
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", badf("messages[%d].content must be a string or a list of parts", i)
	}
	var b strings.Builder
	for j, p := range parts {
		if p.Type != "text" {
			what := map[string]string{"image_url": "images", "input_image": "images", "input_audio": "audio", "file": "files (PDF)"}[p.Type]
			if what == "" {
				what = fmt.Sprintf("%q parts", p.Type)
			}
			return "", badf("messages[%d].content[%d]: %s cannot be read: geist runs %s, a text-only model (no vision); send text parts", i, j, what, s.cfg.Model.tagged())
		}
		if err := s.attachedPDF(p.Text, i, j); err != nil {
			return "", err
		}
		b.WriteString(p.Text)
	}
	return b.String(), nil
}

// attachedPDF refuses a PDF attached the way Home Assistant's llama_cpp
// integration attaches one: a text part "[File: NAME]\nContent: " and the
// file's bytes in base64 (JVBERi0 is "%PDF-"), which no text model can
// read and which would fill the context with base64.
func (s *Server) attachedPDF(text string, i, j int) error {
	rest, ok := strings.CutPrefix(text, "[File: ")
	if !ok {
		return nil
	}
	name, rest, ok := strings.Cut(rest, "]\nContent: ")
	if !ok || !strings.HasPrefix(rest, "JVBERi0") {
		return nil
	}
	at := fmt.Sprintf("messages[%d].content", i)
	if j >= 0 {
		at += fmt.Sprintf("[%d]", j)
	}
	return badf("%s: the PDF %q cannot be read: geist runs %s, a text-only model (no vision or PDF reading); send its text instead", at, name, s.cfg.Model.tagged())
}

func newID(prefix string) string {
	var b [12]byte
	rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

type openaiUsage struct {
	PromptTokens        int `json:"prompt_tokens"`
	CompletionTokens    int `json:"completion_tokens"`
	TotalTokens         int `json:"total_tokens"`
	PromptTokensDetails struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
}

func usageOf(o *appliance.Outcome) *openaiUsage {
	u := &openaiUsage{PromptTokens: o.Usage.PromptTokens, CompletionTokens: o.Usage.GeneratedTokens, TotalTokens: o.Usage.PromptTokens + o.Usage.GeneratedTokens}
	u.PromptTokensDetails.CachedTokens = o.Usage.CachedTokens
	return u
}

type openaiOutMessage struct {
	Role      string           `json:"role,omitempty"`
	Content   *string          `json:"content,omitempty"`
	Reasoning string           `json:"reasoning_content,omitempty"`
	ToolCalls []openaiToolCall `json:"tool_calls,omitempty"`
}

type openaiChoice struct {
	Index        int               `json:"index"`
	Message      *openaiOutMessage `json:"message,omitempty"`
	Delta        *openaiOutMessage `json:"delta,omitempty"`
	Logprobs     *struct{}         `json:"logprobs"`
	FinishReason *string           `json:"finish_reason"`
}

// openaiResponse is a chat completion (C openaiChoice) or a completion
// (C completionChoice), whole or a chunk of a stream.
type openaiResponse[C any] struct {
	ID                string       `json:"id"`
	Object            string       `json:"object"`
	Created           int64        `json:"created"`
	Model             string       `json:"model"`
	SystemFingerprint string       `json:"system_fingerprint"`
	Choices           []C          `json:"choices"`
	Usage             *openaiUsage `json:"usage,omitempty"`
	// PromptProgress is llama-server's, with return_progress.
	PromptProgress *promptProgress `json:"prompt_progress,omitempty"`
}

type openaiChatResponse = openaiResponse[openaiChoice]

// openaiCalls converts parsed calls, numbering them from first.
func openaiCalls(calls []appliance.ToolCall, first int, stream bool) []openaiToolCall {
	out := make([]openaiToolCall, len(calls))
	for i, c := range calls {
		tc := openaiToolCall{ID: newID("call_"), Type: "function"}
		if stream {
			idx := first + i
			tc.Index = &idx
		}
		tc.Function.Name = c.Name
		tc.Function.Arguments = string(c.Arguments)
		out[i] = tc
	}
	return out
}

func finishReason(o *appliance.Outcome, calls bool) *string {
	r := doneReason(o, false)
	if calls {
		r = "tool_calls"
	}
	return &r
}

func (s *Server) openaiChat(w http.ResponseWriter, r *http.Request) {
	var c openaiChatRequest
	if eb := s.decode(w, r, &c); eb != nil {
		s.openaiRefuse(w, eb)
		return
	}
	req := appliance.Request{}
	o := genOptions{thinking: true, progress: c.Stream && c.ReturnProgress} // the thinking goes out as reasoning_content (the core splits it off)
	err := s.checkModel(c.Model)
	if err == nil {
		if c.MaxTokens == nil {
			c.MaxTokens = c.MaxCompletionTokens
		}
		err = openaiSampling(&req, &c.openaiCommon, c.Logprobs)
	}
	if err == nil && len(c.Messages) == 0 {
		err = badf("messages is required")
	}
	callNames := map[string]string{}
	for i, m := range c.Messages {
		if err != nil {
			break
		}
		var text string
		if text, err = s.content(m.Content, i); err != nil {
			break
		}
		am := appliance.Message{Role: strings.ToLower(m.Role), Content: text, ToolCallID: m.ToolCallID}
		if am.Role == "developer" {
			am.Role = "system"
		}
		if am.Role == "tool" {
			am.ToolName = m.Name
			if am.ToolName == "" {
				// OpenAI's tool messages name only the call (Home
				// Assistant's do): the name is the call's, for the
				// templates that show it.
				am.ToolName = callNames[m.ToolCallID]
			}
		}
		for _, tc := range m.ToolCalls {
			args, _ := json.Marshal(tc.Function.Arguments) // a JSON string, read as the object it holds
			am.ToolCalls = append(am.ToolCalls, appliance.ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: args})
			if tc.ID != "" {
				callNames[tc.ID] = tc.Function.Name
			}
		}
		req.Messages = append(req.Messages, am)
	}
	if err != nil {
		s.openaiRefuse(w, err)
		return
	}
	req.History = historyOf(req.Messages)
	if len(c.Tools) > 0 && strings.Trim(string(c.ToolChoice), `" `) != "none" {
		req.Tools = c.Tools // the core parses the calls out of the answer (or refuses them: appliance.Config.NoTools)
		req.OneToolCall = c.ParallelToolCalls != nil && !*c.ParallelToolCalls
	}
	toolConstraint(&req, c.Tools, c.ToolChoice)
	g, err := s.submit(r, req, o)
	if err != nil {
		s.openaiRefuse(w, err)
		return
	}
	resp := openaiChatResponse{ID: newID("chatcmpl-"), Object: "chat.completion", Created: time.Now().Unix(), Model: s.cfg.Model.tagged(),
		SystemFingerprint: "geist-" + s.cfg.Version}
	if !c.Stream {
		out, last := g.wait()
		if out.Err != nil {
			s.openaiFailed(w, out.Err)
			return
		}
		msg := &openaiOutMessage{Role: "assistant", Reasoning: last.thinking}
		if last.content != "" || len(last.calls) == 0 {
			msg.Content = &last.content
		}
		if len(last.calls) > 0 {
			msg.ToolCalls = openaiCalls(last.calls, 0, false)
		}
		resp.Choices = []openaiChoice{{Message: msg, FinishReason: finishReason(&out, len(last.calls) > 0)}}
		resp.Usage = usageOf(&out)
		writeJSON(w, http.StatusOK, resp)
		return
	}
	resp.Object = "chat.completion.chunk"
	sse := &sseWriter{w: w}
	chunk := func(d *openaiOutMessage, finish *string) error {
		r := resp
		r.Choices = []openaiChoice{{Delta: d, FinishReason: finish}}
		return sse.write(r)
	}
	calls, first := 0, true
	send := func(p piece) error {
		if p.progress != nil {
			// As llama-server sends it: an assistant delta without
			// content, the progress beside the choices.
			r := resp
			r.Choices = []openaiChoice{{Delta: &openaiOutMessage{Role: "assistant"}}}
			r.PromptProgress = p.progress
			return sse.write(r)
		}
		if first {
			empty := ""
			first = false
			if err := chunk(&openaiOutMessage{Role: "assistant", Content: &empty}, nil); err != nil {
				return err
			}
		}
		if p.thinking != "" {
			if err := chunk(&openaiOutMessage{Reasoning: p.thinking}, nil); err != nil {
				return err
			}
		}
		if p.content != "" {
			if err := chunk(&openaiOutMessage{Content: &p.content}, nil); err != nil {
				return err
			}
		}
		// Each call as OpenAI streams one: a chunk with its index, id,
		// type, name and empty arguments, then chunks of arguments
		// under the same index (here one). One call per chunk: Home
		// Assistant reads only delta.tool_calls[0].
		for _, tc := range openaiCalls(p.calls, calls, true) {
			args := tc.Function.Arguments
			tc.Function.Arguments = ""
			if err := chunk(&openaiOutMessage{ToolCalls: []openaiToolCall{tc}}, nil); err != nil {
				return err
			}
			more := openaiToolCall{Index: tc.Index}
			more.Function.Arguments = args
			if err := chunk(&openaiOutMessage{ToolCalls: []openaiToolCall{more}}, nil); err != nil {
				return err
			}
			calls++
		}
		return nil
	}
	out, _ := g.stream(w, send)
	if !g.writeOK {
		return
	}
	if out.Err != nil {
		if !g.wrote {
			s.openaiFailed(w, out.Err)
			return
		}
		sse.write(openaiError{Error: openaiErrorBody{Message: errorText(out.Err), Type: "server_error"}})
		sse.done()
		return
	}
	if first {
		send(piece{}) // the role chunk of an empty answer
	}
	chunk(&openaiOutMessage{}, finishReason(&out, calls > 0))
	if c.includeUsage() {
		u := resp
		u.Choices, u.Usage = []openaiChoice{}, usageOf(&out)
		sse.write(u)
	}
	sse.done()
}

// sseWriter writes server-sent events: "data: JSON\n\n".
type sseWriter struct {
	w       http.ResponseWriter
	started bool
}

func (e *sseWriter) raw(b []byte) error {
	if !e.started {
		h := e.w.Header()
		h.Set("Content-Type", "text/event-stream")
		h.Set("Cache-Control", "no-cache")
		e.w.WriteHeader(http.StatusOK)
		e.started = true
	}
	if _, err := e.w.Write(b); err != nil {
		return err
	}
	http.NewResponseController(e.w).Flush()
	return nil
}

func (e *sseWriter) write(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return e.raw(append(append([]byte("data: "), b...), '\n', '\n'))
}

func (e *sseWriter) done() { e.raw([]byte("data: [DONE]\n\n")) }

type openaiCompletionRequest struct {
	openaiCommon
	Prompt   json.RawMessage `json:"prompt"`
	Echo     bool            `json:"echo"`
	Suffix   string          `json:"suffix"`
	Logprobs *int            `json:"logprobs"`
	BestOf   *int            `json:"best_of"`
}

type completionChoice struct {
	Text         string    `json:"text"`
	Index        int       `json:"index"`
	Logprobs     *struct{} `json:"logprobs"`
	FinishReason *string   `json:"finish_reason"`
}

type completionResponse = openaiResponse[completionChoice]

// openaiCompletions is the legacy completions endpoint: the prompt is
// read raw (no chat template), max_tokens defaults to 16 as OpenAI's does.
func (s *Server) openaiCompletions(w http.ResponseWriter, r *http.Request) {
	var c openaiCompletionRequest
	if eb := s.decode(w, r, &c); eb != nil {
		s.openaiRefuse(w, eb)
		return
	}
	req := appliance.Request{Raw: true}
	req.MaxTokens = 16
	err := s.checkModel(c.Model)
	if err == nil {
		err = openaiSampling(&req, &c.openaiCommon, c.Logprobs != nil && *c.Logprobs > 0)
	}
	if err == nil {
		switch {
		case c.Suffix != "":
			err = badf("suffix (fill-in-the-middle) is not supported by geist")
		case c.BestOf != nil && *c.BestOf != 1:
			err = badf("best_of=%d: geist answers with one choice", *c.BestOf)
		}
	}
	if err == nil {
		var p string
		var list []string
		switch {
		case json.Unmarshal(c.Prompt, &p) == nil:
		case json.Unmarshal(c.Prompt, &list) == nil && len(list) == 1:
			p = list[0]
		default:
			err = badf("prompt must be a string (or a list of one string; token ids are not supported)")
		}
		req.Text = p
	}
	if err != nil {
		s.openaiRefuse(w, err)
		return
	}
	g, err := s.submit(r, req, genOptions{})
	if err != nil {
		s.openaiRefuse(w, err)
		return
	}
	resp := completionResponse{ID: newID("cmpl-"), Object: "text_completion", Created: time.Now().Unix(), Model: s.cfg.Model.tagged(),
		SystemFingerprint: "geist-" + s.cfg.Version}
	echo := ""
	if c.Echo {
		echo = req.Text
	}
	if !c.Stream {
		out, last := g.wait()
		if out.Err != nil {
			s.openaiFailed(w, out.Err)
			return
		}
		resp.Choices = []completionChoice{{Text: echo + last.content, FinishReason: finishReason(&out, false)}}
		resp.Usage = usageOf(&out)
		writeJSON(w, http.StatusOK, resp)
		return
	}
	sse := &sseWriter{w: w}
	if echo != "" {
		r := resp
		r.Choices = []completionChoice{{Text: echo}}
		sse.write(r)
	}
	out, _ := g.stream(w, func(p piece) error {
		r := resp
		r.Choices = []completionChoice{{Text: p.content}}
		return sse.write(r)
	})
	if !g.writeOK {
		return
	}
	if out.Err != nil {
		if !g.wrote && echo == "" {
			s.openaiFailed(w, out.Err)
			return
		}
		sse.write(openaiError{Error: openaiErrorBody{Message: errorText(out.Err), Type: "server_error"}})
		sse.done()
		return
	}
	fin := resp
	fin.Choices = []completionChoice{{FinishReason: finishReason(&out, false)}}
	sse.write(fin)
	if c.includeUsage() {
		u := resp
		u.Choices, u.Usage = []completionChoice{}, usageOf(&out)
		sse.write(u)
	}
	sse.done()
}

type openaiModel struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
}

func (s *Server) modelEntry() openaiModel {
	m := &s.cfg.Model
	created := m.ModifiedAt.Unix()
	if m.ModifiedAt.IsZero() {
		created = s.started.Unix()
	}
	return openaiModel{ID: m.tagged(), Object: "model", Created: created, OwnedBy: "geist"}
}

func (s *Server) openaiModels(w http.ResponseWriter, r *http.Request) {
	data := []openaiModel{s.modelEntry()}
	for _, m := range s.storedModels()[1:] {
		data = append(data, openaiModel{ID: m.tagged(), Object: "model", Created: m.ModifiedAt.Unix(), OwnedBy: "geist"})
	}
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": data})
}

func (s *Server) openaiModel(w http.ResponseWriter, r *http.Request) {
	for _, m := range s.storedModels()[1:] {
		if strings.EqualFold(canonicalName(m.Name), canonicalName(r.PathValue("model"))) {
			writeJSON(w, http.StatusOK, openaiModel{ID: m.tagged(), Object: "model", Created: m.ModifiedAt.Unix(), OwnedBy: "geist"})
			return
		}
	}
	if !s.isLoaded(r.PathValue("model")) {
		writeOpenAIError(w, http.StatusNotFound, fmt.Sprintf("model %q not found: geist serves %q", r.PathValue("model"), s.cfg.Model.tagged()))
		return
	}
	writeJSON(w, http.StatusOK, s.modelEntry())
}
