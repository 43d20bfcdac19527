package dialect

import (
	"strings"
	"testing"
)

// Hermes' tagged calls (Qwen 2.5 and 3, SmolLM3, Granite 4 write them;
// Qwen3.5 its XML-like ones between the same tags, qwen35_test.go, which
// this dialect reads too).

// TestHermesDialect: its name, what the registry finds it by, the tokens
// that must render and its thinking marks.
func TestHermesDialect(t *testing.T) {
	t.Parallel()
	checkDialect(t, Hermes, "tagged", []string{"{%- if tools %}<tool_call>\n{\"name\": <function-name>}\n</tool_call>{%- endif %}"}, []string{"<tool_call>", "</tool_call>"}, ThinkTags)
}

// TestHermesToolParser: answers in Hermes's form, whole and in pieces.
func TestHermesToolParser(t *testing.T) {
	t.Parallel()
	checkParser(t, Hermes, []parserCase{
		{"plain", "The light is on.", "The light is on.", nil},
		{"one tagged", "<tool_call>\n{\"name\": \"HassTurnOn\", \"arguments\": {\"name\": \"Kitchen\"}}\n</tool_call>", "",
			[]ToolCall{call("HassTurnOn", `{"name": "Kitchen"}`)}},
		{"two tagged after text", "Sure.\n<tool_call>\n{\"name\": \"HassTurnOn\", \"arguments\": {\"name\": \"Kitchen\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Köln\", \"days\": 2}}\n</tool_call>", "Sure.",
			[]ToolCall{call("HassTurnOn", `{"name": "Kitchen"}`), call("get_weather", `{"city": "Köln", "days": 2}`)}},
		{"malformed tagged", "<tool_call>\n{\"name\": \"HassTurnOn\", \"arguments\": {\"name\": \n</tool_call>", "<tool_call>\n{\"name\": \"HassTurnOn\", \"arguments\": {\"name\": \n</tool_call>", nil},
		{"unclosed tagged", "<tool_call>\n{\"name\": \"HassTurnOn\", \"arguments\": {}}", "", []ToolCall{call("HassTurnOn", `{}`)}},
		{"unclosed broken", "<tool_call>\n{\"name\": \"Has", "<tool_call>\n{\"name\": \"Has", nil},
		{"a lone <", "x < y and <tool", "x < y and <tool", nil},
		{"string arguments", "<tool_call>{\"name\": \"get_weather\", \"arguments\": \"{\\\"city\\\": \\\"Paris\\\"}\"}</tool_call>", "",
			[]ToolCall{call("get_weather", `{"city": "Paris"}`)}},
		{"trailing space kept without calls", "Hello \n", "Hello \n", nil},
	})
}

// TestHermesGrammar: what the grammar of calls in Hermes's form matches.
func TestHermesGrammar(t *testing.T) {
	t.Parallel()
	checkGrammar(t, Hermes, grammarTools, []grammarCase{
		{"", false, []string{`<tool_call>{"name": "HassTurnOn", "arguments": {"area": "kitchen"}}</tool_call>`, "<tool_call>\n{\"name\": \"HassLightSet\", \"arguments\": {\"brightness\": 40}}</tool_call>\n<tool_call>{\"name\": \"HassTurnOn\", \"arguments\": {}}</tool_call>"},
			[]string{`{"name": "HassTurnOn", "arguments": {}}`, `<tool_call>{"name": "Nope", "arguments": {}}</tool_call>`, `<tool_call>{"name": "HassLightSet", "arguments": {"brightness": 101}}</tool_call>`}},
		{"", true, []string{`{"name": "HassTurnOn", "arguments": {}}</tool_call>`}, []string{`<tool_call>{"name": "HassTurnOn", "arguments": {}}</tool_call>`}},
	})
	if _, _, err := Hermes.Grammar(grammarTools, "Missing", false, false); err == nil {
		t.Error("a named tool that is not offered: no error")
	}
}

// TestSmolLM3ToolBlock: the tools stand one a line between <tools> and
// </tools>, as SmolLM3's template writes them (engine/chat's Jinja2
// goldens check the whole prompt).
func TestSmolLM3ToolBlock(t *testing.T) {
	t.Parallel()
	got := SmolLM3ToolBlock([]string{"{'a': 1}", "{'b': 2}"})
	if !strings.Contains(got, "<tools>\n{'a': 1}\n{'b': 2}\n</tools>\n\n") || !strings.HasSuffix(got, "</tool_call>") {
		t.Errorf("got %q", got)
	}
}
