package dialect

import (
	"bytes"
	"encoding/json"
	"strings"
	"unicode"
)

// ToolParser separates tool calls from a model's streamed answer. Feed it
// the text as it is generated (Add) and once more at the end (Flush); it
// returns the text that is plain content, holding back what may still
// turn out to be a tool call, and the calls as soon as they are complete.
//
// It reads the calls of the Dialect given: calls between its tags
// anywhere in the answer (ParseCalls reads what stands between them),
// and, for a dialect that has them (BareJSON: Llama's, Any), an answer
// that is JSON call objects. Whatever does not parse as a call comes
// back as content, unchanged: a malformed call is never lost and never
// an error. White space around calls is dropped.
type ToolParser struct {
	d       Dialect
	closer  closer // finds the end of a call (nil: its closing tag)
	tags    Tags
	tools   map[string]bool
	types   map[string]map[string]kinds // parameters' types (Schemas); nil: none
	pending string                      // text not yet returned
	inCall  bool                        // inside <tool_call>, pending holds its body
	mode    int                         // answer start: undecided, json, text
	space   string                      // white space cut before the open call
	after   bool                        // a call just ended: white space after it is dropped
	calls   int                         // calls returned so far
	first   bool                        // only the first call (FirstOnly)
	cut     bool                        // the answer was cut off (Cut): an unfinished call is dropped
	// How far the open call's body has been searched for its end, and
	// whether that point is inside a quoted string (a closer's state).
	scan   int
	quoted bool
}

// closer is a dialect whose calls end at the first closing tag outside a
// quoted string (Gemma 4's): closeIndex finds it in s, reading on from
// *scan with the quoting state *quoted, or returns -1.
type closer interface {
	closeIndex(s string, scan *int, quoted *bool) int
}

const (
	startUndecided = iota
	startJSON
	startText
)

// NewToolParser returns a parser for a model writing calls in dialect d
// (nil: Any), offered the tools named.
func NewToolParser(d Dialect, tools []string) *ToolParser {
	d = Or(d)
	p := &ToolParser{d: d, tags: d.Tags(), tools: map[string]bool{}}
	p.closer, _ = d.(closer)
	for _, t := range tools {
		p.tools[t] = true
	}
	if !d.BareJSON() {
		p.mode = startText
	}
	return p
}

// Schemas gives p the tools' definitions ({"type": "function",
// "function": {"name", "parameters"}}): a call in the XML-like form
// (qwen35.go), whose values are text, has each value read as the type its
// parameter's schema allows (a string parameter's "50" stays a string,
// a boolean's True is true), not guessed from the text.
func (p *ToolParser) Schemas(tools []json.RawMessage) { p.types = xmlTypes(tools) }

// FirstOnly limits p to the answer's first call (OpenAI's
// parallel_tool_calls false). The content before that call is returned
// as usual; everything the model writes after it, further calls and text
// alike, is dropped, neither content nor calls, and of a list of calls
// (Phi-4-mini's, Granite's, Llama's several objects) only the first
// element is kept. Done tells when the call is complete, so that
// generation may end there.
func (p *ToolParser) FirstOnly() { p.first = true }

// Done reports whether p (FirstOnly) has returned its one call: nothing
// more it is given will be returned.
func (p *ToolParser) Done() bool { return p.first && p.calls > 0 }

// Add takes the next piece of the answer.
func (p *ToolParser) Add(text string) (content string, calls []ToolCall) {
	if p.Done() {
		return "", nil
	}
	p.pending += text
	return p.step(false)
}

// Flush ends the answer: what is held back is returned, as calls if it
// parses as complete calls, else as content.
func (p *ToolParser) Flush() (content string, calls []ToolCall) {
	if p.Done() {
		return "", nil
	}
	return p.step(true)
}

// Cut ends an answer that was cut off (by its token limit or the
// context), like Flush, except for a call it ends inside: that call's
// markup is never returned as content; of a list of calls (Granite's,
// Phi-4-mini's) the elements complete before the cut are returned as
// calls, and the unfinished rest, like an unfinished single call, is
// dropped. So is a trailing piece of an opening tag.
func (p *ToolParser) Cut() (content string, calls []ToolCall) {
	p.cut = true
	return p.Flush()
}

// completeItems returns the calls of a JSON list of calls cut off: the
// elements that are whole calls, up to the first that is not.
func (p *ToolParser) completeItems(body string) []ToolCall {
	dec := json.NewDecoder(strings.NewReader(strings.TrimSpace(body)))
	if t, err := dec.Token(); err != nil || t != json.Delim('[') {
		return nil
	}
	var calls []ToolCall
	for dec.More() {
		var raw json.RawMessage
		if dec.Decode(&raw) != nil {
			break
		}
		c, ok := parseCall(string(raw), nil)
		if !ok {
			break
		}
		calls = append(calls, c)
	}
	return calls
}

// took counts the calls cs parsed and returns those to return: with
// FirstOnly, the first, and what follows it is dropped.
func (p *ToolParser) took(cs []ToolCall) []ToolCall {
	if p.first {
		cs = cs[:1]
		p.pending, p.inCall = "", false
	}
	p.calls += len(cs)
	return cs
}

func (p *ToolParser) step(final bool) (string, []ToolCall) {
	var out strings.Builder
	var calls []ToolCall
	emit := out.WriteString
	for {
		if p.mode == startUndecided {
			trimmed := strings.TrimLeftFunc(p.pending, unicode.IsSpace)
			switch {
			case trimmed == "" && !final:
				return out.String(), calls
			case strings.HasPrefix(trimmed, "{") || strings.HasPrefix(trimmed, pythonTag):
				p.mode = startJSON
			case !final && strings.HasPrefix(pythonTag, trimmed):
				return out.String(), calls // maybe the tag
			default:
				p.mode = startText
			}
		}
		if p.mode == startJSON {
			if !final {
				return out.String(), calls // decided at the end
			}
			if cs, ok := p.parseJSONAnswer(p.pending); ok {
				p.pending = ""
				return out.String(), append(calls, p.took(cs)...)
			}
			p.mode = startText
			if p.tags.Open == "" {
				emit(p.pending)
				p.pending = ""
				return out.String(), calls
			}
		}
		if p.inCall {
			end := -1
			switch {
			case p.closer != nil:
				end = p.closer.closeIndex(p.pending, &p.scan, &p.quoted)
			case p.tags.Close != "":
				end = strings.Index(p.pending, p.tags.Close)
			}
			if end < 0 && !final {
				return out.String(), calls
			}
			body, rest := p.pending, ""
			if end >= 0 {
				body, rest = p.pending[:end], p.pending[end+len(p.tags.Close):]
			}
			cs, ok := p.d.ParseCalls(body)
			if ok && p.types != nil && isXMLCall(body) {
				if c, typed := parseXMLCall(body, p.types); typed {
					cs = []ToolCall{c}
				}
			}
			if !ok && p.cut && end < 0 {
				// Cut off inside the call: keep what was complete of
				// a list, drop the unfinished rest (never raw markup).
				cs = p.completeItems(body)
				ok = len(cs) > 0
			} else if !ok {
				closing := ""
				if end >= 0 {
					closing = p.tags.Close
				}
				emit(p.space + p.tags.Open + body + closing)
			}
			p.pending, p.inCall, p.space = rest, false, ""
			if ok {
				calls = append(calls, p.took(cs)...)
				if p.Done() {
					return out.String(), calls
				}
				p.after = true
			}
			continue
		}
		if p.after {
			p.pending = strings.TrimLeftFunc(p.pending, unicode.IsSpace)
			if p.pending == "" && !final {
				return out.String(), calls
			}
			p.after = p.pending == ""
		}
		// Plain text, watching for the call opening.
		if p.tags.Open != "" {
			if i := strings.Index(p.pending, p.tags.Open); i >= 0 {
				text := strings.TrimRightFunc(p.pending[:i], unicode.IsSpace)
				emit(text)
				p.space = p.pending[len(text):i]
				p.pending, p.inCall = p.pending[i+len(p.tags.Open):], true
				p.scan, p.quoted = 0, false
				continue
			}
		}
		if final {
			if p.cut && p.tags.Open != "" {
				p.pending = p.pending[:len(p.pending)-partialSuffix(p.pending, p.tags.Open)]
			}
			if p.calls > 0 {
				emit(strings.TrimRightFunc(p.pending, unicode.IsSpace))
			} else {
				emit(p.pending)
			}
			p.pending = ""
			return out.String(), calls
		}
		// Hold back trailing white space (it may precede a call) and a
		// tail that may be the start of <tool_call>.
		cut := len(p.pending)
		if p.tags.Open != "" {
			cut -= partialSuffix(p.pending, p.tags.Open)
		}
		cut = len(strings.TrimRightFunc(p.pending[:cut], unicode.IsSpace))
		emit(p.pending[:cut])
		p.pending = p.pending[cut:]
		return out.String(), calls
	}
}

// partialSuffix is the length of the longest suffix of s that is a proper
// prefix of tag.
func partialSuffix(s, tag string) int {
	for n := min(len(tag)-1, len(s)); n > 0; n-- {
		if strings.HasSuffix(s, tag[:n]) {
			return n
		}
	}
	return 0
}

// parseJSONAnswer reads a whole answer as JSON tool calls: after an
// optional <|python_tag|>, one or more objects separated by white space or
// ';', each naming an offered tool.
func (p *ToolParser) parseJSONAnswer(s string) ([]ToolCall, bool) {
	s = strings.TrimSpace(s)
	s = strings.TrimSpace(strings.TrimPrefix(s, pythonTag))
	dec := json.NewDecoder(strings.NewReader(s))
	var calls []ToolCall
	for {
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, false
		}
		c, ok := parseCall(string(raw), p.tools)
		if !ok {
			return nil, false
		}
		calls = append(calls, c)
		rest := strings.TrimLeftFunc(s[dec.InputOffset():], func(r rune) bool { return unicode.IsSpace(r) || r == ';' })
		if rest == "" {
			return calls, true
		}
		s = rest
		dec = json.NewDecoder(strings.NewReader(s))
	}
}

// parseCall reads one call object: {"name": NAME, "arguments" or
// "parameters": OBJECT (or a JSON string holding one)}. With offered
// (not nil), the name must be one of the tools offered.
func parseCall(body string, offered map[string]bool) (ToolCall, bool) {
	var c struct {
		Name       string          `json:"name"`
		Arguments  json.RawMessage `json:"arguments"`
		Parameters json.RawMessage `json:"parameters"`
	}
	dec := json.NewDecoder(strings.NewReader(strings.TrimSpace(body)))
	if err := dec.Decode(&c); err != nil || dec.More() || c.Name == "" {
		return ToolCall{}, false
	}
	if _, err := dec.Token(); err == nil {
		return ToolCall{}, false // trailing data
	}
	if offered != nil && !offered[c.Name] {
		return ToolCall{}, false
	}
	args := c.Arguments
	if args == nil {
		args = c.Parameters
	}
	args = bytes.TrimSpace(args)
	if len(args) > 0 && args[0] == '"' {
		var s string
		if json.Unmarshal(args, &s) == nil {
			args = json.RawMessage(s)
		}
	}
	switch {
	case len(args) == 0 || string(args) == "null":
		args = json.RawMessage("{}")
	case args[0] != '{' || !json.Valid(args):
		return ToolCall{}, false
	}
	return ToolCall{Name: c.Name, Arguments: args}, true
}
