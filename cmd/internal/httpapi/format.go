package httpapi

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/geisten/geist/cmd/appliance"
	"github.com/geisten/geist/engine/dialect"
	"github.com/geisten/geist/engine/grammar"
)

// Constrained answers: Ollama's format, OpenAI's response_format and
// tool_choice, llama-server's grammar. Each becomes a GBNF grammar the
// engine enforces token by token; whatever cannot be enforced is refused
// with a 400 naming it, never loosened.

// A thinking model's answer may open with its thinking block: the core
// has the engine apply the grammar after it (engine.Request's
// GrammarAfterThink), whichever front end asked.

// The compiles below run on the request's goroutine, never the
// generation worker's, bounded by the grammar package's budgets and
// ended by ctx (the client gone); the engine finds the compiled grammar
// in the package's cache.

// setGrammar checks src and puts it on req.
func setGrammar(ctx context.Context, req *appliance.Request, src string) error {
	if _, err := grammar.ParseContext(ctx, src); err != nil {
		return badf("%v", err)
	}
	req.Grammar = src
	return nil
}

// schemaGrammar converts a JSON schema, refusing what it cannot enforce.
func schemaGrammar(field string, schema json.RawMessage) (string, error) {
	src, err := grammar.FromSchema(schema)
	if err != nil {
		return "", badf("%s: %v", field, err)
	}
	return src, nil
}

// ollamaFormat applies Ollama's format: "json" or a JSON schema.
func ollamaFormat(ctx context.Context, req *appliance.Request, format json.RawMessage) error {
	src, err := grammar.FromFormatContext(ctx, format)
	if err != nil {
		return badf("%v", err)
	}
	req.Grammar = src
	req.Check, err = grammar.FormatCheck(format)
	return err
}

// openaiResponseFormat applies OpenAI's response_format: text, json_object
// or json_schema ({"name", "schema", "strict"}; enforced either way).
func openaiResponseFormat(ctx context.Context, req *appliance.Request, raw json.RawMessage) error {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	var rf struct {
		Type       string `json:"type"`
		JSONSchema *struct {
			Name   string          `json:"name"`
			Schema json.RawMessage `json:"schema"`
			Strict *bool           `json:"strict"`
		} `json:"json_schema"`
	}
	if err := json.Unmarshal(raw, &rf); err != nil {
		return badf("response_format: %v", err)
	}
	switch rf.Type {
	case "text", "":
		return nil
	case "json_object":
		return setGrammar(ctx, req, grammar.AnyJSON())
	case "json_schema":
		if rf.JSONSchema == nil || len(rf.JSONSchema.Schema) == 0 {
			return badf("response_format: json_schema needs json_schema.schema")
		}
		src, err := schemaGrammar("response_format.json_schema.schema", rf.JSONSchema.Schema)
		if err != nil {
			return err
		}
		if req.Check, err = grammar.SchemaCheck(rf.JSONSchema.Schema); err != nil {
			return badf("response_format.json_schema.schema: %v", err)
		}
		return setGrammar(ctx, req, src)
	}
	return badf("response_format type %q: want text, json_object or json_schema", rf.Type)
}

// toolGrammar constrains tool calls: with tool_choice "required" or a
// named function the whole answer is calls in the model's own syntax;
// with "auto" (or none given) and a model whose calls have an opening
// (<tool_call>, <|tool_call|>, LFM2's <|tool_call_start|>, Gemma 4's <|tool_call>, Llama's {"name"), a lazy grammar constrains each call
// from its opening on, with free text between and after the calls. A
// request that already has a grammar (a format) keeps it. With
// req.OneToolCall the grammars allow one call.
func (s *Server) toolGrammar(ctx context.Context, req *appliance.Request, tools []json.RawMessage, choice json.RawMessage) error {
	var mode, only string
	c := strings.TrimSpace(string(choice))
	switch {
	case c == "" || c == "null":
		mode = "auto"
	case json.Unmarshal(choice, &mode) == nil:
		switch mode {
		case "auto", "none", "required":
		default:
			return badf("tool_choice %q: want none, auto, required or a function", mode)
		}
	default:
		var named struct {
			Type     string `json:"type"`
			Function struct {
				Name string `json:"name"`
			} `json:"function"`
		}
		if err := json.Unmarshal(choice, &named); err != nil || named.Function.Name == "" {
			return badf("tool_choice: want none, auto, required or {\"type\": \"function\", \"function\": {\"name\": ...}}")
		}
		mode, only = "required", named.Function.Name
	}
	if mode == "none" || len(tools) == 0 {
		if mode == "required" {
			return badf("tool_choice %s without tools", c)
		}
		return nil
	}
	d := dialect.Or(s.cfg.Model.ToolFormat)
	if mode == "auto" {
		if req.Grammar != "" {
			return nil // free text with calls the model may write: nothing to enforce
		}
		// Offered, not demanded: tools whose parameters cannot be
		// enforced (or a dialect whose calls have no opening to start a
		// lazy grammar at) leave the calls unconstrained rather than
		// refusing.
		src, trigger, err := d.Grammar(tools, "", true, req.OneToolCall)
		if err != nil {
			return nil
		}
		if _, err := grammar.ParseContext(ctx, src); err != nil {
			return nil
		}
		req.Grammar, req.GrammarTrigger = src, trigger
		return nil
	}
	if req.Grammar != "" {
		return badf("tool_choice %s and a response format cannot both be enforced", c)
	}
	src, _, err := d.Grammar(tools, only, false, req.OneToolCall)
	if err != nil {
		return badf("tools: %v", err)
	}
	return setGrammar(ctx, req, src)
}
