package dialect

import "testing"

// Llama 3's bare JSON calls.

// TestLlamaDialect: its name, what the registry finds it by, the tokens
// that must render and its thinking marks.
func TestLlamaDialect(t *testing.T) {
	t.Parallel()
	checkDialect(t, Llama, "json", []string{"{%- if message.role == 'ipython' %}", "<|python_tag|>"}, []string(nil), ThinkTags)
}

// TestLlamaToolParser: answers in Llama's form, whole and in pieces.
func TestLlamaToolParser(t *testing.T) {
	t.Parallel()
	checkParser(t, Llama, []parserCase{
		{"llama json", "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}", "", []ToolCall{call("get_weather", `{"city": "Paris"}`)}},
		{"llama python tag, two", "<|python_tag|>{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}; {\"name\": \"HassTurnOn\", \"parameters\": {}}", "",
			[]ToolCall{call("get_weather", `{"city": "Paris"}`), call("HassTurnOn", `{}`)}},
		{"llama unknown tool is content", "{\"name\": \"launch\", \"parameters\": {}}", "{\"name\": \"launch\", \"parameters\": {}}", nil},
		{"llama malformed is content", "{\"name\": \"get_weather\", \"parameters\": {\"city\": ", "{\"name\": \"get_weather\", \"parameters\": {\"city\": ", nil},
		{"llama text", "It is sunny in Paris.", "It is sunny in Paris.", nil},
	})
}

// TestLlamaGrammar: what the grammar of calls in Llama's form matches.
func TestLlamaGrammar(t *testing.T) {
	t.Parallel()
	checkGrammar(t, Llama, grammarTools, []grammarCase{
		{"", true, []string{`: "HassLightSet", "parameters": {"brightness": 5}}`, ` : "HassTurnOn" , "parameters": {}}`}, []string{`: "HassTurnOn"}`, `{"name": "HassTurnOn", "parameters": {}}`}},
		{"HassLightSet", false, []string{`{"name": "HassLightSet", "parameters": {"brightness": 5}}`}, []string{`{"name": "HassTurnOn", "parameters": {}}`}},
	})
}
