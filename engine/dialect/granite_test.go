package dialect

import "testing"

// Granite 3's list of calls to the end of the answer (Granite 4.0-H files
// serve Granite 3.3's template).

// TestGraniteDialect: its name, what the registry finds it by, the tokens
// that must render and its thinking marks.
func TestGraniteDialect(t *testing.T) {
	t.Parallel()
	checkDialect(t, Granite, "granite", []string{"<|start_of_role|>assistant<|end_of_role|><|tool_call|>"}, []string{"<|tool_call|>"}, ThinkTags)
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
	checkGrammar(t, Granite, grammarTools, []grammarCase{
		{"", false, []string{`<|tool_call|>[{"name": "HassTurnOn", "arguments": {"area": "hall"}}]`}, []string{`<|tool_call|>[{"name": "HassTurnOn", "arguments": {}}]<|/tool_call|>`}},
		{"", true, []string{`[{"name": "HassTurnOn", "arguments": {}}]`}, []string{`<|tool_call|>[{"name": "HassTurnOn", "arguments": {}}]`}},
	})
}
