package dialect

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/big"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/geisten/geist/engine/grammar"
)

// LFM2's and LFM2.5's calls: <|tool_call_start|>[name(key="value", n=3), ...]<|tool_call_end|>,
// a Python list of calls with keyword arguments (below). Its templates
// print a message's content and nothing of its tool_calls: the model
// writes its calls into its answer, and its model card shows the
// conversation with them there, before the answer's text; engine/chat
// writes a client's calls back there (CallList).
var LFM2 Dialect = &lfm2{family{"lfm2", Tags{"<|tool_call_start|>", "<|tool_call_end|>", true}}}

type lfm2 struct{ family }

func init() { Register(LFM2, 50) }

// Detect: the template has LFM2's <|tool_call_start|> or tool list
// tokens, or LFM2.5's "List of tools: [" written without them (as
// llama.cpp tells them).
func (*lfm2) Detect(src string) bool {
	return strings.Contains(src, "<|tool_call_start|>") || strings.Contains(src, "<|tool_list_start|>") || strings.Contains(src, "List of tools: [")
}

// ParseCalls reads a Python list of calls (parsePyCalls), or what every
// dialect reads (JSON objects and lists, Qwen3.5's XML-like call).
func (l *lfm2) ParseCalls(body string) ([]ToolCall, bool) {
	if b := strings.TrimSpace(body); !isXMLCall(b) {
		if calls, err := parsePyCalls(b); err == nil {
			return calls, true
		}
	}
	return l.family.ParseCalls(body)
}

// Grammar: one Python list of calls between the tags, each tool's
// parameters as keyword arguments (engine/grammar's tools_py.go).
func (l *lfm2) Grammar(tools []json.RawMessage, only string, lazy, one bool) (string, string, error) {
	c, err := grammar.CallRules(tools, only, grammar.PythonCall)
	if err != nil {
		return "", "", err
	}
	list := `"[" call` + more(one, `"," " "? call`) + ` "]" ` + grammar.Literal(l.tags.Close)
	if lazy {
		return c.Grammar(list), l.tags.Open, nil
	}
	return c.Grammar(grammar.Literal(l.tags.Open) + " " + list), "", nil
}

// CallList writes calls as LFM2 writes them, between its tags: a Python
// list of calls with keyword arguments, the values as Python literals,
// [name(key="value", n=3), ...]. Calls whose name or argument names
// cannot be written so (or whose arguments are not an object) make the
// list a JSON list of {"name": ..., "arguments": ...} objects, which
// LFM2's parser reads too, each call's arguments written by dumps (as
// Python's json.dumps writes them: engine/chat's template values).
func CallList(calls []ToolCall, dumps func(json.RawMessage) (string, error)) (string, error) {
	tags := LFM2.Tags()
	parts := make([]string, len(calls))
	for i, c := range calls {
		s, ok, err := pyCall(c)
		if err != nil {
			return "", fmt.Errorf("tool call %d (%s): %w", i, c.Name, err)
		}
		if !ok {
			return jsonCallList(calls, dumps)
		}
		parts[i] = s
	}
	return tags.Open + "[" + strings.Join(parts, ", ") + "]" + tags.Close, nil
}

func jsonCallList(calls []ToolCall, dumps func(json.RawMessage) (string, error)) (string, error) {
	tags := LFM2.Tags()
	parts := make([]string, len(calls))
	for i, c := range calls {
		var sb strings.Builder
		sb.WriteString(`{"name": `)
		writeJSONString(&sb, c.Name)
		a, err := dumps(c.Arguments)
		if err != nil {
			return "", fmt.Errorf("tool call %d (%s): %w", i, c.Name, err)
		}
		sb.WriteString(`, "arguments": ` + a + "}")
		parts[i] = sb.String()
	}
	return tags.Open + "[" + strings.Join(parts, ", ") + "]" + tags.Close, nil
}

// LFM2 writes its calls as a Python list of calls between its tokens:
//
//	<|tool_call_start|>[get_weather(city="Köln", days=2), HassTurnOn(name='Kitchen')]<|tool_call_end|>
//
// each argument a keyword with a Python literal: strings (either quote,
// Python's escapes, u and r prefixes), integers (decimal, 0x, 0o, 0b,
// underscores), floats, True, False, None, lists, tuples and dicts with
// string keys. JSON's true, false and null are read too, as llama.cpp
// reads them. parsePyCalls turns such a list into calls whose arguments
// are JSON objects keyed by the keywords, in the order written.

// maxPyCallBytes bounds the text of one call list.
const maxPyCallBytes = 1 << 20

// pyReader reads one call list; pos is the offset of the next byte.
type pyReader struct {
	s   string
	pos int
	out strings.Builder // the JSON of the value being read
}

// pyError is a syntax error in a call list, with the offset it was found at.
type pyError struct {
	pos int
	msg string
}

func (e *pyError) Error() string {
	return fmt.Sprintf("dialect: Python call list, byte %d: %s", e.pos, e.msg)
}

func (r *pyReader) fail(format string, a ...any) error {
	return &pyError{r.pos, fmt.Sprintf(format, a...)}
}

// parsePyCalls reads a Python call list, [name(key=value, ...), ...]
// (or one call alone): at least one call, keyword arguments only, each
// keyword once.
func parsePyCalls(body string) ([]ToolCall, error) {
	if len(body) > maxPyCallBytes {
		return nil, fmt.Errorf("dialect: Python call list of %d bytes: at most %d", len(body), maxPyCallBytes)
	}
	r := &pyReader{s: body}
	r.space()
	if !r.take('[') {
		// One call without the list around it.
		c, err := r.call()
		if err != nil {
			return nil, err
		}
		r.space()
		if r.pos < len(r.s) {
			return nil, r.fail("text after the call")
		}
		return []ToolCall{c}, nil
	}
	var calls []ToolCall
	for {
		r.space()
		if r.peek() == ']' && len(calls) > 0 { // a trailing comma
			break
		}
		c, err := r.call()
		if err != nil {
			return nil, err
		}
		calls = append(calls, c)
		r.space()
		if r.take(',') {
			continue
		}
		if r.peek() != ']' {
			return nil, r.fail("want ',' or ']' after a call")
		}
		break
	}
	r.pos++ // ']'
	r.space()
	if r.pos < len(r.s) {
		return nil, r.fail("text after the list of calls")
	}
	return calls, nil
}

// call reads name(key=value, ...).
func (r *pyReader) call() (ToolCall, error) {
	name := r.name()
	if name == "" {
		return ToolCall{}, r.fail("want a function name")
	}
	r.space()
	if !r.take('(') {
		return ToolCall{}, r.fail("want '(' after %s", name)
	}
	r.out.Reset()
	r.out.WriteByte('{')
	seen := map[string]bool{}
	for {
		r.space()
		if r.take(')') {
			break
		}
		at := r.pos
		key := r.name()
		if key == "" {
			return ToolCall{}, r.fail("%s: want a keyword argument (positional arguments have no name to key them by)", name)
		}
		r.space()
		if !r.take('=') {
			r.pos = at
			return ToolCall{}, r.fail("%s: want a keyword argument (positional arguments have no name to key them by)", name)
		}
		if seen[key] {
			r.pos = at
			return ToolCall{}, r.fail("%s: keyword argument %q repeated", name, key)
		}
		seen[key] = true
		if len(seen) > 1 {
			r.out.WriteByte(',')
		}
		writeJSONString(&r.out, key)
		r.out.WriteByte(':')
		r.space()
		if err := r.value(1); err != nil {
			return ToolCall{}, err
		}
		r.space()
		if r.take(',') {
			continue
		}
		if !r.take(')') {
			return ToolCall{}, r.fail("%s: want ',' or ')' after an argument", name)
		}
		break
	}
	r.out.WriteByte('}')
	return ToolCall{Name: name, Arguments: json.RawMessage(r.out.String())}, nil
}

// name reads a function or keyword name: letters, digits, '_', and the
// '-' and '.' that tool names may hold, not starting with a digit.
func (r *pyReader) name() string {
	start := r.pos
	for r.pos < len(r.s) {
		c, n := utf8.DecodeRuneInString(r.s[r.pos:])
		if !(c == '_' || c == '-' || c == '.' || unicode.IsLetter(c) || unicode.IsDigit(c) && r.pos > start) || c == utf8.RuneError {
			break
		}
		r.pos += n
	}
	return r.s[start:r.pos]
}

func (r *pyReader) space() {
	for r.pos < len(r.s) {
		switch r.s[r.pos] {
		case ' ', '\t', '\n', '\r':
			r.pos++
		default:
			return
		}
	}
}

func (r *pyReader) peek() byte {
	if r.pos < len(r.s) {
		return r.s[r.pos]
	}
	return 0
}

func (r *pyReader) take(c byte) bool {
	if r.peek() == c {
		r.pos++
		return true
	}
	return false
}

// value reads one Python literal at nesting level depth and writes it as
// JSON.
func (r *pyReader) value(depth int) error {
	if depth > maxJSONDepth {
		return r.fail("literal nested deeper than %d", maxJSONDepth)
	}
	c := r.peek()
	switch {
	case c == '"' || c == '\'':
		return r.str(false)
	case c == '[':
		r.pos++
		return r.items(']', depth)
	case c == '(':
		r.pos++
		return r.items(')', depth)
	case c == '{':
		r.pos++
		return r.dict(depth)
	case c == '-' || c == '+' || c == '.' || c >= '0' && c <= '9':
		return r.number()
	}
	at := r.pos
	word := r.name()
	if q := r.peek(); (q == '"' || q == '\'') && word != "" {
		switch strings.ToLower(word) {
		case "u":
			return r.str(false)
		case "r":
			return r.str(true)
		}
		r.pos = at
		return r.fail("string prefix %q is not read", word)
	}
	switch word {
	case "True", "true":
		r.out.WriteString("true")
	case "False", "false":
		r.out.WriteString("false")
	case "None", "null":
		r.out.WriteString("null")
	case "":
		return r.fail("want a value")
	default:
		r.pos = at
		return r.fail("%q is not a literal", word)
	}
	return nil
}

// items reads the elements of a list or tuple up to end, as a JSON array.
// (x) is x, as in Python; (x,) is a tuple of one.
func (r *pyReader) items(end byte, depth int) error {
	mark := r.out.Len()
	r.out.WriteByte('[')
	n := 0
	comma := false
	for {
		r.space()
		if r.take(end) {
			break
		}
		if n > 0 {
			r.out.WriteByte(',')
		}
		if err := r.value(depth + 1); err != nil {
			return err
		}
		n++
		r.space()
		if comma = r.take(','); comma {
			continue
		}
		if !r.take(end) {
			return r.fail("want ',' or '%c'", end)
		}
		break
	}
	if end == ')' && n == 1 && !comma {
		// A parenthesized value: drop the brackets written around it.
		s := r.out.String()
		r.out.Reset()
		r.out.WriteString(s[:mark] + s[mark+1:])
		return nil
	}
	r.out.WriteByte(']')
	return nil
}

// dict reads {key: value, ...} with string keys as a JSON object.
func (r *pyReader) dict(depth int) error {
	r.out.WriteByte('{')
	n := 0
	for {
		r.space()
		if r.take('}') {
			break
		}
		if n > 0 {
			r.out.WriteByte(',')
		}
		if err := r.key(); err != nil {
			return err
		}
		r.space()
		if !r.take(':') {
			return r.fail("want ':' after a dict key")
		}
		r.out.WriteByte(':')
		r.space()
		if err := r.value(depth + 1); err != nil {
			return err
		}
		n++
		r.space()
		if r.take(',') {
			continue
		}
		if !r.take('}') {
			return r.fail("want ',' or '}'")
		}
		break
	}
	r.out.WriteByte('}')
	return nil
}

// key reads a dict key: a string literal.
func (r *pyReader) key() error {
	at := r.pos
	word := r.name()
	raw := false
	switch strings.ToLower(word) {
	case "":
	case "u":
	case "r":
		raw = true
	default:
		r.pos = at
		return r.fail("want a string key (sets and other keys are not read)")
	}
	if c := r.peek(); c != '"' && c != '\'' {
		r.pos = at
		return r.fail("want a string key (sets and other keys are not read)")
	}
	return r.str(raw)
}

// str reads a string literal in either quote, raw or with Python's
// escapes, and the literals written right after it (Python joins "a" "b"
// into "ab"), and writes them as a JSON string.
func (r *pyReader) str(raw bool) error {
	var sb strings.Builder
	for {
		if err := r.strLit(&sb, raw); err != nil {
			return err
		}
		at := r.pos
		r.space()
		word := r.name()
		if q := r.peek(); q != '"' && q != '\'' {
			r.pos = at
			break
		}
		switch strings.ToLower(word) {
		case "", "u":
			raw = false
		case "r":
			raw = true
		default:
			r.pos = at
			writeJSONString(&r.out, sb.String())
			return nil
		}
	}
	writeJSONString(&r.out, sb.String())
	return nil
}

// strLit reads one string literal into sb.
func (r *pyReader) strLit(sb *strings.Builder, raw bool) error {
	q := r.s[r.pos]
	if strings.HasPrefix(r.s[r.pos:], strings.Repeat(string(q), 3)) {
		return r.fail("triple-quoted strings are not read")
	}
	r.pos++
	for {
		if r.pos >= len(r.s) {
			return r.fail("unterminated string")
		}
		c := r.s[r.pos]
		if c == q {
			r.pos++
			break
		}
		if c != '\\' {
			ch, n := utf8.DecodeRuneInString(r.s[r.pos:])
			sb.WriteRune(ch) // invalid UTF-8 becomes U+FFFD
			r.pos += n
			continue
		}
		if r.pos+1 >= len(r.s) {
			return r.fail("unterminated string")
		}
		if raw {
			// A raw string keeps its backslashes; one before the quote
			// keeps the quote in the string.
			ch, n := utf8.DecodeRuneInString(r.s[r.pos+1:])
			sb.WriteByte('\\')
			sb.WriteRune(ch)
			r.pos += 1 + n
			continue
		}
		if err := r.escape(sb); err != nil {
			return err
		}
	}
	return nil
}

// pySimpleEscapes are Python's one-letter escapes (a backslash before a
// newline continues the line).
var pySimpleEscapes = map[byte]string{'\\': `\`, '\'': `'`, '"': `"`, 'a': "\a", 'b': "\b", 'f': "\f", 'n': "\n", 'r': "\r", 't': "\t", 'v': "\v", '\n': ""}

// escape reads one of Python's escapes at r.pos (a backslash) into sb.
func (r *pyReader) escape(sb *strings.Builder) error {
	at := r.pos
	e := r.s[r.pos+1]
	r.pos += 2
	if s, ok := pySimpleEscapes[e]; ok {
		sb.WriteString(s)
		return nil
	}
	switch {
	case e >= '0' && e <= '7':
		v := rune(e - '0')
		for i := 0; i < 2 && r.pos < len(r.s) && r.s[r.pos] >= '0' && r.s[r.pos] <= '7'; i++ {
			v = v*8 + rune(r.s[r.pos]-'0')
			r.pos++
		}
		sb.WriteRune(v)
		return nil
	case e == 'x' || e == 'u' || e == 'U':
		n := map[byte]int{'x': 2, 'u': 4, 'U': 8}[e]
		v, ok := hexRune(r.s[r.pos:], n)
		if !ok {
			r.pos = at
			return r.fail("\\%c wants %d hex digits", e, n)
		}
		r.pos += n
		if v > unicode.MaxRune {
			r.pos = at
			return r.fail("\\U%08x is beyond Unicode", v)
		}
		if e == 'u' && v >= 0xD800 && v < 0xDC00 && strings.HasPrefix(r.s[r.pos:], `\u`) {
			// A surrogate pair, as json.dumps writes one: the character.
			if lo, ok := hexRune(r.s[r.pos+2:], 4); ok && lo >= 0xDC00 && lo < 0xE000 {
				r.pos += 6
				v = 0x10000 + (v-0xD800)<<10 + (lo - 0xDC00)
			}
		}
		sb.WriteRune(v) // a lone surrogate becomes U+FFFD
		return nil
	case e == 'N':
		r.pos = at
		return r.fail("\\N{...} escapes are not read")
	}
	// Python keeps an unknown escape as it stands.
	sb.WriteByte('\\')
	r.pos--
	return nil
}

func hexRune(s string, n int) (rune, bool) {
	if len(s) < n {
		return 0, false
	}
	var v rune
	for i := range n {
		c := s[i]
		switch {
		case c >= '0' && c <= '9':
			v = v*16 + rune(c-'0')
		case c >= 'a' && c <= 'f':
			v = v*16 + rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			v = v*16 + rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return v, true
}

// number reads a Python int or float, with an optional sign, and writes
// it as a JSON number: underscores dropped, 0x/0o/0b integers in decimal,
// 1. and .5 as 1.0 and 0.5.
func (r *pyReader) number() error {
	at := r.pos
	neg := false
	if c := r.peek(); c == '-' || c == '+' {
		neg = c == '-'
		r.pos++
	}
	start := r.pos
	for r.pos < len(r.s) {
		c := r.s[r.pos]
		if c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_' || c == '.' ||
			(c == '-' || c == '+') && r.pos > start && (r.s[r.pos-1] == 'e' || r.s[r.pos-1] == 'E') && !isPrefixed(r.s[start:r.pos]) {
			r.pos++
			continue
		}
		break
	}
	lit := r.s[start:r.pos]
	j, ok := pyNumberJSON(lit)
	if !ok {
		r.pos = at
		return r.fail("%q is not a number", r.s[at:start]+lit)
	}
	if neg {
		r.out.WriteByte('-')
	}
	r.out.WriteString(j)
	return nil
}

func isPrefixed(s string) bool {
	return len(s) >= 2 && s[0] == '0' && strings.ContainsRune("xXoObB", rune(s[1]))
}

// pyNumberJSON converts an unsigned Python number literal to JSON.
func pyNumberJSON(lit string) (string, bool) {
	if lit == "" || lit[0] == '_' || lit[len(lit)-1] == '_' || strings.Contains(lit, "__") {
		return "", false
	}
	if isPrefixed(lit) {
		digits := lit[2:]
		digits = strings.TrimPrefix(digits, "_")
		base := map[byte]int{'x': 16, 'o': 8, 'b': 2}[lit[1]|0x20]
		v, ok := new(big.Int).SetString(strings.ReplaceAll(digits, "_", ""), base)
		if !ok || digits == "" {
			return "", false
		}
		return v.String(), true
	}
	// Underscores only between digits.
	for i := 0; i < len(lit); i++ {
		if lit[i] == '_' && !(isDigit(lit[i-1]) && i+1 < len(lit) && isDigit(lit[i+1])) {
			return "", false
		}
	}
	lit = strings.ReplaceAll(lit, "_", "")
	mant, exp := lit, ""
	if i := strings.IndexAny(lit, "eE"); i >= 0 {
		mant, exp = lit[:i], lit[i+1:]
		e := strings.TrimLeft(exp, "+-")
		if len(exp)-len(e) > 1 || e == "" || !allDigits(e) {
			return "", false
		}
	}
	whole, frac, isFloat := strings.Cut(mant, ".")
	if !allDigits(whole) || !allDigits(frac) || whole == "" && frac == "" {
		return "", false
	}
	if !isFloat && exp == "" && len(whole) > 1 && whole[0] == '0' && strings.Trim(whole, "0") != "" {
		return "", false // Python refuses 012
	}
	whole = strings.TrimLeft(whole, "0")
	if whole == "" {
		whole = "0"
	}
	out := whole
	if isFloat {
		if frac == "" {
			frac = "0"
		}
		out += "." + frac
	}
	if exp != "" {
		out += "e" + exp
	}
	if isFloat || exp != "" {
		// A float beyond float64 is inf to Python, which JSON cannot write.
		if f, _ := strconv.ParseFloat(out, 64); math.IsInf(f, 0) {
			return "", false
		}
	}
	return out, true
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if !isDigit(s[i]) {
			return false
		}
	}
	return true
}

// writeJSONString writes s as a JSON string (no HTML escaping: the
// arguments go to a client as the model wrote them).
func writeJSONString(sb *strings.Builder, s string) {
	const hex = "0123456789abcdef"
	sb.WriteByte('"')
	for _, c := range s {
		switch {
		case c == '"':
			sb.WriteString(`\"`)
		case c == '\\':
			sb.WriteString(`\\`)
		case c == '\n':
			sb.WriteString(`\n`)
		case c == '\r':
			sb.WriteString(`\r`)
		case c == '\t':
			sb.WriteString(`\t`)
		case c < 0x20 || c == 0x7F || c == 0x2028 || c == 0x2029:
			sb.WriteString(`\u`)
			for sh := 12; sh >= 0; sh -= 4 {
				sb.WriteByte(hex[c>>sh&0xF])
			}
		default:
			sb.WriteRune(c)
		}
	}
	sb.WriteByte('"')
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
