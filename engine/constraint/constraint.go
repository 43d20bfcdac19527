// Package constraint is what a request asks its answer to keep to, as
// the front ends decode it from their protocols (Ollama's format,
// OpenAI's response_format, tools and tool_choice, llama-server's
// grammar, an MQTT ask's format, the command's --json-schema and
// --grammar files), and its compile: the grammar the engine enforces
// token by token, the trigger that makes it lazy, and the check of the
// finished answer for what the grammar cannot enforce, made once and
// together.
//
// Front ends fill a Constraint and never build grammars themselves; the
// core compiles it (Compile) on the request's goroutine, with the
// model's dialect for tool calls, before the request is queued, and the
// engine binds the parsed grammar to its vocabulary without parsing it
// again. Whatever cannot be enforced is refused with an error naming it,
// never loosened.
package constraint

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/geisten/geist/engine/dialect"
	"github.com/geisten/geist/engine/grammar"
)

// Bounds of what a constraint is read from (the grammar package's).
const (
	MaxSchemaBytes  = grammar.MaxSchemaBytes  // a JSON schema before it is read
	MaxGrammarBytes = grammar.MaxGrammarBytes // GBNF source
)

// Constraint is what an answer must keep to. Of Format, Schema, JSON and
// GBNF at most one is set (front ends refuse two, in their protocol's
// words); Tools with ToolChoice constrain tool calls besides.
type Constraint struct {
	// Format is Ollama's format field (also MQTT asks'): "json" for any
	// JSON, or a JSON schema; absent, null or "" for none.
	Format json.RawMessage
	// Schema is a JSON schema the answer must validate against (OpenAI's
	// response_format json_schema.schema; enforced strict or not);
	// SchemaField names it in errors.
	Schema      json.RawMessage
	SchemaField string
	// JSON asks for any JSON value (OpenAI's json_object).
	JSON bool
	// GBNF is a grammar as given (llama-server's grammar field, the
	// command's --grammar file).
	GBNF string
	// Tools are the tools offered (each {"type": "function", "function":
	// {"name", "parameters"}}) and ToolChoice OpenAI's tool_choice ("none",
	// "auto", "required" or {"type": "function", "function": {"name"}};
	// absent: auto). With required or a named function the whole answer
	// is calls in the model's syntax; with auto a lazy grammar constrains
	// each call from its opening on, unless another constraint is set or
	// the calls cannot be enforced (then they stay free: offered, not
	// demanded). OneCall allows one call (OpenAI's parallel_tool_calls
	// false).
	Tools      []json.RawMessage
	ToolChoice json.RawMessage
	OneCall    bool

	mu   sync.Mutex
	memo *Compiled
	key  string // the dialect memo was compiled for
}

// Compiled is a Constraint made ready for the engine.
type Compiled struct {
	// Grammar is the parsed grammar (nil: the answer is free) and Source
	// its text; Trigger, if set, makes it lazy: it applies from the end
	// of that text on (engine.Request).
	Grammar *grammar.Grammar
	Source  string
	Trigger string
	// Check, if set, checks the finished answer's content for what the
	// grammar could not enforce (a oneOf whose alternatives overlap).
	Check func(content []byte) error
}

// Empty reports whether c constrains nothing.
func (c *Constraint) Empty() bool {
	return c == nil || (len(c.format()) == 0 && len(c.Schema) == 0 && !c.JSON && c.GBNF == "" && len(c.Tools) == 0 && len(c.choice()) == 0)
}

func (c *Constraint) format() string {
	f := strings.TrimSpace(string(c.Format))
	if f == "null" || f == `""` {
		return ""
	}
	return f
}

func (c *Constraint) choice() string {
	s := strings.TrimSpace(string(c.ToolChoice))
	if s == "null" {
		return ""
	}
	return s
}

// Compile compiles c for a model whose tool calls are in dialect d (nil:
// any), bounded by the grammar package's budgets and ended by ctx. The
// result is kept: compiling c again for the same dialect returns it (a
// front end that must refuse a bad constraint in its own protocol's
// words compiles first, the core then finds it done). A nil or empty c
// compiles to nil.
func (c *Constraint) Compile(ctx context.Context, d dialect.Dialect) (*Compiled, error) {
	if c.Empty() {
		return nil, nil
	}
	d = dialect.Or(d)
	key := d.Name()
	if len(c.Tools) == 0 && len(c.choice()) == 0 {
		key = "" // no tools: the dialect does not matter
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.memo != nil && c.key == key {
		return c.memo, nil
	}
	out, err := c.compile(ctx, d)
	if err != nil {
		return nil, err
	}
	c.memo, c.key = out, key
	return out, nil
}

func (c *Constraint) compile(ctx context.Context, d dialect.Dialect) (*Compiled, error) {
	out := &Compiled{}
	var src string
	var err error
	switch {
	case len(c.format()) > 0:
		if src, err = grammar.FromFormatContext(ctx, c.Format); err != nil {
			return nil, err
		}
		if out.Check, err = grammar.FormatCheck(c.Format); err != nil {
			return nil, err
		}
	case len(c.Schema) > 0:
		field := c.SchemaField
		if field == "" {
			field = "schema"
		}
		if src, err = grammar.FromSchema(c.Schema); err != nil {
			return nil, fmt.Errorf("%s: %v", field, err)
		}
		if out.Check, err = grammar.SchemaCheck(c.Schema); err != nil {
			return nil, fmt.Errorf("%s: %v", field, err)
		}
	case c.JSON:
		src = grammar.AnyJSON()
	case c.GBNF != "":
		src = c.GBNF
	}
	if src != "" {
		if out.Grammar, err = grammar.ParseContext(ctx, src); err != nil {
			return nil, err
		}
		out.Source = src
	}
	if err := c.tools(ctx, d, out); err != nil {
		return nil, err
	}
	if out.Grammar == nil {
		return nil, nil
	}
	return out, nil
}

// errBadChoice is tool_choice that is none of its forms.
var errBadChoice = errors.New(`tool_choice: want none, auto, required or {"type": "function", "function": {"name": ...}}`)

// tools adds the grammar of tool calls to out (see Constraint.Tools).
func (c *Constraint) tools(ctx context.Context, d dialect.Dialect, out *Compiled) error {
	var mode, only string
	choice := c.choice()
	switch {
	case choice == "":
		mode = "auto"
	case json.Unmarshal(c.ToolChoice, &mode) == nil:
		switch mode {
		case "auto", "none", "required":
		default:
			return fmt.Errorf("tool_choice %q: want none, auto, required or a function", mode)
		}
	default:
		var named struct {
			Type     string `json:"type"`
			Function struct {
				Name string `json:"name"`
			} `json:"function"`
		}
		if err := json.Unmarshal(c.ToolChoice, &named); err != nil || named.Function.Name == "" {
			return errBadChoice
		}
		mode, only = "required", named.Function.Name
	}
	if mode == "none" || len(c.Tools) == 0 {
		if mode == "required" {
			return fmt.Errorf("tool_choice %s without tools", choice)
		}
		return nil
	}
	if mode == "auto" {
		if out.Grammar != nil {
			return nil // free text with calls the model may write: nothing to enforce
		}
		// Offered, not demanded: tools whose parameters cannot be
		// enforced (or a dialect whose calls have no opening to start a
		// lazy grammar at) leave the calls unconstrained rather than
		// refusing.
		src, trigger, err := d.Grammar(c.Tools, "", true, c.OneCall)
		if err != nil {
			return nil
		}
		g, err := grammar.ParseContext(ctx, src)
		if err != nil {
			return nil
		}
		out.Grammar, out.Source, out.Trigger = g, src, trigger
		return nil
	}
	if out.Grammar != nil {
		return fmt.Errorf("tool_choice %s and a response format cannot both be enforced", choice)
	}
	src, _, err := d.Grammar(c.Tools, only, false, c.OneCall)
	if err != nil {
		return fmt.Errorf("tools: %v", err)
	}
	g, err := grammar.ParseContext(ctx, src)
	if err != nil {
		return err
	}
	out.Grammar, out.Source = g, src
	return nil
}
