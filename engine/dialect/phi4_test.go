package dialect

import "testing"

// Phi-4-mini's list of calls between its tool tokens.

// TestPhi4Dialect: its name, what the registry finds it by, the tokens
// that must render and its thinking marks.
func TestPhi4Dialect(t *testing.T) {
	t.Parallel()
	checkDialect(t, Phi4, "phi4", []string{"<|tool|>{{ message.tools }}<|/tool|>", "<|tool_call|>[...]<|/tool_call|>"}, []string{"<|tool_call|>", "<|/tool_call|>"}, ThinkTags)
}

// TestPhi4ToolParser: answers in Phi4's form, whole and in pieces.
func TestPhi4ToolParser(t *testing.T) {
	t.Parallel()
	checkParser(t, Phi4, []parserCase{
		{"phi4 list", "<|tool_call|>[{\"name\": \"HassTurnOn\", \"arguments\": {\"name\": \"Kitchen\"}}, {\"name\": \"get_weather\", \"arguments\": {\"city\": \"Köln\"}}]<|/tool_call|>", "",
			[]ToolCall{call("HassTurnOn", `{"name": "Kitchen"}`), call("get_weather", `{"city": "Köln"}`)}},
		{"phi4 one object after text", "Sure. <|tool_call|>{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}<|/tool_call|>", "Sure.", []ToolCall{call("get_weather", `{"city": "Paris"}`)}},
		{"phi4 unclosed at the end", "<|tool_call|>[{\"name\": \"HassTurnOn\", \"arguments\": {}}]", "", []ToolCall{call("HassTurnOn", `{}`)}},
		{"phi4 malformed list is content", "<|tool_call|>[{\"name\": \"HassTurnOn\", \"arguments\": {}}, 3]<|/tool_call|>", "<|tool_call|>[{\"name\": \"HassTurnOn\", \"arguments\": {}}, 3]<|/tool_call|>", nil},
		{"phi4 empty list is content", "<|tool_call|>[]<|/tool_call|>", "<|tool_call|>[]<|/tool_call|>", nil},
		{"phi4 text stays", "It is <|sunny|> today.", "It is <|sunny|> today.", nil},
	})
}

// TestPhi4Grammar: what the grammar of calls in Phi4's form matches.
func TestPhi4Grammar(t *testing.T) {
	t.Parallel()
	checkGrammar(t, Phi4, grammarTools, []grammarCase{
		{"", false, []string{`<|tool_call|>[{"name": "HassTurnOn", "arguments": {}}]<|/tool_call|>`, `<|tool_call|>[{"name": "HassTurnOn", "arguments": {}}, {"name": "HassLightSet", "arguments": {"brightness": 7}}]<|/tool_call|>`},
			[]string{`<|tool_call|>[{"name": "HassTurnOn", "arguments": {}}]`, `[{"name": "HassTurnOn", "arguments": {}}]<|/tool_call|>`, `<|tool_call|>[]<|/tool_call|>`, `<|tool_call|>[{"name": "HassLightSet", "arguments": {}}]<|/tool_call|>`}},
		{"HassLightSet", false, []string{`<|tool_call|>[{"name": "HassLightSet", "arguments": {"brightness": 0}}]<|/tool_call|>`}, []string{`<|tool_call|>[{"name": "HassTurnOn", "arguments": {}}]<|/tool_call|>`}},
		{"", true, []string{`[{"name": "HassTurnOn", "arguments": {}}]<|/tool_call|>`}, []string{`<|tool_call|>[{"name": "HassTurnOn", "arguments": {}}]<|/tool_call|>`, `[{"name": "HassTurnOn", "arguments": {}}]`}},
	})
}
