package httpapi

import (
	"encoding/json"

	"github.com/geisten/geist/engine/appliance"
	"github.com/geisten/geist/engine/constraint"
)

// Constrained answers: Ollama's format, OpenAI's response_format and
// tool_choice, llama-server's grammar. Each is decoded into the request's
// constraint.Constraint; the core compiles it (once, on the request's
// goroutine, bounded by the grammar package's budgets and ended by the
// request's context) with the model's dialect for tool calls, and refuses
// whatever cannot be enforced with a 400 naming it, never loosened.

// A thinking model's answer may open with its thinking block: the core
// has the engine apply the grammar after it (engine.Request's
// GrammarAfterThink), whichever front end asked.

// constraintOf returns req's constraint, made on first use.
func constraintOf(req *appliance.Request) *constraint.Constraint {
	if req.Constraint == nil {
		req.Constraint = &constraint.Constraint{}
	}
	return req.Constraint
}

// ollamaFormat applies Ollama's format: "json" or a JSON schema.
func ollamaFormat(req *appliance.Request, format json.RawMessage) {
	if len(format) > 0 {
		constraintOf(req).Format = format
	}
}

// openaiResponseFormat applies OpenAI's response_format: text, json_object
// or json_schema ({"name", "schema", "strict"}; enforced either way).
func openaiResponseFormat(req *appliance.Request, raw json.RawMessage) error {
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
		constraintOf(req).JSON = true
		return nil
	case "json_schema":
		if rf.JSONSchema == nil || len(rf.JSONSchema.Schema) == 0 {
			return badf("response_format: json_schema needs json_schema.schema")
		}
		c := constraintOf(req)
		c.Schema, c.SchemaField = rf.JSONSchema.Schema, "response_format.json_schema.schema"
		return nil
	}
	return badf("response_format type %q: want text, json_object or json_schema", rf.Type)
}

// toolConstraint offers the tools' calls to the constraint: with
// tool_choice "required" or a named function the whole answer is calls
// in the model's own syntax; with "auto" (or none given) and a model
// whose calls have an opening, a lazy grammar constrains each call from
// its opening on (constraint.Constraint's Tools). With req.OneToolCall
// the grammars allow one call.
func toolConstraint(req *appliance.Request, tools []json.RawMessage, choice json.RawMessage) {
	if len(tools) == 0 && len(choice) == 0 {
		return
	}
	c := constraintOf(req)
	c.Tools, c.ToolChoice, c.OneCall = tools, choice, req.OneToolCall
}
