package dialect

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode"

	"github.com/geisten/geist/engine/grammar"
)

// Gemma 4 thinks in its thought channel, <|channel>thought\n...<channel|>
// (llama.cpp's Gemma 4 parser reads the same texts: the channel's name
// and its newline open it), and calls tools in a syntax of its own.
var Gemma4 Dialect = &gemma4{family{"gemma4", Tags{gemmaCallOpen, gemmaCallClose, false}}}

// GemmaThought are Gemma 4's thinking marks.
var GemmaThought = ThinkMarks{gemmaChannelOpen + "thought\n", gemmaChannelClose}

// Gemma 4's channel tokens.
const (
	gemmaChannelOpen  = "<|channel>"
	gemmaChannelClose = "<channel|>"
)

type gemma4 struct{ family }

func init() { Register(Gemma4, 10) }

// Detect: the template writes Gemma 4's calls (llama.cpp tells it by
// <|tool_call>call: too) or names its thought channel.
func (*gemma4) Detect(src string) bool {
	return strings.Contains(src, gemmaCallOpen+gemmaCallPrefix) || strings.Contains(src, gemmaChannelOpen+"thought")
}

func (*gemma4) ThinkMarks() ThinkMarks { return GemmaThought }

// ThinkTokens: <|channel> and <channel|> are control tokens.
func (*gemma4) ThinkTokens() []string { return []string{gemmaChannelOpen, gemmaChannelClose} }

// ToolTokens: the call tags and the quote token <|"|>, which must show
// for strings to be read.
func (g *gemma4) ToolTokens() []string { return append(g.family.ToolTokens(), gemmaQuote) }

// ParseCalls reads one call, call:NAME{...}.
func (*gemma4) ParseCalls(body string) ([]ToolCall, bool) {
	c, err := parseGemma4Call(body)
	return []ToolCall{c}, err == nil
}

// Grammar: each call between the tags, one after the other; the
// arguments in Gemma 4's syntax (engine/grammar's schema_gemma4.go).
func (g *gemma4) Grammar(tools []json.RawMessage, only string, lazy, one bool) (string, string, error) {
	c, err := grammar.CallRules(tools, only, grammar.GemmaCall)
	if err != nil {
		return "", "", err
	}
	open, close := grammar.Literal(gemmaCallOpen), grammar.Literal(gemmaCallClose)
	again := more(one, open+" call "+close)
	if lazy {
		return c.Grammar("call " + close + again), gemmaCallOpen, nil
	}
	return c.Grammar(open + " call " + close + again), "", nil
}

// Gemma 4's tool calls, as its template teaches them (the calls of
// earlier assistant messages, format_argument):
//
//	<|tool_call>call:NAME{key:VALUE,key:VALUE}<tool_call|>
//
// one call per pair of tags, several in a row. A VALUE is a string between
// Gemma's quote tokens, <|"|>text<|"|> (the text raw: no escapes, any
// character but the quote itself), a JSON number, true, false or null, a
// list [VALUE,...] or an object {key:VALUE,...}, whose keys are bare (all
// up to the ':') or quoted like strings. White space between the parts is
// allowed, as llama.cpp's Gemma 4 parser allows it.
const (
	gemmaCallOpen   = "<|tool_call>"
	gemmaCallClose  = "<tool_call|>"
	gemmaQuote      = `<|"|>`
	gemmaCallPrefix = "call:"
	// maxGemmaCall bounds the text of one call, maxGemmaDepth the nesting
	// of its lists and objects (the arguments object is depth 1).
	maxGemmaCall  = 1 << 20
	maxGemmaDepth = maxJSONDepth
)

// parseGemma4Call reads the text between a call's tags: call:NAME{...}.
// The arguments come back as a JSON object.
func parseGemma4Call(body string) (ToolCall, error) {
	if len(body) > maxGemmaCall {
		return ToolCall{}, fmt.Errorf("dialect: gemma 4 call of %d bytes: at most %d", len(body), maxGemmaCall)
	}
	rest, ok := strings.CutPrefix(strings.TrimLeftFunc(body, unicode.IsSpace), gemmaCallPrefix)
	if !ok {
		return ToolCall{}, fmt.Errorf("dialect: gemma 4 call does not start with %q", gemmaCallPrefix)
	}
	i := strings.IndexByte(rest, '{')
	if i < 0 {
		return ToolCall{}, fmt.Errorf("dialect: gemma 4 call has no arguments {...}")
	}
	name := strings.TrimSpace(rest[:i])
	if name == "" || strings.ContainsFunc(name, func(r rune) bool { return unicode.IsSpace(r) || strings.ContainsRune("<>{}[],:", r) }) {
		return ToolCall{}, fmt.Errorf("dialect: gemma 4 call: bad function name %q", name)
	}
	args, err := gemma4JSON(rest[i:])
	if err != nil {
		return ToolCall{}, fmt.Errorf("dialect: gemma 4 call %s: %w", name, err)
	}
	return ToolCall{Name: name, Arguments: args}, nil
}

// gemma4JSON converts a Gemma 4 arguments object ({key:VALUE,...}, white
// space around it) to JSON.
func gemma4JSON(s string) (json.RawMessage, error) {
	r := gemmaReader{s: s}
	r.space()
	if !strings.HasPrefix(r.s[r.pos:], "{") {
		return nil, r.errf("want the arguments object {...}")
	}
	if err := r.value(1); err != nil {
		return nil, err
	}
	r.space()
	if r.pos < len(r.s) {
		return nil, r.errf("text after the arguments")
	}
	return json.RawMessage(r.out.String()), nil
}

// gemmaReader reads Gemma 4 values from s, writing them to out as JSON.
type gemmaReader struct {
	s   string
	pos int
	out strings.Builder
}

func (r *gemmaReader) errf(format string, args ...any) error {
	near := r.s[r.pos:]
	if len(near) > 16 {
		near = near[:16] + "..."
	}
	return fmt.Errorf("at byte %d (%q): %s", r.pos, near, fmt.Sprintf(format, args...))
}

func (r *gemmaReader) space() {
	for r.pos < len(r.s) && strings.IndexByte(" \t\r\n", r.s[r.pos]) >= 0 {
		r.pos++
	}
}

// value reads one value at nesting depth (1 for the arguments object).
func (r *gemmaReader) value(depth int) error {
	if r.pos >= len(r.s) {
		return r.errf("want a value, the text ends")
	}
	rest := r.s[r.pos:]
	switch c := rest[0]; {
	case c == '{' || c == '[':
		if depth > maxGemmaDepth {
			return r.errf("nested deeper than %d", maxGemmaDepth)
		}
		return r.container(c, depth)
	case strings.HasPrefix(rest, gemmaQuote):
		s, err := r.quoted()
		if err != nil {
			return err
		}
		writeJSONString(&r.out, s) // lfm2.go
		return nil
	case c == '-' || c >= '0' && c <= '9':
		return r.number()
	}
	for _, lit := range []string{"true", "false", "null"} {
		if strings.HasPrefix(rest, lit) {
			r.out.WriteString(lit)
			r.pos += len(lit)
			return nil
		}
	}
	return r.errf("want a value")
}

// container reads an object ({) or a list ([).
func (r *gemmaReader) container(open byte, depth int) error {
	end := byte('}')
	if open == '[' {
		end = ']'
	}
	r.out.WriteByte(open)
	r.pos++
	r.space()
	if r.pos < len(r.s) && r.s[r.pos] == end {
		r.out.WriteByte(end)
		r.pos++
		return nil
	}
	for {
		if open == '{' {
			k, err := r.key()
			if err != nil {
				return err
			}
			writeJSONString(&r.out, k)
			r.out.WriteByte(':')
			r.space()
		}
		if err := r.value(depth + 1); err != nil {
			return err
		}
		r.space()
		if r.pos >= len(r.s) {
			return r.errf("want ',' or %q, the text ends", end)
		}
		switch r.s[r.pos] {
		case ',':
			r.out.WriteByte(',')
			r.pos++
			r.space()
		case end:
			r.out.WriteByte(end)
			r.pos++
			return nil
		default:
			return r.errf("want ',' or %q", end)
		}
	}
}

// key reads an object's key and its ':': quoted like a string, or bare:
// the text up to the ':' (without white space around it), which holds
// none of {}[],.
func (r *gemmaReader) key() (string, error) {
	var k string
	if strings.HasPrefix(r.s[r.pos:], gemmaQuote) {
		var err error
		if k, err = r.quoted(); err != nil {
			return "", err
		}
		r.space()
		if r.pos >= len(r.s) || r.s[r.pos] != ':' {
			return "", r.errf("want ':' after the key")
		}
	} else {
		n := strings.IndexAny(r.s[r.pos:], ":{}[],")
		if n < 0 || r.s[r.pos+n] != ':' {
			return "", r.errf("want a key and ':'")
		}
		k = strings.TrimSpace(r.s[r.pos : r.pos+n])
		if k == "" || strings.Contains(k, gemmaQuote) {
			return "", r.errf("bad key %q", k)
		}
		r.pos += n
	}
	r.pos++ // ':'
	return k, nil
}

// quoted reads <|"|>text<|"|> and returns the text.
func (r *gemmaReader) quoted() (string, error) {
	start := r.pos + len(gemmaQuote)
	n := strings.Index(r.s[start:], gemmaQuote)
	if n < 0 {
		return "", r.errf("string without its closing %s", gemmaQuote)
	}
	r.pos = start + n + len(gemmaQuote)
	return r.s[start : start+n], nil
}

// number reads a JSON number: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?
func (r *gemmaReader) number() error {
	s, i := r.s, r.pos
	digits := func() int {
		n := 0
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
			n++
		}
		return n
	}
	if s[i] == '-' {
		i++
	}
	lead := i
	if n := digits(); n == 0 || n > 1 && s[lead] == '0' {
		return r.errf("bad number")
	}
	if i < len(s) && s[i] == '.' {
		i++
		if digits() == 0 {
			return r.errf("bad number")
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		if digits() == 0 {
			return r.errf("bad number")
		}
	}
	r.out.WriteString(s[r.pos:i])
	r.pos = i
	return nil
}

// closeIndex finds the end of the open call in s (its body): the first
// <tool_call|> outside a quoted string, or -1. It reads on from where the
// last look stopped (*scan, *quoted), and stops before a tail that may be
// the start of a quote or the closing tag.
func (*gemma4) closeIndex(s string, scan *int, quoted *bool) int {
	i := *scan
	for {
		j := strings.IndexByte(s[i:], '<')
		if j < 0 {
			*scan = len(s)
			return -1
		}
		i += j
		rest := s[i:]
		switch {
		case strings.HasPrefix(rest, gemmaQuote):
			*quoted = !*quoted
			i += len(gemmaQuote)
		case !*quoted && strings.HasPrefix(rest, gemmaCallClose):
			*scan = i
			return i
		case strings.HasPrefix(gemmaQuote, rest) || strings.HasPrefix(gemmaCallClose, rest):
			*scan = i // maybe a tag: wait for more
			return -1
		default:
			i++
		}
	}
}
