// Package dialect holds what differs between model families in how they
// think and call tools: one file per family (as ollama's model/parsers
// has one parser per family), each a Dialect: how its chat template
// shows it (Detect), the marks around its thinking block, the texts
// around its tool calls and how the calls between them read
// (ParseCalls), and the grammar that forces calls in its syntax
// (Grammar). A registry finds a template's dialect (Detect; Any when
// none shows), and ToolParser and ThinkSplitter read a streamed answer
// with it.
//
// The families, by file: hermes.go (<tool_call> JSON: Hermes, Qwen 2.5
// and 3, SmolLM3, Granite 4), qwen35.go (Qwen3.5's and Qwen3-Coder's
// XML-like calls between the same tags), llama.go (Llama 3's bare JSON), phi4.go (Phi-4-mini's
// list between its tool tokens), granite.go (Granite 3's list to the
// end), lfm2.go (LFM2's Python call lists), gemma4.go (Gemma 4's own
// syntax and thought channel), any.go (none shows: the tagged and the
// JSON forms).
//
// Adding a family is a file holding its Dialect and registering it
// (Register, with its place in the order templates are tried), and a
// test file beside it.
package dialect

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"

	"github.com/geisten/geist/engine/grammar"
)

// ToolCall is one call of a tool: by an assistant message of the
// conversation (rendered through a template) or parsed from the model's
// output (ToolParser).
type ToolCall struct {
	ID   string // the client's id of the call (OpenAI's tool_call id); "" when none
	Name string
	// Arguments are the call's arguments, a JSON object. A JSON string
	// holding an object (OpenAI's form) is read as that object.
	Arguments json.RawMessage
}

// Tags are the texts around a dialect's calls: Open starts a call (or,
// with List, a list of calls), Close ends it ("": the answer's end; both
// "": no tags, as Llama's bare JSON).
type Tags struct {
	Open, Close string
	List        bool
}

// Dialect is how one family of models writes its thinking and its tool
// calls.
type Dialect interface {
	// Name is the dialect's name in the registry ("tagged", "lfm2", ...).
	Name() string
	// String is Name.
	String() string
	// Detect reports whether a chat template's text teaches its model
	// this dialect.
	Detect(template string) bool
	// ThinkMarks are the texts around the model's thinking block.
	ThinkMarks() ThinkMarks
	// ThinkTokens are the texts of the control tokens of the thinking
	// marks: generated text must render them (as llama.cpp's preserved
	// tokens are) for the block to be split from the content and for a
	// grammar to let the model think first. Nil when the marks are text.
	ThinkTokens() []string
	// Tags are the texts around the calls.
	Tags() Tags
	// ToolTokens are the texts of the tokens that open and close the
	// calls and any others their syntax needs: a vocabulary that has them
	// as control tokens must render them in the generated text, or the
	// calls could neither be parsed nor forced by a grammar.
	ToolTokens() []string
	// BareJSON reports whether an answer that is nothing but JSON call
	// objects ({"name": ..., "parameters" or "arguments": {...}},
	// optionally after <|python_tag|>) counts as calls.
	BareJSON() bool
	// ParseCalls reads the text between a call's tags: the calls it
	// holds, or false when it is not calls in this dialect.
	ParseCalls(body string) ([]ToolCall, bool)
	// Grammar is the GBNF grammar of calls to the tools offered (each
	// {"type": "function", "function": {"name", "parameters"}}, or only
	// the one named): names theirs, arguments valid under each tool's
	// parameter schema. With lazy, it is the grammar of what follows the
	// trigger it returns (the model writes freely until its call
	// opening); otherwise of a whole answer of calls. With one, exactly
	// one call (OpenAI's parallel_tool_calls false): a lazy grammar ends
	// with its call, and the caller keeps only the first.
	Grammar(tools []json.RawMessage, only string, lazy, one bool) (gbnf, trigger string, err error)
}

// registered are the dialects Detect tries, in their order.
var (
	mu         sync.RWMutex
	registered []entry
)

type entry struct {
	d     Dialect
	order int
}

// Register adds d to the dialects Detect tries; order places it among
// them (lower first), for a template that shows more than one family's
// texts: Gemma 4 10, Qwen3.5 15, tagged 20, Phi-4 30, Granite 40, LFM2 50, Llama 60.
// A name registered twice panics.
func Register(d Dialect, order int) {
	mu.Lock()
	defer mu.Unlock()
	for _, e := range registered {
		if e.d.Name() == d.Name() {
			panic("dialect: " + d.Name() + " registered twice")
		}
	}
	registered = append(registered, entry{d, order})
	slices.SortStableFunc(registered, func(a, b entry) int { return a.order - b.order })
}

// Detect returns the dialect a chat template teaches its model, from the
// template's text: the first registered whose Detect holds, else Any.
func Detect(template string) Dialect {
	mu.RLock()
	defer mu.RUnlock()
	for _, e := range registered {
		if e.d.Detect(template) {
			return e.d
		}
	}
	return Any
}

// ByName returns the registered dialect of that name (Any for "any").
func ByName(name string) (Dialect, bool) {
	if name == Any.Name() {
		return Any, true
	}
	mu.RLock()
	defer mu.RUnlock()
	for _, e := range registered {
		if e.d.Name() == name {
			return e.d, true
		}
	}
	return nil, false
}

// Names lists the registered dialects' names in Detect's order, then "any".
func Names() []string {
	mu.RLock()
	defer mu.RUnlock()
	var out []string
	for _, e := range registered {
		out = append(out, e.d.Name())
	}
	return append(out, Any.Name())
}

// Or returns d, or Any for nil (a configuration that names none).
func Or(d Dialect) Dialect {
	if d == nil {
		return Any
	}
	return d
}

// family is what most dialects share: a name, tags, <think> marks, calls
// as JSON objects between the tags; each family's file sets or overrides
// the rest.
type family struct {
	name string
	tags Tags
}

func (f *family) Name() string           { return f.name }
func (f *family) String() string         { return f.name }
func (f *family) Tags() Tags             { return f.tags }
func (f *family) ThinkMarks() ThinkMarks { return ThinkTags }
func (f *family) ThinkTokens() []string  { return nil }
func (f *family) BareJSON() bool         { return false }

func (f *family) ToolTokens() []string {
	var out []string
	for _, s := range []string{f.tags.Open, f.tags.Close} {
		if s != "" {
			out = append(out, s)
		}
	}
	return out
}

// ParseCalls reads one call object, a JSON list of them (Phi-4-mini and
// Granite write them so), or Qwen3.5's XML-like call (qwen35.go).
func (f *family) ParseCalls(body string) ([]ToolCall, bool) {
	body = strings.TrimSpace(body)
	if isXMLCall(body) {
		c, ok := parseXMLCall(body, nil)
		return []ToolCall{c}, ok
	}
	return jsonCalls(body)
}

// jsonCalls reads one call object or a JSON list of them.
func jsonCalls(body string) ([]ToolCall, bool) {
	if !strings.HasPrefix(body, "[") {
		c, ok := parseCall(body, nil)
		if !ok {
			return nil, false
		}
		return []ToolCall{c}, true
	}
	var items []json.RawMessage
	dec := json.NewDecoder(strings.NewReader(body))
	if err := dec.Decode(&items); err != nil || len(items) == 0 {
		return nil, false
	}
	if _, err := dec.Token(); err == nil {
		return nil, false // trailing data
	}
	calls := make([]ToolCall, 0, len(items))
	for _, it := range items {
		c, ok := parseCall(string(it), nil)
		if !ok {
			return nil, false
		}
		calls = append(calls, c)
	}
	return calls, true
}

// jsonGrammar is Grammar for calls as JSON objects (key "arguments")
// between tags: each call tagged alone, or (tags.List) one list of calls
// after the opening (and before the closing, if any).
func jsonGrammar(tags Tags, tools []json.RawMessage, only string, lazy, one bool) (string, string, error) {
	c, err := grammar.CallRules(tools, only, grammar.JSONCall)
	if err != nil {
		return "", "", err
	}
	open, close := grammar.Literal(tags.Open), grammar.Literal(tags.Close)
	if tags.List {
		root := `"[" call` + more(one, `"," " "? call`) + ` "]"`
		if tags.Close != "" {
			root += " " + close
		}
		if lazy {
			return c.Grammar(root), tags.Open, nil
		}
		return c.Grammar(open + " " + root), "", nil
	}
	again := more(one, `"\n"* `+open+` "\n"? call `+close)
	if lazy {
		return c.Grammar(`"\n"? call ` + close + again), tags.Open, nil
	}
	return c.Grammar(open + ` "\n"? call ` + close + again), "", nil
}

// more is the repetition of further calls (each as next) after the
// first: none with one.
func more(one bool, next string) string {
	if one {
		return ""
	}
	return " ( " + next + " )*"
}

// ToolNames returns the function names of tool definitions
// ({"type": "function", "function": {"name": ...}}), skipping what has none.
func ToolNames(tools []json.RawMessage) []string {
	var names []string
	for _, t := range tools {
		var d struct {
			Name     string `json:"name"`
			Function struct {
				Name string `json:"name"`
			} `json:"function"`
		}
		if json.Unmarshal(t, &d) == nil {
			if d.Function.Name != "" {
				names = append(names, d.Function.Name)
			} else if d.Name != "" {
				names = append(names, d.Name)
			}
		}
	}
	return names
}

// maxJSONDepth bounds the nesting of the values the parsers read.
const maxJSONDepth = 64

// errNoOpening is Grammar's error for a lazy grammar of calls that have
// no opening to trigger it.
var errNoOpening = errors.New("calls in plain JSON have no opening to start a lazy grammar at")
