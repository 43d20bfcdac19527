package chat

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"unicode"
)

// LFM2's templates print a message's content and nothing of its
// tool_calls: the model writes its calls into its answer, and its model
// card shows the conversation with them there,
// <|tool_call_start|>[name(key="value")]<|tool_call_end|> before the
// answer's text. A client sends the calls back as tool_calls (OpenAI,
// Ollama, Home Assistant); geist writes them into the content in the
// model's syntax, so that the model sees the calls its tool results
// answer.

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
		text, err := pyCallList(m.ToolCalls)
		if err != nil {
			return nil, fmt.Errorf("chat: message %d: %w", i, err)
		}
		if !copied {
			msgs, copied = slices.Clone(msgs), true
		}
		msgs[i].Content = formatTags[ToolsLFM2].open + text + formatTags[ToolsLFM2].close + m.Content
		msgs[i].ToolCalls = nil
	}
	return msgs, nil
}

// pyCallList writes calls as a Python list of calls with keyword
// arguments, the values as Python literals: [name(key="value", n=3), ...].
// Calls whose name or argument names cannot be written so (or whose
// arguments are not an object) make the list a JSON list of
// {"name": ..., "arguments": ...} objects, which LFM2's parser reads too.
func pyCallList(calls []ToolCall) (string, error) {
	parts := make([]string, len(calls))
	for i, c := range calls {
		s, ok, err := pyCall(c)
		if err != nil {
			return "", fmt.Errorf("tool call %d (%s): %w", i, c.Name, err)
		}
		if !ok {
			return jsonCallList(calls)
		}
		parts[i] = s
	}
	return "[" + strings.Join(parts, ", ") + "]", nil
}

func jsonCallList(calls []ToolCall) (string, error) {
	parts := make([]string, len(calls))
	for i, c := range calls {
		args, err := argumentsValue(c.Arguments)
		if err != nil {
			return "", fmt.Errorf("tool call %d (%s): %w", i, c.Name, err)
		}
		var sb strings.Builder
		sb.WriteString(`{"name": `)
		writeJSONString(&sb, c.Name)
		a, err := pyDumps(args)
		if err != nil {
			return "", fmt.Errorf("tool call %d (%s): %w", i, c.Name, err)
		}
		sb.WriteString(`, "arguments": ` + a + "}")
		parts[i] = sb.String()
	}
	return "[" + strings.Join(parts, ", ") + "]", nil
}

// pyCall writes one call, name(key=value, ...); ok is false when it cannot
// be written so.
func pyCall(c ToolCall) (string, bool, error) {
	if !pyIdent(c.Name) {
		return "", false, nil
	}
	raw := strings.TrimSpace(string(c.Arguments))
	if strings.HasPrefix(raw, `"`) {
		// OpenAI's form: the object as a JSON string.
		var s string
		if err := json.Unmarshal([]byte(raw), &s); err != nil {
			return "", false, fmt.Errorf("arguments: %w", err)
		}
		raw = strings.TrimSpace(s)
	}
	var sb strings.Builder
	sb.WriteString(c.Name + "(")
	if raw == "" || raw == "null" {
		return sb.String() + ")", true, nil
	}
	if !strings.HasPrefix(raw, "{") {
		return "", false, nil
	}
	dec := json.NewDecoder(strings.NewReader(raw))
	dec.UseNumber()
	dec.Token() // '{'
	for n := 0; dec.More(); n++ {
		k, err := dec.Token()
		if err != nil {
			return "", false, fmt.Errorf("arguments: %w", err)
		}
		key, _ := k.(string)
		if !pyIdent(key) {
			return "", false, nil
		}
		if n > 0 {
			sb.WriteString(", ")
		}
		sb.WriteString(key + "=")
		if err := pyLiteral(dec, &sb, 1); err != nil {
			return "", false, fmt.Errorf("arguments: %w", err)
		}
	}
	if _, err := dec.Token(); err != nil {
		return "", false, fmt.Errorf("arguments: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return "", false, errors.New("arguments: data after the object")
	}
	return sb.String() + ")", true, nil
}

// pyIdent reports whether s reads back as a name of a call list
// (pyReader.name).
func pyIdent(s string) bool {
	for i, c := range s {
		if !(c == '_' || c == '-' || c == '.' || unicode.IsLetter(c) || unicode.IsDigit(c) && i > 0) {
			return false
		}
	}
	return s != ""
}

// pyLiteral writes the next JSON value of dec as a Python literal:
// True, False, None, strings in double quotes (JSON's escapes are
// Python's), dicts and lists as Python's repr spaces them.
func pyLiteral(dec *json.Decoder, sb *strings.Builder, depth int) error {
	if depth > maxJSONDepth {
		return fmt.Errorf("chat: JSON nested deeper than %d", maxJSONDepth)
	}
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	switch v := tok.(type) {
	case json.Delim:
		end := byte(']')
		if v == '{' {
			end = '}'
		}
		sb.WriteByte(byte(v))
		for n := 0; dec.More(); n++ {
			if n > 0 {
				sb.WriteString(", ")
			}
			if v == '{' {
				k, err := dec.Token()
				if err != nil {
					return err
				}
				key, _ := k.(string)
				writeJSONString(sb, key)
				sb.WriteString(": ")
			}
			if err := pyLiteral(dec, sb, depth+1); err != nil {
				return err
			}
		}
		if _, err := dec.Token(); err != nil {
			return err
		}
		sb.WriteByte(end)
	case string:
		writeJSONString(sb, v)
	case json.Number:
		sb.WriteString(v.String())
	case bool:
		if v {
			sb.WriteString("True")
		} else {
			sb.WriteString("False")
		}
	case nil:
		sb.WriteString("None")
	}
	return nil
}
