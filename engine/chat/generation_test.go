package chat

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// smolLike is a template written for these tests in the constructs of
// SmolLM3's own chat template (HuggingFaceTB/SmolLM3-3B): the thinking
// mode from enable_thinking and from /think or /no_think in the system
// message, which loses those words; strftime_now; xml_tools gathered in a
// namespace, each with | string; content.lstrip("\n"); and the assistant
// turns inside {% generation %} ... {% endgeneration %}, the tags
// transformers reads for its assistant masks.
const smolLike = `{#- SmolLM3's constructs, written for geist's tests -#}
{%- if enable_thinking is not defined -%}
  {%- set enable_thinking = true -%}
{%- endif -%}
{%- set mode = "/think" if enable_thinking else "/no_think" -%}
{{- "<|im_start|>system\n" -}}
{%- if messages[0].role == "system" -%}
  {%- set sys = messages[0].content -%}
  {%- if "/no_think" in sys -%}{%- set mode = "/no_think" -%}
  {%- elif "/think" in sys -%}{%- set mode = "/think" -%}{%- endif -%}
  {%- set sys = sys.replace("/no_think", "").replace("/think", "").rstrip() -%}
{%- endif -%}
{%- if "/system_override" in sys -%}
  {{- sys.replace("/system_override", "").rstrip() ~ "<|im_end|>\n" -}}
{%- else -%}
  {{- "mode: " + mode + "\ndate: " ~ strftime_now("%d %B %Y") ~ "\n" -}}
  {{- (sys if sys else "(default instructions)") + "\n" -}}
  {%- if xml_tools -%}
    {%- set ns = namespace(text="<tools>\n") -%}
    {%- for tool in xml_tools[:] -%}
      {%- set ns.text = ns.text ~ (tool | string) ~ "\n" -%}
    {%- endfor -%}
    {{- ns.text + "</tools>\n" -}}
  {%- endif -%}
  {{- "<|im_end|>\n" -}}
{%- endif -%}
{%- for message in messages -%}
  {%- set content = message.content if message.content is string else "" -%}
  {%- if message.role == "user" or message.role == "tool" -%}
    {{ "<|im_start|>user\n" + content + "<|im_end|>\n" }}
  {%- elif message.role == "assistant" -%}
    {% generation %}
    {%- if mode == "/think" -%}
      {{ "<|im_start|>assistant\n" + content.lstrip("\n") + "<|im_end|>\n" }}
    {%- else -%}
      {{ "<|im_start|>assistant\n<think>\n\n</think>\n" + content.lstrip("\n") + "<|im_end|>\n" }}
    {%- endif -%}
    {% endgeneration %}
  {%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}
  {{ "<|im_start|>assistant\n" + ("" if mode == "/think" else "<think>\n\n</think>\n") }}
{%- endif -%}
`

// generationSpacing has generation tags with and without whitespace
// control, empty, inside a loop (reading its loop variable) and holding a
// namespace assignment, under trim_blocks and lstrip_blocks.
const generationSpacing = `{% set ns = namespace(n=0) %}
{% for m in messages %}
  {% generation %}
  <{{ m.role }}>{{ m.content }}|{{ loop.index }}
  {% endgeneration %}
{%- generation -%}  -  {%- endgeneration -%}
{% generation %}{% endgeneration %}
 {% generation %}{% set ns.n = ns.n + 1 %}{% endgeneration %}
{% endfor %}
turns: {{ ns.n }}
{% generation %}end{% endgeneration %}
`

// TestGenerationTagsMatchJinja2: templates with {% generation %} blocks
// (SmolLM3's official template puts its assistant turns in one) compile,
// and render byte for byte as Python's jinja2 with transformers'
// generation tags renders them (render.py): the block's body unchanged,
// for thinking on and off, /think and /no_think, /system_override, tools
// (as xml_tools), a tool call and its result.
func TestGenerationTagsMatchJinja2(t *testing.T) {
	t.Parallel()
	tool := json.RawMessage(`{"type": "function", "function": {"name": "get_weather", "description": "Get the weather in a city", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}`)
	type genCase struct {
		Name       string            `json:"name"`
		Template   string            `json:"template"`
		Messages   []hfMessage       `json:"messages"`
		Tools      []json.RawMessage `json:"tools,omitempty"`
		GeistTools string            `json:"geist_tools,omitempty"`
		AddGen     bool              `json:"add_generation_prompt"`
		Kwargs     map[string]any    `json:"kwargs,omitempty"`
		Date       string            `json:"date"`
	}
	msg := func(role, content string) hfMessage { return hfMessage{Role: role, Content: content} }
	var call hfMessage
	if err := json.Unmarshal([]byte(`{"role": "assistant", "content": "", "tool_calls": [{"id": "call_1", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]}`), &call); err != nil {
		t.Fatal(err)
	}
	result := msg("tool", "18C, sunny")
	result.Name, result.ToolCallID = "get_weather", "call_1"

	chat := []hfMessage{msg("system", "Be brief."), msg("user", "Hi"), msg("assistant", "\n\nHello."), msg("user", "Bye")}
	cases := []genCase{
		{Name: "system and user", Template: "smol", Messages: chat[:2], AddGen: true},
		{Name: "user only", Template: "smol", Messages: chat[1:2], AddGen: true},
		{Name: "turns, thinking", Template: "smol", Messages: chat},
		{Name: "turns, /no_think", Template: "smol", Messages: append([]hfMessage{msg("system", "Be brief. /no_think")}, chat[1:]...), AddGen: true},
		{Name: "turns, /think over enable_thinking false", Template: "smol", Messages: append([]hfMessage{msg("system", "/think Be brief.")}, chat[1:]...), Kwargs: map[string]any{"enable_thinking": false}, AddGen: true},
		{Name: "enable_thinking false", Template: "smol", Messages: chat[1:], Kwargs: map[string]any{"enable_thinking": false}, AddGen: true},
		{Name: "system_override", Template: "smol", Messages: []hfMessage{msg("system", "Only this. /system_override"), msg("user", "Hi")}, AddGen: true},
		{Name: "tools", Template: "smol", Messages: []hfMessage{msg("user", "Weather in Paris?")}, Tools: []json.RawMessage{tool}, GeistTools: "xml_tools", AddGen: true},
		{Name: "tool call and result", Template: "smol", Messages: []hfMessage{msg("system", "/no_think"), msg("user", "Weather in Paris?"), call, result}, Tools: []json.RawMessage{tool}, GeistTools: "xml_tools", AddGen: true},
		{Name: "spacing", Template: "spacing", Messages: chat},
	}
	for i := range cases {
		cases[i].Date = "2025-07-08"
	}
	raw, err := json.Marshal(cases)
	if err != nil {
		t.Fatal(err)
	}
	templates := map[string]string{"smol": smolLike, "spacing": generationSpacing}
	want := jinja2Render(t, templates, raw)
	if len(want) != len(cases) {
		t.Fatalf("render.py returned %d results for %d cases", len(want), len(cases))
	}
	compiled := map[string]*Template{}
	for name, src := range templates {
		if compiled[name], err = Compile(src); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	if tm := compiled["smol"]; !tm.SupportsTools() || tm.place != placeXMLTools {
		t.Errorf("smol: SupportsTools %v, place %d: want xml_tools", tm.SupportsTools(), tm.place)
	}
	now := time.Date(2025, 7, 8, 12, 0, 0, 0, time.UTC)
	for i, c := range cases {
		msgs := make([]Message, len(c.Messages))
		for j, m := range c.Messages {
			msgs[j] = Message{Role: m.Role, Content: m.Content, ToolName: m.Name, ToolCallID: m.ToolCallID}
			for _, tc := range m.ToolCalls {
				msgs[j].ToolCalls = append(msgs[j].ToolCalls, ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments})
			}
		}
		got, err := compiled[c.Template].Render(msgs, Options{AddGenerationPrompt: c.AddGen, Now: now, Tools: c.Tools, Extra: c.Kwargs})
		switch {
		case want[i].Error != "":
			t.Errorf("%s: jinja2 failed: %s", c.Name, want[i].Error)
		case err != nil:
			t.Errorf("%s: %v", c.Name, err)
		case got != want[i].Prompt:
			t.Errorf("%s: %s", c.Name, firstDiff(got, want[i].Prompt))
		}
	}
}

// TestGenerationSetScope pins the one way the engine's generation blocks
// differ from transformers': a variable set inside one is seen after it,
// as llama.cpp's engine renders it (checked with llama.cpp 0.7.0), where
// transformers' call block would print "outer". No template at hand sets
// a variable there.
func TestGenerationSetScope(t *testing.T) {
	t.Parallel()
	tm, err := Compile(`{% set x = "outer" %}{% generation %}{% set x = "inner" %}{% endgeneration %}{{ x }}`)
	if err != nil {
		t.Fatal(err)
	}
	got, err := tm.Render([]Message{{Role: "user", Content: "hi"}}, Options{})
	if err != nil || got != "inner" {
		t.Errorf("got %q, %v; want %q", got, err, "inner")
	}
}

// TestTemplateLineEnds: a template's CRLF and CR line ends read as LF and
// a final newline is dropped before lexing, as Python's jinja2 (and
// llama.cpp's engine) read a template, so that a template file saved
// with a newline at its end or with Windows line ends renders the same
// prompt there and here.
func TestTemplateLineEnds(t *testing.T) {
	t.Parallel()
	templates := map[string]string{
		"final newline":  "{{ messages[0].content }}\n",
		"two newlines":   "{{ messages[0].content }}\n\n",
		"final CRLF":     "{{ messages[0].content }}\r\n",
		"CRLF and CR":    "{% for m in messages %}\r\n  {{ m.role }}: {{ m.content }}\r\n{% endfor %}\r\nend\rX{{ '\r' }}\n",
		"trimmed blocks": "{%- for m in messages -%}\r\n{{ m.content }}\r\n{%- endfor %}\r\n",
	}
	var names []string
	var cases []map[string]any
	for name := range templates {
		names = append(names, name)
		cases = append(cases, map[string]any{"template": name, "messages": []map[string]string{{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}}})
	}
	raw, err := json.Marshal(cases)
	if err != nil {
		t.Fatal(err)
	}
	want := jinja2Render(t, templates, raw)
	for i, name := range names {
		tm, err := Compile(templates[name])
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		got, err := tm.Render([]Message{{Role: "user", Content: "a"}, {Role: "assistant", Content: "b"}}, Options{})
		switch {
		case want[i].Error != "":
			t.Errorf("%s: jinja2 failed: %s", name, want[i].Error)
		case err != nil:
			t.Errorf("%s: %v", name, err)
		case got != want[i].Prompt:
			t.Errorf("%s: %s", name, firstDiff(got, want[i].Prompt))
		}
		if strings.Contains(got, "\r\n") {
			t.Errorf("%s: CRLF in %q", name, got)
		}
	}
}
