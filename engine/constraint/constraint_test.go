package constraint

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/geisten/geist/engine/dialect"
	"github.com/geisten/geist/engine/grammar"
)

const tools = `[{"type":"function","function":{"name":"HassTurnOn","parameters":{"type":"object","properties":{"name":{"type":"string"}}}}}]`

func toolList(t *testing.T) []json.RawMessage {
	t.Helper()
	var l []json.RawMessage
	if err := json.Unmarshal([]byte(tools), &l); err != nil {
		t.Fatal(err)
	}
	return l
}

// TestCompile: each field compiles to the grammar the front ends built
// themselves before (the same text), with its trigger and check, and
// what cannot be enforced is refused in the words the front ends used.
func TestCompile(t *testing.T) {
	ctx := context.Background()
	tagged, _ := dialect.ByName("tagged")
	lazy, trigger, err := tagged.Grammar(toolList(t), "", true, false)
	if err != nil {
		t.Fatal(err)
	}
	forced, _, err := tagged.Grammar(toolList(t), "HassTurnOn", false, true)
	if err != nil {
		t.Fatal(err)
	}
	schema := json.RawMessage(`{"type":"object","properties":{"a":{"type":"integer"}},"required":["a"]}`)
	fromSchema, err := grammar.FromSchema(schema)
	if err != nil {
		t.Fatal(err)
	}
	oneOf := json.RawMessage(`{"oneOf": [{"type": "integer"}, {"type": "number"}]}`)
	fromOneOf, err := grammar.FromSchema(oneOf)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name     string
		c        *Constraint
		src      string // the grammar's text, "" for none
		trigger  string
		check    bool
		err      string
		nilOut   bool
		dialectD dialect.Dialect
	}{
		{name: "empty", c: &Constraint{}, nilOut: true},
		{name: "format null", c: &Constraint{Format: json.RawMessage(`null`)}, nilOut: true},
		{name: "format json", c: &Constraint{Format: json.RawMessage(`"json"`)}, src: grammar.AnyJSON()},
		{name: "format schema", c: &Constraint{Format: schema}, src: fromSchema},
		{name: "format oneOf", c: &Constraint{Format: oneOf}, src: fromOneOf, check: true},
		{name: "format yaml", c: &Constraint{Format: json.RawMessage(`"yaml"`)}, err: `format "yaml"`},
		{name: "schema", c: &Constraint{Schema: schema, SchemaField: "response_format.json_schema.schema"}, src: fromSchema},
		{name: "schema refused", c: &Constraint{Schema: json.RawMessage(`{"not":{}}`), SchemaField: "response_format.json_schema.schema"}, err: `response_format.json_schema.schema: `},
		{name: "json object", c: &Constraint{JSON: true}, src: grammar.AnyJSON()},
		{name: "gbnf", c: &Constraint{GBNF: `root ::= "yes" | "no"`}, src: `root ::= "yes" | "no"`},
		{name: "gbnf refused", c: &Constraint{GBNF: `root ::= (`}, err: "grammar"},
		{name: "tools auto", c: &Constraint{Tools: toolList(t)}, src: lazy, trigger: trigger, dialectD: tagged},
		{name: "tools none", c: &Constraint{Tools: toolList(t), ToolChoice: json.RawMessage(`"none"`)}, nilOut: true, dialectD: tagged},
		{name: "tools auto with a format", c: &Constraint{Tools: toolList(t), JSON: true}, src: grammar.AnyJSON(), dialectD: tagged},
		{name: "tools named, one", c: &Constraint{Tools: toolList(t), ToolChoice: json.RawMessage(`{"type":"function","function":{"name":"HassTurnOn"}}`), OneCall: true}, src: forced, dialectD: tagged},
		{name: "tools named unknown", c: &Constraint{Tools: toolList(t), ToolChoice: json.RawMessage(`{"type":"function","function":{"name":"Nope"}}`)}, err: "Nope", dialectD: tagged},
		{name: "required and a format", c: &Constraint{Tools: toolList(t), ToolChoice: json.RawMessage(`"required"`), JSON: true}, err: `tool_choice "required" and a response format cannot both be enforced`},
		{name: "required without tools", c: &Constraint{ToolChoice: json.RawMessage(`"required"`)}, err: `tool_choice "required" without tools`},
		{name: "bad choice", c: &Constraint{Tools: toolList(t), ToolChoice: json.RawMessage(`"sometimes"`)}, err: `tool_choice "sometimes": want none, auto, required or a function`},
		{name: "bad named choice", c: &Constraint{Tools: toolList(t), ToolChoice: json.RawMessage(`{"type":"function"}`)}, err: `tool_choice: want none, auto, required or {"type": "function"`},
	} {
		out, err := c.c.Compile(ctx, c.dialectD)
		switch {
		case c.err != "":
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s: %v, want an error with %q", c.name, err, c.err)
			}
		case err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.nilOut:
			if out != nil {
				t.Errorf("%s: %+v, want nothing to enforce", c.name, out)
			}
		case out == nil || out.Grammar == nil:
			t.Errorf("%s: nothing compiled", c.name)
		case out.Source != c.src || out.Trigger != c.trigger || (out.Check != nil) != c.check:
			t.Errorf("%s: source %.80q trigger %q check %v, want %.80q %q %v", c.name, out.Source, out.Trigger, out.Check != nil, c.src, c.trigger, c.check)
		}
	}
}

// TestCompileOnce: a constraint compiled for a dialect is kept (the core
// finds an MQTT ask's format compiled by its contract); tools compiled
// for another dialect are compiled again.
func TestCompileOnce(t *testing.T) {
	ctx := context.Background()
	c := &Constraint{Format: json.RawMessage(`{"type":"boolean"}`)}
	a, err := c.Compile(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	tagged, _ := dialect.ByName("tagged")
	if b, err := c.Compile(ctx, tagged); err != nil || b != a {
		t.Errorf("a format compiled again for another dialect: %p %p %v", a, b, err)
	}
	c = &Constraint{Tools: toolList(t), ToolChoice: json.RawMessage(`"required"`)}
	a, err = c.Compile(ctx, tagged)
	if err != nil {
		t.Fatal(err)
	}
	lfm2, ok := dialect.ByName("lfm2")
	if !ok {
		t.Fatal("no lfm2 dialect")
	}
	b, err := c.Compile(ctx, lfm2)
	if err != nil || b == a || b.Source == a.Source {
		t.Errorf("tools compiled for tagged, then lfm2: the same grammar (%v)", err)
	}
}

// TestCompileCancelled: a compile ends with its context.
func TestCompileCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	// A grammar not compiled before (the parse cache would answer).
	c := &Constraint{GBNF: `root ::= "cancelled" [0-9]+ "compile"`}
	if _, err := c.Compile(ctx, nil); !errors.Is(err, context.Canceled) {
		t.Errorf("%v, want context.Canceled", err)
	}
}
