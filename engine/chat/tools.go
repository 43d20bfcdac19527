package chat

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/ardanlabs/jinja"
)

// ToolCall is one call of a tool: by an assistant message of the
// conversation (rendered through the template) or parsed from the
// model's output (ToolParser).
type ToolCall struct {
	ID   string // the client's id of the call (OpenAI's tool_call id); "" when none
	Name string
	// Arguments are the call's arguments, a JSON object. A JSON string
	// holding an object (OpenAI's form) is read as that object.
	Arguments json.RawMessage
}

// toolFields adds m's tool fields to the message dict d, in the shape
// Hugging Face transformers documents for chat templates:
//
//	{"role": "assistant", "content": "...", "tool_calls": [
//	    {"id": ID, "type": "function", "function": {"name": NAME, "arguments": {...}}}]}
//	{"role": "tool", "content": "...", "name": NAME, "tool_call_id": ID}
//
// with "id", "name" and "tool_call_id" present only when known and
// "tool_calls" only when there are calls (templates test 'tool_calls' in
// message).
func toolFields(d *jinja.Dict, m Message) error {
	if len(m.ToolCalls) > 0 {
		calls := make([]jinja.Value, len(m.ToolCalls))
		for i, c := range m.ToolCalls {
			args, err := argumentsValue(c.Arguments)
			if err != nil {
				return fmt.Errorf("tool call %d (%s): %w", i, c.Name, err)
			}
			fn := jinja.NewDict()
			fn.AsDict().Set("name", jinja.NewString(c.Name))
			fn.AsDict().Set("arguments", args)
			call := jinja.NewDict()
			if c.ID != "" {
				call.AsDict().Set("id", jinja.NewString(c.ID))
			}
			call.AsDict().Set("type", jinja.NewString("function"))
			call.AsDict().Set("function", fn)
			calls[i] = call
		}
		d.Set("tool_calls", jinja.NewList(calls))
	}
	if m.ToolName != "" {
		d.Set("name", jinja.NewString(m.ToolName))
	}
	if m.ToolCallID != "" {
		d.Set("tool_call_id", jinja.NewString(m.ToolCallID))
	}
	return nil
}

// argumentsValue reads a call's arguments: a JSON object as a dict, a JSON
// string holding an object as that object (OpenAI sends arguments as a
// string), any other string as that string; nothing is {}.
func argumentsValue(raw json.RawMessage) (jinja.Value, error) {
	if len(strings.TrimSpace(string(raw))) == 0 {
		return jinja.NewDict(), nil
	}
	v, err := ValueFromJSON(raw)
	if err != nil {
		return jinja.Undefined(), fmt.Errorf("arguments: %w", err)
	}
	if v.IsString() {
		if obj, err := ValueFromJSON([]byte(v.AsString())); err == nil && obj.IsDict() {
			return obj, nil
		}
	}
	return v, nil
}

// toolValues decodes tool definitions into the template's tools list.
// ErrBadTool is wrapped by Render's error for a tool definition it cannot
// take (nested deeper than the JSON bound, not JSON): the client's fault,
// not the model's.
var ErrBadTool = errors.New("chat: bad tool definition")

func toolValues(tools []json.RawMessage) (jinja.Value, error) {
	items := make([]jinja.Value, len(tools))
	for i, t := range tools {
		v, err := ValueFromJSON(t)
		if err != nil {
			return jinja.Undefined(), fmt.Errorf("%w: tool %d: %w", ErrBadTool, i, err)
		}
		if !v.IsDict() {
			return jinja.Undefined(), fmt.Errorf("chat: tool %d is not a JSON object", i)
		}
		items[i] = v
	}
	return jinja.NewList(items), nil
}

// probeTools finds whether the template prints the tools it is given (as
// llama.cpp's caps detection does): a trial render with one tool whose
// name must reach the output.
func (t *Template) probeTools(now time.Time) error {
	const name = "geist_probe_tool_5e1d"
	tool := json.RawMessage(`{"type": "function", "function": {"name": "` + name + `", "description": "probe", "parameters": {"type": "object", "properties": {"x": {"type": "string"}}, "required": ["x"]}}}`)
	tools, err := toolValues([]json.RawMessage{tool})
	if err != nil {
		return err
	}
	msgs := []jinja.Value{t.mustMessage(Message{Role: "user", Content: "User message"})}
	out, err := t.exec(t.probing, msgs, "", "", true, now, map[string]any{"tools": tools})
	if errors.Is(err, ErrLimit) {
		return err
	}
	t.tools = err == nil && strings.Contains(out, name)
	return nil
}

// SupportsTools reports whether the template renders tool definitions
// (Ollama's "tools" capability).
func (t *Template) SupportsTools() bool { return t != nil && t.tools }

// SupportsThinking reports whether the template has a thinking switch
// (enable_thinking) or thinking blocks (Ollama's "thinking" capability).
func (t *Template) SupportsThinking() bool {
	return t != nil && (strings.Contains(t.src, "enable_thinking") || strings.Contains(t.src, "<think>"))
}

// Source returns the template's source (ChatML's for a file without one).
func (t *Template) Source() string { return t.src }

// ToolFormat is how a model writes tool calls.
type ToolFormat int

// Tool call formats.
const (
	// ToolsAny: both forms below are recognized.
	ToolsAny ToolFormat = iota
	// ToolsTagged: <tool_call>{"name": ..., "arguments": {...}}</tool_call>
	// (Hermes, Qwen 2.5 and 3, SmolLM3 and others).
	ToolsTagged
	// ToolsJSON: the answer is a JSON object {"name": ..., "parameters":
	// {...}} (or "arguments"), optionally after <|python_tag|>, several
	// separated by ';' or newlines (Llama 3.1, 3.2).
	ToolsJSON
)

func (f ToolFormat) String() string {
	switch f {
	case ToolsTagged:
		return "tagged"
	case ToolsJSON:
		return "json"
	}
	return "any"
}

// ToolFormat returns the form of tool calls the template teaches its
// model, from the template's own text: <tool_call> tags, or Llama 3's
// JSON (its ipython role); ToolsAny when neither shows.
func (t *Template) ToolFormat() ToolFormat {
	switch {
	case t == nil:
		return ToolsAny
	case strings.Contains(t.src, "<tool_call>"):
		return ToolsTagged
	case strings.Contains(t.src, "<|python_tag|>") || strings.Contains(t.src, "ipython"):
		return ToolsJSON
	}
	return ToolsAny
}
