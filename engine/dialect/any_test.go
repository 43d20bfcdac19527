package dialect

import "testing"

// Any: no family shows; the tagged and the JSON forms are both read.

// TestAnyDialect: its name, what the registry finds it by, the tokens
// that must render and its thinking marks.
func TestAnyDialect(t *testing.T) {
	t.Parallel()
	checkDialect(t, Any, "any", []string{"{{ messages }}", ""}, []string{"<tool_call>", "</tool_call>"}, ThinkTags)
}

// TestAnyToolParser: answers in Any's form, whole and in pieces.
func TestAnyToolParser(t *testing.T) {
	t.Parallel()
	checkParser(t, Any, []parserCase{
		{"json answer, not a call", "{\"age\": 22}", "{\"age\": 22}", nil},
		{"any: tagged", "ok <tool_call>{\"name\": \"x\", \"arguments\": {}}</tool_call>", "ok", []ToolCall{call("x", `{}`)}},
	})
}

// TestAnyGrammar: what the grammar of calls in Any's form matches.
func TestAnyGrammar(t *testing.T) {
	t.Parallel()
	checkGrammar(t, Any, grammarTools, []grammarCase{
		{"", false, []string{`{"name": "HassTurnOn", "arguments": {"name": "lamp"}}`}, []string{`{"name": "HassTurnOn"}`}},
	})
}
