package chat

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/ardanlabs/jinja"
	"github.com/geisten/geist/engine/dialect"
)

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

// How a template takes the request's tools. transformers' convention is
// the tools variable; two families of small tool-calling models read them
// elsewhere, and geist puts them where each family's own template (or,
// for a template without tools, its model's training) expects them.
const (
	placeNone = iota
	// placeVar: the tools variable.
	placeVar
	// placeSystemField: Phi-4-mini's template prints message['tools'] of
	// the system message, a string: the JSON list of the functions (the
	// "function" objects of the definitions), as its model card writes
	// it. Without a system message one is added saying what the model
	// card and Ollama's template say (dialect.Phi4System).
	placeSystemField
	// placeXMLTools: SmolLM3's template prints xml_tools, each tool with
	// jinja's string filter (Python's str of the definition's dict).
	placeXMLTools
	// placeSystemText: a SmolLM3 template that takes no tools at all
	// (Unsloth's, llama.cpp's copy): the block SmolLM3's own template
	// writes for xml_tools is appended to the system message (its custom
	// instructions), where that template writes it.
	placeSystemText
)

// mayPlace reports whether the template's text shows it may take tools
// the way place puts them.
func (t *Template) mayPlace(place int) bool {
	switch place {
	case placeVar:
		return true
	case placeSystemField:
		return strings.Contains(t.src, "message['tools']") || strings.Contains(t.src, "message.tools")
	case placeXMLTools:
		return strings.Contains(t.src, "xml_tools")
	case placeSystemText:
		return t.systemRole && strings.Contains(t.src, "SmolLM")
	}
	return false
}

// withTools puts tools where the template takes them (t.place): it returns
// the messages to render (a copy when changed) and the extra variables.
// Assistant messages' calls are written into their content in the
// model's own syntax where the template would drop them (the places
// other than the tools variable: those templates read no tool_calls; and
// LFM2's templates, pyCallsInContent below).
func (t *Template) withTools(msgs []Message, tools []json.RawMessage, extra map[string]any) ([]Message, map[string]any, error) {
	if t.callsInContent() {
		var err error
		if msgs, err = pyCallsInContent(msgs); err != nil {
			return nil, nil, err
		}
	}
	if len(tools) == 0 {
		return msgs, extra, nil
	}
	list, err := toolValues(tools)
	if err != nil {
		return nil, nil, err
	}
	extra = maps.Clone(extra)
	if extra == nil {
		extra = map[string]any{}
	}
	if t.place == placeVar || t.place == placeNone {
		extra["tools"] = list
		return msgs, extra, nil
	}
	msgs = slices.Clone(msgs)
	if err := t.callsAsText(msgs); err != nil {
		return nil, nil, err
	}
	switch t.place {
	case placeSystemField:
		fns := make([]jinja.Value, len(list.AsList().Items))
		for i, tool := range list.AsList().Items {
			fns[i] = tool
			if f, ok := tool.AsDict().Get("function"); ok && f.IsDict() {
				fns[i] = f
			}
		}
		fl, err := pyDumps(jinja.NewList(fns))
		if err != nil {
			return nil, nil, fmt.Errorf("%w: %w", ErrBadTool, err)
		}
		msgs = systemFirst(msgs, dialect.Phi4System)
		msgs[0].systemTools = fl
	case placeXMLTools, placeSystemText:
		reprs := make([]jinja.Value, len(list.AsList().Items))
		texts := make([]string, len(reprs))
		for i, tool := range list.AsList().Items {
			r, err := pyRepr(tool)
			if err != nil {
				return nil, nil, fmt.Errorf("%w: %w", ErrBadTool, err)
			}
			reprs[i], texts[i] = jinja.NewString(r), r
		}
		if t.place == placeXMLTools {
			extra["xml_tools"] = jinja.NewList(reprs)
			break
		}
		msgs = systemFirst(msgs, "")
		sys := strings.TrimRightFunc(msgs[0].Content, unicode.IsSpace)
		if sys != "" {
			sys += "\n\n"
		}
		msgs[0].Content = sys + "### Tools\n\n" + dialect.SmolLM3ToolBlock(texts)
	}
	return msgs, extra, nil
}

// systemFirst returns msgs with a system message first: the given one, or
// a new one with content.
func systemFirst(msgs []Message, content string) []Message {
	if len(msgs) > 0 && msgs[0].Role == "system" {
		return msgs
	}
	return append([]Message{{Role: "system", Content: content}}, msgs...)
}

// callsAsText writes each assistant message's calls after its content in
// the model's syntax (ToolFormat): <tool_call>\n{"name": ..., "arguments":
// ...}\n</tool_call> per call, or Phi-4-mini's one list between its tags,
// the objects as Python's json.dumps writes them.
func (t *Template) callsAsText(msgs []Message) error {
	tags := t.ToolFormat().Tags()
	for i, m := range msgs {
		if len(m.ToolCalls) == 0 {
			continue
		}
		objs := make([]string, len(m.ToolCalls))
		for j, c := range m.ToolCalls {
			args, err := argumentsValue(c.Arguments)
			if err != nil {
				return fmt.Errorf("chat: message %d: tool call %d (%s): %w", i, j, c.Name, err)
			}
			call := jinja.NewDict()
			call.AsDict().Set("name", jinja.NewString(c.Name))
			call.AsDict().Set("arguments", args)
			if objs[j], err = pyDumps(call); err != nil {
				return fmt.Errorf("chat: message %d: tool call %d (%s): %w", i, j, c.Name, err)
			}
		}
		var text string
		if tags.List {
			text = tags.Open + "[" + strings.Join(objs, ", ") + "]" + tags.Close
		} else {
			for j, o := range objs {
				if j > 0 {
					text += "\n"
				}
				text += tags.Open + "\n" + o + "\n" + tags.Close
			}
		}
		if m.Content != "" && !tags.List {
			text = "\n" + text
		}
		msgs[i].Content = m.Content + text
		msgs[i].ToolCalls = nil
	}
	return nil
}

// probeTools finds whether and how the template prints the tools it is
// given (as llama.cpp's caps detection does): a trial render with one tool
// whose name must reach the output, for each way of placing tools the
// template's text allows, in the order above.
func (t *Template) probeTools(now time.Time) error {
	const name = "geist_probe_tool_5e1d"
	tool := json.RawMessage(`{"type": "function", "function": {"name": "` + name + `", "description": "probe", "parameters": {"type": "object", "properties": {"x": {"type": "string"}}, "required": ["x"]}}}`)
	for _, place := range []int{placeVar, placeSystemField, placeXMLTools, placeSystemText} {
		if !t.mayPlace(place) {
			continue
		}
		t.place = place
		msgs, extra, err := t.withTools([]Message{{Role: "user", Content: "User message"}}, []json.RawMessage{tool}, nil)
		if err != nil {
			return err
		}
		list, err := t.messages(msgs)
		if err != nil {
			continue
		}
		out, err := t.exec(t.probing, list, "", "", true, now, extra)
		if errors.Is(err, ErrLimit) {
			return err
		}
		if err == nil && strings.Contains(out, name) {
			t.tools = true
			return nil
		}
	}
	t.place, t.tools = placeNone, false
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

// LFM2's templates print a message's content and nothing of its
// tool_calls (engine/dialect's lfm2.go): a client sends the calls back as
// tool_calls (OpenAI, Ollama, Home Assistant); geist writes them into the
// content in the model's syntax, so that the model sees the calls its
// tool results answer.

// callsInContent reports whether the template's model writes Python call
// lists (ToolsLFM2) and the template prints no tool_calls of its own.
func (t *Template) callsInContent() bool {
	return t.ToolFormat() == ToolsLFM2 && !strings.Contains(t.src, "tool_calls")
}

// pyCallsInContent returns msgs (a copy when changed) with each assistant
// message's calls written before its content as LFM2 writes them.
func pyCallsInContent(msgs []Message) ([]Message, error) {
	copied := false
	for i, m := range msgs {
		if len(m.ToolCalls) == 0 {
			continue
		}
		text, err := dialect.CallList(m.ToolCalls, dumpArguments)
		if err != nil {
			return nil, fmt.Errorf("chat: message %d: %w", i, err)
		}
		if !copied {
			msgs, copied = slices.Clone(msgs), true
		}
		msgs[i].Content = text + m.Content
		msgs[i].ToolCalls = nil
	}
	return msgs, nil
}

// dumpArguments writes a call's arguments as Python's json.dumps does.
func dumpArguments(raw json.RawMessage) (string, error) {
	args, err := argumentsValue(raw)
	if err != nil {
		return "", err
	}
	return pyDumps(args)
}
