package dialect

import (
	"bytes"
	"encoding/json"
	"strings"
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
// as its text otherwise; a value that reads as JSON (a number, true,
// false, null, an object, a list) is taken as that, any other text as a
// string.

const (
	xmlFuncOpen  = "<function="
	xmlFuncClose = "</function>"
	xmlParOpen   = "<parameter="
	xmlParClose  = "</parameter>"
)

// isXMLCall reports whether a call body is in the XML-like form.
func isXMLCall(body string) bool { return strings.HasPrefix(strings.TrimSpace(body), xmlFuncOpen) }

// parseXMLCall reads one <function=NAME>...</function> block (white space
// around it allowed, nothing else).
func parseXMLCall(body string) (ToolCall, bool) {
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
		b.Write(xmlValue(val))
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
