package dialect

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/geisten/geist/engine/grammar"
)

// The XML-like tool calls of Qwen3.5 (and Qwen3-Coder): between the
// <tool_call> tags a function block whose parameters are blocks of their
// own, each value on lines of its own:
//
//	<tool_call>
//	<function=HassTurnOn>
//	<parameter=name>
//	kitchen light
//	</parameter>
//	<parameter=brightness>
//	50
//	</parameter>
//	</function>
//	</tool_call>
//
// The template writes a value as JSON when it is a mapping or a list and
// as its text otherwise (a string raw, a number as its digits, a boolean
// as Python's True or False, null as None). Read without the tools'
// schemas, a value that reads as JSON (a number, true, false, null, an
// object, a list) is taken as that, any other text as a string; with
// them (ToolParser.Schemas), by the parameter's type (xmlTyped).
//
// Templates that write calls so (<tool_call> then <function=) have
// this dialect, Qwen35: its grammar forces calls in this form, each
// value valid under its parameter's schema (engine/grammar's XMLCall).
// The tagged dialect (hermes.go) reads such calls too.

// Qwen35 is the dialect of the XML-like calls between <tool_call> tags.
var Qwen35 Dialect = &qwen35{family{"qwen35", Tags{callOpen, callClose, false}}}

type qwen35 struct{ family }

func init() { Register(Qwen35, 15) }

// Detect: the template writes <tool_call> and <function= (and so it
// is tried before the tagged dialect, which Detects the first alone).
func (*qwen35) Detect(src string) bool {
	return strings.Contains(src, callOpen) && strings.Contains(src, xmlFuncOpen)
}

// Grammar: each call "<tool_call>\n" <function=...>...</function> "\n</tool_call>"
// as the template writes it, further calls each on a line of its own
// (a blank line allowed between, no more: the grammar's white space is
// bounded).
func (q *qwen35) Grammar(tools []json.RawMessage, only string, lazy, one bool) (string, string, error) {
	c, err := grammar.CallRules(tools, only, grammar.XMLCall)
	if err != nil {
		return "", "", err
	}
	open, close := grammar.Literal(callOpen), grammar.Literal(callClose)
	again := more(one, `"\n"{1,2} `+open+` "\n" call "\n" `+close)
	if lazy {
		return c.Grammar(`"\n" call "\n" ` + close + again), callOpen, nil
	}
	return c.Grammar(open + ` "\n" call "\n" ` + close + again), "", nil
}

const (
	xmlFuncOpen  = "<function="
	xmlFuncClose = "</function>"
	xmlParOpen   = "<parameter="
	xmlParClose  = "</parameter>"
)

// isXMLCall reports whether a call body is in the XML-like form.
func isXMLCall(body string) bool { return strings.HasPrefix(strings.TrimSpace(body), xmlFuncOpen) }

// parseXMLCall reads one <function=NAME>...</function> block (white space
// around it allowed, nothing else); types, when not nil, are the types of
// the offered tools' parameters (xmlTypes), by which the values are read.
func parseXMLCall(body string, types map[string]map[string]kinds) (ToolCall, bool) {
	s := strings.TrimSpace(body)
	if !strings.HasPrefix(s, xmlFuncOpen) || !strings.HasSuffix(s, xmlFuncClose) {
		return ToolCall{}, false
	}
	s = s[len(xmlFuncOpen) : len(s)-len(xmlFuncClose)]
	gt := strings.IndexByte(s, '>')
	if gt <= 0 {
		return ToolCall{}, false
	}
	name := strings.TrimSpace(s[:gt])
	if name == "" || strings.ContainsAny(name, "<>\n") {
		return ToolCall{}, false
	}
	s = s[gt+1:]
	var b bytes.Buffer
	b.WriteByte('{')
	seen := map[string]bool{}
	for {
		s = strings.TrimLeft(s, " \t\r\n")
		if s == "" {
			break
		}
		if !strings.HasPrefix(s, xmlParOpen) {
			return ToolCall{}, false
		}
		s = s[len(xmlParOpen):]
		gt := strings.IndexByte(s, '>')
		if gt <= 0 {
			return ToolCall{}, false
		}
		key := strings.TrimSpace(s[:gt])
		end := strings.Index(s[gt+1:], xmlParClose)
		if key == "" || strings.ContainsAny(key, "<>\n") || end < 0 || seen[key] {
			return ToolCall{}, false
		}
		seen[key] = true
		val := trimOneNewline(s[gt+1 : gt+1+end])
		s = s[gt+1+end+len(xmlParClose):]
		if b.Len() > 1 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(key)
		b.Write(k)
		b.WriteByte(':')
		if ks := types[name][key]; ks != 0 {
			b.Write(xmlTyped(val, ks))
		} else {
			b.Write(xmlValue(val))
		}
	}
	b.WriteByte('}')
	return ToolCall{Name: name, Arguments: json.RawMessage(b.Bytes())}, true
}

// trimOneNewline drops the line break the template writes after the
// opening tag and before the closing one.
func trimOneNewline(v string) string {
	v = strings.TrimPrefix(v, "\r\n")
	v = strings.TrimPrefix(v, "\n")
	v = strings.TrimSuffix(v, "\n")
	return strings.TrimSuffix(v, "\r")
}

// xmlValue is a parameter's value as JSON: the text itself when it is a
// JSON number, literal, object or list, else the text as a string.
func xmlValue(v string) []byte {
	t := strings.TrimSpace(v)
	if t != "" && t[0] != '"' && json.Valid([]byte(t)) {
		return []byte(t)
	}
	q, _ := json.Marshal(v)
	return q
}

// kinds is a set of JSON types a parameter's schema allows (0: not known).
type kinds uint8

const (
	kString kinds = 1 << iota
	kNumber       // integer too
	kBool
	kNull
	kObject
	kArray
)

var kindNames = map[string]kinds{"string": kString, "number": kNumber, "integer": kNumber, "boolean": kBool, "null": kNull, "object": kObject, "array": kArray}

// xmlTypes reads the types of the parameters of tool definitions
// ({"type": "function", "function": {"name", "parameters"}}): by tool
// name, by parameter name, the types the property's schema allows.
func xmlTypes(tools []json.RawMessage) map[string]map[string]kinds {
	out := map[string]map[string]kinds{}
	for _, t := range tools {
		var d struct {
			Function struct {
				Name       string `json:"name"`
				Parameters struct {
					Properties map[string]any `json:"properties"`
				} `json:"parameters"`
			} `json:"function"`
		}
		if json.Unmarshal(t, &d) != nil || d.Function.Name == "" {
			continue
		}
		m := map[string]kinds{}
		for k, s := range d.Function.Parameters.Properties {
			if ks := schemaKinds(s, 0); ks != 0 {
				m[k] = ks
			}
		}
		out[d.Function.Name] = m
	}
	return out
}

// schemaKinds is the set of types schema s allows; 0 when it cannot say
// (no type, a $ref).
func schemaKinds(s any, depth int) kinds {
	m, ok := s.(map[string]any)
	if !ok || depth > maxJSONDepth {
		return 0
	}
	var ks kinds
	switch t := m["type"].(type) {
	case string:
		ks = kindNames[t]
	case []any:
		for _, e := range t {
			n, _ := e.(string)
			ks |= kindNames[n]
		}
	}
	if ks != 0 {
		return ks
	}
	vals, _ := m["enum"].([]any)
	if c, ok := m["const"]; ok {
		vals = []any{c}
	}
	for _, v := range vals {
		switch v.(type) {
		case string:
			ks |= kString
		case float64:
			ks |= kNumber
		case bool:
			ks |= kBool
		case nil:
			ks |= kNull
		case map[string]any:
			ks |= kObject
		case []any:
			ks |= kArray
		}
	}
	if len(vals) > 0 {
		return ks
	}
	for _, kw := range []string{"anyOf", "oneOf"} {
		subs, _ := m[kw].([]any)
		for _, sub := range subs {
			k := schemaKinds(sub, depth+1)
			if k == 0 {
				return 0 // one alternative of unknown type: any
			}
			ks |= k
		}
	}
	return ks
}

// xmlTyped is a parameter's value as JSON, read by the types its schema
// allows: None or null as null, True or False (either case) as a
// boolean, a JSON number as a number, a JSON object or list as that, else
// the text as a string; a value no type allowed reads as xmlValue reads
// it. (engine/chat's Jinja writes None as "", where Python's writes
// "None": empty text is null too where no string is allowed.)
func xmlTyped(v string, ks kinds) []byte {
	t := strings.TrimSpace(v)
	switch {
	case ks&kNull != 0 && (t == "None" || t == "null" || t == "" && ks&kString == 0):
		return []byte("null")
	case ks&kBool != 0 && (t == "True" || t == "true"):
		return []byte("true")
	case ks&kBool != 0 && (t == "False" || t == "false"):
		return []byte("false")
	case ks&kNumber != 0 && t != "" && (t[0] == '-' || t[0] >= '0' && t[0] <= '9') && json.Valid([]byte(t)):
		return []byte(t)
	case ks&kObject != 0 && strings.HasPrefix(t, "{") && json.Valid([]byte(t)),
		ks&kArray != 0 && strings.HasPrefix(t, "[") && json.Valid([]byte(t)):
		return []byte(t)
	case ks&kString != 0:
		q, _ := json.Marshal(v)
		return q
	}
	return xmlValue(v)
}
