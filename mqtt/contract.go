// Package mqtt is geist's MQTT front end: it parses and validates
// requests, hands them to the appliance core (which queues, runs,
// cancels, expires and deduplicates them), streams and publishes the
// answers, publishes availability and state, announces the device to
// Home Assistant and publishes the device's button presses. It keeps no
// queue and no sessions; the Hermes bridge to voice pipelines is in
// mqtt/hermes.
//
// Topics (<dev> is the device name):
//
//	geist/<dev>/ask            requests, QoS 1: JSON or plain UTF-8 text
//	geist/pool/ask             pooled requests, through $share/geist/geist/pool/ask
//	geist/<dev>/answer/<id>    answers and errors (or the request's reply_to, under geist/<dev>/reply/), QoS 1
//	<answer topic>/stream      streamed chunks {"id","seq","delta"}, QoS 0
//	geist/<dev>/answer         answers to plain-text requests and requests without id
//	geist/<dev>/error          errors for payloads too broken to carry an id
//	geist/<dev>/cancel         {"id"}: cancel queued or running work
//	geist/<dev>/status         retained online/offline (the last will)
//	geist/<dev>/state          retained JSON state
//	geist/<dev>/last_answer    retained JSON {"id","text","session"} of the last answer
//	geist/<dev>/event          Home Assistant event entity: {"event_type":"answer"|"error",...}
//	geist/<dev>/cmd/ask        Home Assistant text entity: plain text, dashboard session
//	geist/<dev>/cmd/cancel     Home Assistant button: cancel the running request
//	geist/<dev>/cmd/new_conversation  Home Assistant button: start a new dashboard session
//	geist/<dev>/button/<name>  a button's presses {"event_type","button"} (Home Assistant event entity)
//
// A payload larger than Config.MaxPayload is refused with too_long (not
// bad_request): the request may be well formed, it is only too big. Every
// topic's cap is applied before paho reads the payload (mqtt/guard), the
// id of a refused payload is looked for in its first 4 KiB only, refusals
// are rate-limited per topic, retained messages on command topics are
// ignored, and reply_to is confined to Config.ReplyPrefix.
package mqtt

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/geisten/geist/engine/constraint"

	"github.com/geisten/geist/engine/appliance"
)

// Error codes carried in error payloads: the appliance core's.
const (
	CodeBadRequest = string(appliance.CodeBadRequest)
	CodeTooLong    = string(appliance.CodeTooLong)
	CodeBusy       = string(appliance.CodeBusy)
	CodeCancelled  = string(appliance.CodeCancelled)
	CodeTimeout    = string(appliance.CodeTimeout)
	CodeInternal   = string(appliance.CodeInternal)
	CodeDuplicate  = string(appliance.CodeDuplicate) // the id's request is still queued or running
)

// Error is a contract error: a code from the list above and a message for
// people.
type Error struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

func (e *Error) Error() string { return "mqtt: " + e.Code + ": " + e.Message }

func errorf(code, format string, a ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, a...)}
}

// contractError is the payload form of an error of the core.
func contractError(err error) *Error {
	var e *appliance.Error
	if errors.As(err, &e) {
		return &Error{Code: string(e.Code), Message: e.Message}
	}
	return &Error{Code: CodeInternal, Message: err.Error()}
}

// Message is one chat message of a request: roles system, user,
// assistant (with the tool calls it made) and tool (a call's result,
// naming the tool).
type Message struct {
	Role      string               `json:"role"`
	Content   string               `json:"content"`
	ToolCalls []appliance.ToolCall `json:"tool_calls,omitempty"`
	ToolName  string               `json:"tool_name,omitempty"`
}

// Request is one validated ask.
type Request struct {
	ID          string    // the client's id, or a generated one (see Generated)
	Generated   bool      // the id was generated: the request carried none
	Text        string    // the user's text (empty when Messages is set)
	Messages    []Message // the conversation, when given instead of Text
	Session     string    // conversation id whose history the generator keeps
	System      string    // system message, overriding the configured one
	MaxTokens   int       // most tokens to generate, already capped
	Temperature *float64  // sampling temperature, nil for the configured one
	Think       *bool     // the model thinks first (thinking apart from text); nil: the core's policy
	Stream      bool      // stream chunks on <answer topic>/stream
	ReplyTo     string    // answer topic
	TTL         time.Duration
	Plain       bool // the payload was plain text
	// Constraint is the ask's format ("json" or a JSON schema; nil for
	// free text), compiled once by Parse to refuse what cannot be
	// enforced; the core finds it compiled.
	Constraint *constraint.Constraint
	// Tools are the tools the model may call (JSON objects, as Ollama's
	// tools); the answer carries its calls in tool_calls.
	Tools    []json.RawMessage
	Model    string    // the stored model to answer ("": the one serve started with)
	Received time.Time // when the request arrived
}

// Usage are the statistics of one answer.
type Usage struct {
	PromptTokens    int     `json:"prompt_tokens"`
	GeneratedTokens int     `json:"generated_tokens"`
	ThinkingTokens  int     `json:"thinking_tokens,omitempty"` // of generated_tokens, in the thinking block
	CachedTokens    int     `json:"cached_tokens"`             // of prompt_tokens, those whose KV state was reused (held in memory or restored)
	RestoredTokens  int     `json:"restored_tokens"`           // of cached_tokens, those restored from the prompt cache
	EvaluatedTokens int     `json:"evaluated_tokens"`          // of prompt_tokens, those the model evaluated
	TTFTms          float64 `json:"ttft_ms"`
	TokS            float64 `json:"tok_s"`
	Drafted         int     `json:"drafted"`
	Accepted        int     `json:"accepted"`
}

func usageOf(u appliance.Usage) Usage {
	return Usage{PromptTokens: u.PromptTokens, GeneratedTokens: u.GeneratedTokens, ThinkingTokens: u.ThinkingTokens,
		CachedTokens: u.CachedTokens, RestoredTokens: u.RestoredTokens, EvaluatedTokens: u.EvaluatedTokens(),
		TTFTms: appliance.Round1(float64(u.TTFT.Microseconds()) / 1000), TokS: appliance.Round1(u.TokS), Drafted: u.Drafted, Accepted: u.Accepted}
}

// Answer is the final payload of a request.
type Answer struct {
	ID   string `json:"id"`
	Text string `json:"text"` // the content: never the thinking
	// Thinking is the model's thinking block, apart from Text.
	Thinking string `json:"thinking,omitempty"`
	// ToolCalls are the calls of the tools offered that the answer made,
	// parsed out of Text.
	ToolCalls []appliance.ToolCall `json:"tool_calls,omitempty"`
	Done      bool                 `json:"done"`
	Session   string               `json:"session,omitempty"`
	Usage     Usage                `json:"usage"`
	ServedBy  string               `json:"served_by"`
	// Warning says what went wrong beside a delivered answer
	// (not_saved: the conversation does not remember it).
	Warning *Error `json:"warning,omitempty"`
}

// Chunk is one streamed piece of an answer.
type Chunk struct {
	ID    string `json:"id"`
	Seq   int    `json:"seq"`
	Delta string `json:"delta"` // content
	// Thinking is a piece of the model's thinking block (Delta is then
	// empty); it never reaches Delta or the answer's text.
	Thinking string `json:"thinking,omitempty"`
	// ToolCalls are the calls completed since the last chunk (Delta is
	// then empty); the answer carries them all.
	ToolCalls []appliance.ToolCall `json:"tool_calls,omitempty"`
}

// ErrorReply is the payload of an error answer. ID is empty on the error
// topic when the request carried none.
type ErrorReply struct {
	ID       string `json:"id,omitempty"`
	Error    *Error `json:"error"`
	ServedBy string `json:"served_by,omitempty"`
}

// Limits bound what a request may ask for.
type Limits struct {
	MaxPayload int           // bytes; larger payloads are too_long
	MaxTokens  int           // cap on max_tokens (and its default)
	DefaultTTL time.Duration // when the request gives no ttl_s; 0: none
	MaxTTL     time.Duration // longest ttl_s accepted
	// ReplyPrefixes confine reply_to: it must start with one of them
	// (and go on after it). None: any topic without wildcards and not
	// starting with $.
	ReplyPrefixes []string
}

const (
	maxTopicLen   = 512
	maxMessages   = 256
	maxTools      = 128
	maxTTLDefault = 24 * time.Hour
)

// wireRequest is the JSON form of a request. Pointers tell absent fields
// from zero values.
type wireRequest struct {
	ID          *string   `json:"id"`
	Text        *string   `json:"text"`
	Messages    []Message `json:"messages"`
	Session     *string   `json:"session"`
	System      *string   `json:"system"`
	MaxTokens   *int      `json:"max_tokens"`
	Temperature *float64  `json:"temperature"`
	Think       *bool     `json:"think"`
	Stream      *bool     `json:"stream"`
	ReplyTo     *string   `json:"reply_to"`
	TTL         *float64  `json:"ttl_s"`
	// Format is Ollama's: "json" or a JSON schema the answer must keep to.
	Format json.RawMessage   `json:"format"`
	Tools  []json.RawMessage `json:"tools"`
	// Model names the stored model to answer (absent: the one geist
	// serve started with).
	Model *string `json:"model"`
}

// Parse validates payload as a request. On failure it returns an *Error
// and, when the payload carried a usable id (and reply_to), a Request
// holding them so the error can be answered where the client listens.
func Parse(payload []byte, lim Limits, now time.Time) (Request, *Error) {
	req := Request{Received: now}
	trimmed := bytes.TrimSpace(payload)
	isJSON := len(trimmed) > 0 && trimmed[0] == '{'
	if lim.MaxPayload > 0 && len(payload) > lim.MaxPayload {
		return TooLong(payload, int64(len(payload)), lim)
	}
	if !utf8.Valid(payload) {
		if isJSON {
			probeAddress(payload, lim, &req)
		}
		return req, errorf(CodeBadRequest, "payload is not valid UTF-8 (byte offset %d)", firstInvalid(payload))
	}
	if !isJSON {
		text := string(trimmed)
		if text == "" {
			return req, errorf(CodeBadRequest, "empty text")
		}
		req.Plain = true
		req.Text = text
		req.MaxTokens = lim.MaxTokens
		req.TTL = lim.DefaultTTL
		req.ID, req.Generated = NewID(), true
		return req, nil
	}
	var w wireRequest
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.DisallowUnknownFields()
	err := dec.Decode(&w)
	if err == nil {
		if _, e := dec.Token(); e != io.EOF {
			err = errors.New("data after the JSON object")
		}
	}
	if err != nil {
		probeAddress(payload, lim, &req)
		return req, errorf(CodeBadRequest, "%s", describeJSONError(err))
	}
	// The address first, so every later error reaches the client.
	if w.ID != nil {
		if e := checkID("id", *w.ID); e != nil {
			return req, e
		}
		req.ID = *w.ID
	}
	if w.ReplyTo != nil {
		if e := checkTopic(*w.ReplyTo, lim.ReplyPrefixes); e != nil {
			return req, e
		}
		req.ReplyTo = *w.ReplyTo
	}
	if req.ID == "" {
		req.ID, req.Generated = NewID(), true
	}
	switch {
	case w.Text != nil && w.Messages != nil:
		return req, errorf(CodeBadRequest, "give either text or messages, not both")
	case w.Text != nil:
		if strings.TrimSpace(*w.Text) == "" {
			return req, errorf(CodeBadRequest, "empty text")
		}
		req.Text = *w.Text
	case w.Messages != nil:
		if len(w.Messages) == 0 {
			return req, errorf(CodeBadRequest, "empty messages")
		}
		if len(w.Messages) > maxMessages {
			return req, errorf(CodeBadRequest, "%d messages exceed the limit of %d", len(w.Messages), maxMessages)
		}
		if e := checkMessages(w.Messages); e != nil {
			return req, e
		}
		req.Messages = w.Messages
	default:
		return req, errorf(CodeBadRequest, "empty text: give text or messages")
	}
	if w.Session != nil {
		if e := checkID("session", *w.Session); e != nil {
			return req, e
		}
		req.Session = *w.Session
	}
	if w.System != nil {
		req.System = *w.System
	}
	req.Think = w.Think
	if w.Model != nil {
		if err := appliance.CheckModelName("model", *w.Model); err != nil {
			return req, contractError(err)
		}
		req.Model = *w.Model
	}
	if w.Stream != nil {
		req.Stream = *w.Stream
	}
	if e := w.settings(&req, lim); e != nil {
		return req, e
	}
	if e := checkTools(w.Tools); e != nil {
		return req, e
	}
	req.Tools = w.Tools
	if len(w.Format) > 0 {
		// The compile is bounded (grammar's budgets) and ends with the
		// ask's ttl_s; the contract refuses a format that cannot be
		// enforced, and the core finds it compiled.
		ctx := context.Background()
		if req.TTL > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, req.TTL)
			defer cancel()
		}
		c := &constraint.Constraint{Format: w.Format}
		if _, err := c.Compile(ctx, nil); err != nil {
			return req, errorf(CodeBadRequest, "%v", err)
		}
		if !c.Empty() {
			req.Constraint = c
		}
	}
	return req, nil
}

// settings checks the ask's max_tokens, temperature and ttl_s into req
// (the limits' defaults and caps where absent).
func (w *wireRequest) settings(req *Request, lim Limits) *Error {
	req.MaxTokens = lim.MaxTokens
	if w.MaxTokens != nil {
		if *w.MaxTokens < 1 {
			return errorf(CodeBadRequest, "max_tokens %d must be at least 1", *w.MaxTokens)
		}
		if lim.MaxTokens <= 0 || *w.MaxTokens < lim.MaxTokens {
			req.MaxTokens = *w.MaxTokens
		}
	}
	if w.Temperature != nil {
		t := *w.Temperature
		if math.IsNaN(t) || t < 0 || t > 2 {
			return errorf(CodeBadRequest, "temperature %g must be in [0, 2]", t)
		}
		req.Temperature = &t
	}
	req.TTL = lim.DefaultTTL
	if w.TTL != nil {
		maxTTL := lim.MaxTTL
		if maxTTL <= 0 {
			maxTTL = maxTTLDefault
		}
		s := *w.TTL
		if !(s > 0) || s > maxTTL.Seconds() {
			return errorf(CodeBadRequest, "ttl_s %g must be in (0, %g]", s, maxTTL.Seconds())
		}
		req.TTL = time.Duration(s * float64(time.Second))
	}
	return nil
}

// checkMessages validates a request's messages: known roles, content
// (or, from the assistant, tool calls), a user or tool message last.
func checkMessages(msgs []Message) *Error {
	for i, m := range msgs {
		switch m.Role {
		case "system", "user", "assistant", "tool":
		default:
			return errorf(CodeBadRequest, "messages[%d].role %q is not system, user, assistant or tool", i, m.Role)
		}
		if strings.TrimSpace(m.Content) == "" && (m.Role != "assistant" || len(m.ToolCalls) == 0) {
			return errorf(CodeBadRequest, "messages[%d].content is empty", i)
		}
		if len(m.ToolCalls) > 0 && m.Role != "assistant" {
			return errorf(CodeBadRequest, "messages[%d] has tool_calls but role %q (only assistant messages make calls)", i, m.Role)
		}
		for j, c := range m.ToolCalls {
			if c.Name == "" {
				return errorf(CodeBadRequest, "messages[%d].tool_calls[%d] has no name", i, j)
			}
			if len(c.Arguments) > 0 && !json.Valid(c.Arguments) {
				return errorf(CodeBadRequest, "messages[%d].tool_calls[%d].arguments is not valid JSON", i, j)
			}
		}
	}
	if r := msgs[len(msgs)-1].Role; r != "user" && r != "tool" {
		return errorf(CodeBadRequest, "the last message must have role user or tool")
	}
	return nil
}

// checkTools validates a request's tools: at most maxTools JSON objects.
func checkTools(tools []json.RawMessage) *Error {
	if len(tools) > maxTools {
		return errorf(CodeBadRequest, "%d tools exceed the limit of %d", len(tools), maxTools)
	}
	for i, t := range tools {
		if b := bytes.TrimSpace(t); len(b) == 0 || b[0] != '{' {
			return errorf(CodeBadRequest, "tools[%d] is not a JSON object", i)
		}
	}
	return nil
}

// ParseCancel reads a cancel payload: {"id": "..."} or the bare id.
func ParseCancel(payload []byte) (string, *Error) {
	id := string(bytes.TrimSpace(payload))
	if strings.HasPrefix(id, "{") {
		var c struct {
			ID string `json:"id"`
		}
		dec := json.NewDecoder(bytes.NewReader(payload))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&c); err != nil {
			return "", errorf(CodeBadRequest, "cancel: %s", describeJSONError(err))
		}
		id = c.ID
	}
	if e := checkID("id", id); e != nil {
		return "", errorf(CodeBadRequest, "cancel: %s", e.Message)
	}
	return id, nil
}

// TooLong is the refusal of a payload of size bytes over lim.MaxPayload
// of which head is the beginning (all of it, or what mqtt/guard kept):
// the id and reply_to are looked for in head alone.
func TooLong(head []byte, size int64, lim Limits) (Request, *Error) {
	var req Request
	if t := bytes.TrimSpace(head); len(t) > 0 && t[0] == '{' {
		probeAddress(head, lim, &req)
	}
	return req, errorf(CodeTooLong, "payload of %d bytes exceeds the limit of %d bytes", size, lim.MaxPayload)
}

// probeBytes bounds the part of a refused payload searched for its id.
const probeBytes = 4 << 10

// probeAddress fills req.ID and req.ReplyTo from a payload that failed
// validation, when they are usable, so the error reaches the client. It
// reads the top-level members of the first probeBytes bytes only, one at
// a time, and stops at the first that does not parse: an id after a
// megabyte of text is not found, and the error goes to the error topic.
func probeAddress(payload []byte, lim Limits, req *Request) {
	if len(payload) > probeBytes {
		payload = payload[:probeBytes]
	}
	dec := json.NewDecoder(bytes.NewReader(payload))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return
	}
	var id, replyTo string
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			break
		}
		key, _ := t.(string)
		var v json.RawMessage
		if dec.Decode(&v) != nil {
			break
		}
		// encoding/json matches member names without regard to case.
		switch {
		case strings.EqualFold(key, "id"):
			id = ""
			json.Unmarshal(v, &id)
		case strings.EqualFold(key, "reply_to"):
			replyTo = ""
			json.Unmarshal(v, &replyTo)
		}
	}
	if checkID("id", id) != nil || strings.ContainsRune(id, utf8.RuneError) {
		return
	}
	req.ID = id
	if replyTo != "" && checkTopic(replyTo, lim.ReplyPrefixes) == nil && !strings.ContainsRune(replyTo, utf8.RuneError) {
		req.ReplyTo = replyTo
	}
}

// checkID accepts ids and session names that are safe as a topic level
// (the core's rule).
func checkID(field, s string) *Error {
	if err := appliance.CheckID(field, s); err != nil {
		return contractError(err)
	}
	return nil
}

// checkTopic accepts reply_to topics geist may publish to: under one of
// prefixes (when there are any), no wildcards, not a $SYS-like topic.
func checkTopic(s string, prefixes []string) *Error {
	switch {
	case s == "":
		return errorf(CodeBadRequest, "reply_to is empty")
	case len(s) > maxTopicLen:
		return errorf(CodeBadRequest, "reply_to is longer than %d bytes", maxTopicLen)
	case strings.ContainsAny(s, "+#\x00"):
		return errorf(CodeBadRequest, "reply_to %.64q contains a wildcard or NUL", s)
	case strings.HasPrefix(s, "$"):
		return errorf(CodeBadRequest, "reply_to %.64q starts with $", s)
	case len(prefixes) > 0 && !slices.ContainsFunc(prefixes, func(p string) bool { return len(s) > len(p) && strings.HasPrefix(s, p) }):
		return errorf(CodeBadRequest, "reply_to %.64q is not under %s (the reply topics this device publishes to)", s, strings.Join(prefixes, " or "))
	}
	return nil
}

func firstInvalid(b []byte) int {
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && n <= 1 {
			return i
		}
		i += n
	}
	return -1
}

// describeJSONError names the problem: the field of a wrong type, the
// unknown field, or where the syntax broke.
func describeJSONError(err error) string {
	var te *json.UnmarshalTypeError
	var se *json.SyntaxError
	switch {
	case errors.As(err, &te):
		field := te.Field
		if field == "" {
			return fmt.Sprintf("wrong type: want a JSON object, got %s", te.Value)
		}
		return fmt.Sprintf("wrong type for %s: got %s, want %s", field, te.Value, jsonKind(te.Type.Kind().String()))
	case errors.As(err, &se):
		return fmt.Sprintf("invalid JSON at byte %d: %v", se.Offset, se)
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		// The name is the sender's: echo only a short one.
		name := strings.TrimPrefix(err.Error(), "json: unknown field ")
		if len(name) > 34 {
			return fmt.Sprintf("unknown field (a name of %d bytes)", len(name)-2)
		}
		return "unknown field " + name
	case errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF):
		return "invalid JSON: unexpected end of input"
	}
	return "invalid JSON: " + strings.TrimPrefix(err.Error(), "json: ")
}

func jsonKind(k string) string {
	switch k {
	case "string":
		return "a string"
	case "int", "int64":
		return "an integer"
	case "float64":
		return "a number"
	case "bool":
		return "true or false"
	case "slice":
		return "an array"
	case "struct", "map":
		return "an object"
	}
	return k
}

// NewID returns a random request id (the core's form).
func NewID() string { return appliance.NewID() }
