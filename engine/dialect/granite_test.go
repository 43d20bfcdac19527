package dialect

import "testing"

// Granite 3's list of calls to the end of the answer (Granite 4.0-H files
// serve Granite 3.3's template).

// TestGraniteDialect: its name, what the registry finds it by, the tokens
// that must render and its thinking marks.
func TestGraniteDialect(t *testing.T) {
	t.Parallel()
	if got, ok := ByName("granite"); !ok || got != Granite || Granite.String() != "granite" {
		t.Errorf("ByName(granite): %v %v", got, ok)
	}
	for _, src := range []string{"<|start_of_role|>assistant<|end_of_role|><|tool_call|>"} {
		if got := Detect(src); got != Granite {
			t.Errorf("Detect(%q): %v, want granite", src, got)
		}
	}
	if got, want := Granite.ToolTokens(), []string{"<|tool_call|>"}; !equalStrings(got, want) {
		t.Errorf("ToolTokens %q, want %q", got, want)
	}
	if Granite.ThinkMarks() != ThinkTags || Granite.ThinkTokens() != nil {
		t.Errorf("thinking %q %q", Granite.ThinkMarks(), Granite.ThinkTokens())
	}
}

// TestGraniteToolParser: answers in Granite's form, whole and in pieces.
func TestGraniteToolParser(t *testing.T) {
	t.Parallel()
	checkParser(t, Granite, []parserCase{
		{"granite list to the end", "<|tool_call|>[{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}]", "", []ToolCall{call("get_weather", `{"city": "Paris"}`)}},
		{"granite text", "No call here.", "No call here.", nil},
	})
}

// TestGraniteGrammar: what the grammar of calls in Granite's form matches.
func TestGraniteGrammar(t *testing.T) {
	t.Parallel()
	checkGrammar(t, Granite, []grammarCase{
		{"", false, []string{`<|tool_call|>[{"name": "HassTurnOn", "arguments": {"area": "hall"}}]`}, []string{`<|tool_call|>[{"name": "HassTurnOn", "arguments": {}}]<|/tool_call|>`}},
		{"", true, []string{`[{"name": "HassTurnOn", "arguments": {}}]`}, []string{`<|tool_call|>[{"name": "HassTurnOn", "arguments": {}}]`}},
	})
}
