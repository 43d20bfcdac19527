package dialect

import "testing"

// Any: no family shows; the tagged and the JSON forms are both read.

// TestAnyDialect: its name, what the registry finds it by, the tokens
// that must render and its thinking marks.
func TestAnyDialect(t *testing.T) {
	t.Parallel()
	if got, ok := ByName("any"); !ok || got != Any || Any.String() != "any" {
		t.Errorf("ByName(any): %v %v", got, ok)
	}
	for _, src := range []string{"{{ messages }}", ""} {
		if got := Detect(src); got != Any {
			t.Errorf("Detect(%q): %v, want any", src, got)
		}
	}
	if got, want := Any.ToolTokens(), []string{"<tool_call>", "</tool_call>"}; !equalStrings(got, want) {
		t.Errorf("ToolTokens %q, want %q", got, want)
	}
	if Any.ThinkMarks() != ThinkTags || Any.ThinkTokens() != nil {
		t.Errorf("thinking %q %q", Any.ThinkMarks(), Any.ThinkTokens())
	}
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
	checkGrammar(t, Any, []grammarCase{
		{"", false, []string{`{"name": "HassTurnOn", "arguments": {"name": "lamp"}}`}, []string{`{"name": "HassTurnOn"}`}},
	})
}
