package appliance

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/geisten/geist/engine/constraint"
	"github.com/geisten/geist/engine/sample"
)

// Source names the front end a request came through. It labels the
// counters (and, later, metrics) and tells front ends whose outcomes they
// deliver: the MQTT front end publishes the answers of the device's own
// triggers (buttons, push-to-talk), for instance.
type Source string

// The front ends.
const (
	SourceMQTT    Source = "mqtt"
	SourceHTTP    Source = "http"
	SourceWyoming Source = "wyoming"
	SourceButton  Source = "button"
	SourceVoice   Source = "voice" // push-to-talk on the device
	SourceHermes  Source = "hermes"
	SourceCLI     Source = "cli"
)

// Message is one chat message. Roles are system, user, assistant and tool.
type Message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
	// ToolCalls are an assistant message's calls of tools; ToolName and
	// ToolCallID say which call a tool message answers. Sessions keep
	// role and content only.
	ToolCalls  []ToolCall `json:"tool_calls,omitempty"`
	ToolName   string     `json:"tool_name,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"`
	// Tokens are an assistant message's token ids whose text is exactly
	// its content: after a thinking block, those that follow the block
	// and its blank lines (AnswerSplit.ContentTokens; sessions.db keeps
	// them beside the text).
	Tokens []int32 `json:"-"`
}

// ToolCall is a call of a tool, as the model made it.
type ToolCall struct {
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"` // a JSON object (or a string holding one)
}

// Options are a request's generation settings; nil fields take the
// Config's Defaults, and those llama.cpp's sampler defaults.
type Options struct {
	MaxTokens     int      // most tokens to generate (0: until the end, the context or the TTL); capped by Limits.MaxTokens when set
	Temperature   *float64 // 0: greedy; [0, 2]
	TopK          *int     // 0: off
	TopP          *float64 // (0, 1]; 1: off
	MinP          *float64 // [0, 1]; 0: off
	RepeatPenalty *float64 // > 0; 1: off
	Seed          *uint64  // nil: a fresh seed per request
	Stop          []string // stop strings, besides the model's end of generation
	// NumCtx is the context the request asks for (Ollama's num_ctx; 0:
	// the model's default), honoured up to the most the engine allows.
	NumCtx int
}

// Request is one generation asked of the core.
type Request struct {
	// ID is the client's id: it deduplicates (see Config.Dedup) and
	// cancels (Core.Cancel). Empty: the core assigns one (Ticket.ID) and
	// nothing is deduplicated. At most 128 bytes, no '/', '+', '#',
	// spaces or control characters (it may name an MQTT topic level).
	ID string
	// Generated says that the front end made ID up (it needed the id
	// before Submit returned, to label streamed pieces): the request is
	// not deduplicated.
	Generated bool
	Source    Source
	// Text is one user turn; Messages is a whole chat instead (roles
	// system, user, assistant, tool; a leading system message replaces
	// System). Exactly one of them is set.
	Text     string
	Messages []Message
	// History is how many of Messages (after a leading system message)
	// are earlier turns the engine may leave out, oldest exchange first,
	// when the prompt does not fit the context, as it does with a
	// session's history: stateless clients (Ollama's and OpenAI's APIs)
	// send the whole conversation every turn.
	History int
	// Raw reads Text as the prompt itself: no chat template, no system
	// message, no session (Ollama's raw mode).
	Raw bool
	// Tools are the tools the model may call, each a JSON object as the
	// client sent it ({"type": "function", "function": {...}}), rendered
	// through the model's chat template. The core parses the calls out
	// of the answer (Piece.Calls, Outcome.Calls; Config.ToolFormat).
	Tools []json.RawMessage
	// OneToolCall limits the answer to one tool call (OpenAI's
	// parallel_tool_calls false): the first the model makes. Generation
	// ends where that call is complete (its closing tag; a format whose
	// calls run to the answer's end or are read as a whole answer, Granite's
	// list and Llama's JSON, ends as usual), and nothing the model writes
	// after it reaches the answer: no further calls, no text
	// (chat.ToolParser's FirstOnly). The front end asks the grammar for
	// one call too (Constraint's OneCall).
	OneToolCall bool
	// OnPromptProgress, if set, is told while the prompt is read that done
	// of its total tokens are (the first call's done came from the prompt
	// cache), on the worker's goroutine: it must return at once.
	OnPromptProgress func(done, total int) `json:"-"`
	// TemplateVars are further chat template variables (llama.cpp's
	// chat_template_kwargs), such as "enable_thinking": false.
	TemplateVars map[string]any
	// Think asks the model to think before it answers (nil: the source's
	// policy, Config.Think). Off, the template gets enable_thinking false
	// (unless TemplateVars sets it), and a model that thinks all the same
	// keeps its thinking in Outcome.Thinking: it never reaches the
	// content.
	Think *bool
	// System replaces Config.System for this request ("" keeps it).
	System string
	// Model names the stored model to answer (a client's name, tag or
	// not); "" or the core's own model: the core's (Config.Models).
	Model string
	// Constraint is what the answer must keep to (a format, a schema, a
	// grammar, the calls of Tools; nil: free), as the front end decoded
	// it: the core compiles it in Submit, on the caller's goroutine and
	// with the model's dialect, and refuses what cannot be enforced with
	// CodeBadRequest naming it. The engine gets the compiled grammar.
	Constraint *constraint.Constraint
	// Check, if set, checks the finished answer's content further, after
	// the Constraint's own check (a oneOf whose alternatives overlap:
	// what its grammar could not enforce); an answer it refuses ends the
	// request with its error.
	Check func(content []byte) error
	// Session names the conversation whose history is rendered before the
	// request and to which the exchange is appended; empty: stateless.
	// The same characters as ID are allowed.
	Session string
	Options
	// TTL bounds the time from Submit until the answer is complete, queue
	// included; 0: Limits.DefaultTTL; more than Limits.MaxTTL is refused.
	TTL time.Duration
}

// Code classifies an error outcome.
type Code string

// Error codes. The string values are the MQTT contract's (and what HTTP
// front ends map to status codes).
const (
	CodeBadRequest Code = "bad_request" // invalid request
	CodeTooLong    Code = "too_long"    // the prompt (or a payload) is too long
	CodeBusy       Code = "busy"        // queue full, or shutting down
	CodeCancelled  Code = "cancelled"   // cancelled by a client, a button or shutdown
	CodeTimeout    Code = "timeout"     // the time to live expired
	CodeInternal   Code = "internal"    // anything else (logged)
	CodeDuplicate  Code = "duplicate"   // the id belongs to a request still queued or running
	// CodeNotSaved is a warning (Outcome.Warning), not an error: the
	// answer is delivered, but the conversation could not save it.
	CodeNotSaved Code = "not_saved"
)

// Error is an error outcome: a code and a message for people. For
// CodeDuplicate, State is the first request's state ("queued" or
// "running").
type Error struct {
	Code    Code
	Message string
	State   string
}

func (e *Error) Error() string { return "appliance: " + string(e.Code) + ": " + e.Message }

// Is matches targets with the same code, such as ErrBusy.
func (e *Error) Is(target error) bool {
	var t *Error
	return errors.As(target, &t) && t.Message == "" && t.Code == e.Code
}

// Errors to match outcomes with errors.Is.
var (
	ErrBadRequest = &Error{Code: CodeBadRequest}
	ErrTooLong    = &Error{Code: CodeTooLong}
	ErrBusy       = &Error{Code: CodeBusy}
	ErrCancelled  = &Error{Code: CodeCancelled}
	ErrTimeout    = &Error{Code: CodeTimeout}
	ErrInternal   = &Error{Code: CodeInternal}
	ErrDuplicate  = &Error{Code: CodeDuplicate}
)

func errorf(code Code, format string, a ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, a...)}
}

// refusal reports whether code refuses a request before any work (it
// then does not reserve the request's id).
func refusal(code Code) bool {
	return code == CodeBadRequest || code == CodeTooLong || code == CodeBusy
}

// Limits bound what requests may ask; zero values take the defaults noted.
type Limits struct {
	Queue           int           // requests waiting behind the running ones (8)
	MaxTokens       int           // cap on Options.MaxTokens (0: none; an answer ends at its end, the context or its TTL)
	MaxPromptTokens int           // most prompt tokens (0: the context less one)
	DefaultTTL      time.Duration // when a request gives none (5 min; negative: none)
	MaxTTL          time.Duration // longest TTL accepted (24 h)
	MaxInput        int           // bytes of text, messages, tools and stop strings (1 MiB)
	MaxMessages     int           // messages of one request (256)
	MaxTools        int           // tools of one request (128)
	// StallTimeout ends a running request that makes no progress (no
	// token generated, no prefill pass finished) for this long, with a
	// timeout naming it (2 min: a prefill pass of 64 tokens on a
	// Raspberry Pi takes seconds, a token less; negative: never).
	StallTimeout time.Duration
}

// DefaultStallTimeout is Limits.StallTimeout's default.
const DefaultStallTimeout = 2 * time.Minute

func (l *Limits) defaults() {
	if l.Queue <= 0 {
		l.Queue = 8
	}
	if l.MaxTokens < 0 {
		l.MaxTokens = 0
	}
	switch {
	case l.DefaultTTL < 0:
		l.DefaultTTL = 0
	case l.DefaultTTL == 0:
		l.DefaultTTL = 5 * time.Minute
	}
	if l.MaxTTL <= 0 {
		l.MaxTTL = 24 * time.Hour
	}
	switch {
	case l.StallTimeout < 0:
		l.StallTimeout = 0
	case l.StallTimeout == 0:
		l.StallTimeout = DefaultStallTimeout
	}
	if l.MaxInput <= 0 {
		l.MaxInput = 1 << 20
	}
	if l.MaxMessages <= 0 {
		l.MaxMessages = 256
	}
	if l.MaxTools <= 0 {
		l.MaxTools = 128
	}
}

// maxIDLen bounds ids and session names.
const maxIDLen = 128

// CheckID reports whether s may be a request id or a session name: 1 to
// 128 bytes of UTF-8 without '/', '+', '#', spaces or control characters.
// what names the field in the error.
func CheckID(what, s string) error {
	if e := checkID(what, s); e != nil {
		return e
	}
	return nil
}

func checkID(what, s string) *Error {
	switch {
	case s == "":
		return errorf(CodeBadRequest, "%s is empty", what)
	case len(s) > maxIDLen:
		return errorf(CodeBadRequest, "%s is longer than %d bytes", what, maxIDLen)
	case !utf8.ValidString(s):
		return errorf(CodeBadRequest, "%s is not valid UTF-8", what)
	}
	for _, r := range s {
		if r == '/' || r == '+' || r == '#' || unicode.IsControl(r) || unicode.IsSpace(r) {
			return errorf(CodeBadRequest, "%s %q contains %q (not allowed: / + # spaces and control characters)", what, s, r)
		}
	}
	return nil
}

// NewID returns a random request id: "g" and 16 hex digits.
func NewID() string {
	var b [8]byte
	rand.Read(b[:])
	return "g" + hex.EncodeToString(b[:])
}

// check validates r against lim and fills in its defaults.
func (r *Request) check(lim *Limits) *Error {
	if r.ID != "" {
		if err := checkID("id", r.ID); err != nil {
			return err
		}
	}
	if r.Session != "" {
		if err := checkID("session", r.Session); err != nil {
			return err
		}
	}
	size := len(r.System)
	switch {
	case len(r.Messages) > 0 && r.Text != "":
		return errorf(CodeBadRequest, "give either text or messages, not both")
	case len(r.Messages) > 0:
		if r.Raw {
			return errorf(CodeBadRequest, "a raw request takes text, not messages")
		}
		if r.History < 0 || r.History >= len(r.Messages) {
			r.History = max(min(r.History, len(r.Messages)-1), 0)
		}
		if len(r.Messages) > lim.MaxMessages {
			return errorf(CodeBadRequest, "%d messages exceed the limit of %d", len(r.Messages), lim.MaxMessages)
		}
		for i, m := range r.Messages {
			switch m.Role {
			case "system", "user", "assistant", "tool":
			default:
				return errorf(CodeBadRequest, "messages[%d].role %q is not system, user, assistant or tool", i, m.Role)
			}
			if !utf8.ValidString(m.Content) {
				return errorf(CodeBadRequest, "messages[%d].content is not valid UTF-8", i)
			}
			size += len(m.Content) + len(m.ToolName) + len(m.ToolCallID)
			for j, c := range m.ToolCalls {
				if c.Name == "" {
					return errorf(CodeBadRequest, "messages[%d].tool_calls[%d] has no function name", i, j)
				}
				if len(c.Arguments) > 0 && !json.Valid(c.Arguments) {
					return errorf(CodeBadRequest, "messages[%d].tool_calls[%d].arguments is not valid JSON", i, j)
				}
				size += len(c.ID) + len(c.Name) + len(c.Arguments)
			}
		}
	case strings.TrimSpace(r.Text) == "":
		return errorf(CodeBadRequest, "empty text")
	case !utf8.ValidString(r.Text):
		return errorf(CodeBadRequest, "text is not valid UTF-8")
	}
	size += len(r.Text)
	if len(r.Tools) > 0 && r.Raw {
		return errorf(CodeBadRequest, "a raw request takes no tools (they are rendered through the chat template)")
	}
	if len(r.Tools) > lim.MaxTools {
		return errorf(CodeBadRequest, "%d tools exceed the limit of %d", len(r.Tools), lim.MaxTools)
	}
	for i, t := range r.Tools {
		if !json.Valid(t) || len(t) == 0 || t[0] != '{' {
			return errorf(CodeBadRequest, "tools[%d] is not a JSON object", i)
		}
		size += len(t)
	}
	for _, s := range r.Stop {
		size += len(s)
	}
	if size > lim.MaxInput {
		return errorf(CodeTooLong, "%d bytes of input exceed the limit of %d", size, lim.MaxInput)
	}
	if !utf8.ValidString(r.System) {
		return errorf(CodeBadRequest, "system is not valid UTF-8")
	}
	if r.NumCtx < 0 {
		return errorf(CodeBadRequest, "num_ctx %d must not be negative (the request's context in tokens; 0: the server's)", r.NumCtx)
	}
	if r.MaxTokens < 0 {
		return errorf(CodeBadRequest, "max_tokens %d must not be negative", r.MaxTokens)
	}
	if lim.MaxTokens > 0 && (r.MaxTokens == 0 || r.MaxTokens > lim.MaxTokens) {
		r.MaxTokens = lim.MaxTokens
	}
	switch {
	case r.TTL < 0 || r.TTL > lim.MaxTTL:
		return errorf(CodeBadRequest, "ttl %gs must be in (0, %g]", r.TTL.Seconds(), lim.MaxTTL.Seconds())
	case r.TTL == 0:
		r.TTL = lim.DefaultTTL
	}
	return nil
}

// sampling returns the sampler settings of o over those of def over
// llama.cpp's defaults, and checks them.
func sampling(def, o *Options) (sample.Params, *Error) {
	p := sample.DefaultParams()
	p.Seed = uint64(time.Now().UnixNano())
	for _, x := range []*Options{def, o} {
		if x.Temperature != nil {
			p.Temperature = float32(*x.Temperature)
		}
		if x.TopK != nil {
			p.TopK = *x.TopK
		}
		if x.TopP != nil {
			p.TopP = float32(*x.TopP)
		}
		if x.MinP != nil {
			p.MinP = float32(*x.MinP)
		}
		if x.RepeatPenalty != nil {
			p.RepeatPenalty = float32(*x.RepeatPenalty)
		}
		if x.Seed != nil {
			p.Seed = *x.Seed
		}
	}
	if o.Temperature != nil && (math.IsNaN(*o.Temperature) || *o.Temperature > 2) {
		return p, errorf(CodeBadRequest, "temperature %g must be in [0, 2]", *o.Temperature)
	}
	if err := p.Validate(); err != nil {
		return p, errorf(CodeBadRequest, "%s", strings.TrimPrefix(strings.TrimPrefix(err.Error(), "sample: "), "invalid parameters: "))
	}
	return p, nil
}
