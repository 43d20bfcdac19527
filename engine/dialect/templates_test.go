package dialect_test

// Each family's template writes (and detects) what its dialect reads:
// the zoo's templates rendered by engine/chat.

import (
	"encoding/json"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/geisten/geist/engine/chat"
	"github.com/geisten/geist/engine/dialect"
	"github.com/geisten/geist/engine/grammar"
	"github.com/geisten/geist/engine/zoo"
)

// TestThinkMarks: the marks and their control tokens follow the
// template's text: Gemma 4's thought channel for its template, <think>
// for Qwen 3's, SmolLM3's and a template without either.
func TestThinkMarks(t *testing.T) {
	t.Parallel()
	for name, want := range map[string]chat.ThinkMarks{
		"google-gemma-4-31B-it":    chat.GemmaThought,
		"Qwen-Qwen3-0.6B":          chat.ThinkTags,
		"HuggingFaceTB-SmolLM3-3B": chat.ThinkTags,
		"google-gemma-3-1b-it":     chat.ThinkTags,
	} {
		tmpl := compileGolden(t, name)
		if got := tmpl.ThinkMarks(); got != want {
			t.Errorf("%s: chat.ThinkMarks %q, want %q", name, got, want)
		}
		tokens := tmpl.ThinkTokens()
		if want == chat.GemmaThought && (len(tokens) != 2 || tokens[0] != "<|channel>" || tokens[1] != "<channel|>") || want != chat.GemmaThought && tokens != nil {
			t.Errorf("%s: ThinkTokens %q", name, tokens)
		}
	}
}

// compileGolden compiles the zoo's template of that name.
func compileGolden(t *testing.T, name string) *chat.Template {
	t.Helper()
	raw, err := os.ReadFile(zoo.Path(t, "golden", "chat-templates.json"))
	if err != nil {
		t.Fatal(err)
	}
	var g struct {
		Templates map[string]string `json:"templates"`
	}
	if err := json.Unmarshal(raw, &g); err != nil {
		t.Fatal(err)
	}
	src, ok := g.Templates[name]
	if !ok {
		t.Fatalf("no template %s", name)
	}
	tmpl, err := chat.Compile(src)
	if err != nil {
		t.Fatal(err)
	}
	return tmpl
}

// TestGemma4ThinkingRender: Gemma 4's template thinks with <|think|> in
// its system turn when enable_thinking is on (the default here, as in
// llama.cpp), and off opens the model's turn with an empty thought
// channel; an earlier answer is rendered without its thought, also when
// a client sends it back with the channel in its content (the template's
// strip_thinking), which the ThinkSplitter then leaves out of a new
// answer's content.
func TestGemma4ThinkingRender(t *testing.T) {
	t.Parallel()
	tmpl := compileGolden(t, "google-gemma-4-31B-it")
	if !tmpl.SupportsThinking() {
		t.Fatal("no thinking switch")
	}
	msgs := []chat.Message{
		{Role: "user", Content: "What is 2 + 2?"},
		{Role: "assistant", Content: "<|channel>thought\nadd them<channel|>It is 4."},
		{Role: "user", Content: "And 3 + 3?"},
	}
	history := "<|turn>user\nWhat is 2 + 2?<turn|>\n<|turn>model\nIt is 4.<turn|>\n<|turn>user\nAnd 3 + 3?<turn|>\n"
	for _, c := range []struct {
		extra map[string]any
		want  string
	}{
		{nil, "<|turn>system\n<|think|>\n<turn|>\n" + history + "<|turn>model\n"},
		{map[string]any{"enable_thinking": true}, "<|turn>system\n<|think|>\n<turn|>\n" + history + "<|turn>model\n"},
		{map[string]any{"enable_thinking": false}, history + "<|turn>model\n<|channel>thought\n<channel|>"},
	} {
		out, err := tmpl.Render(msgs, chat.Options{AddGenerationPrompt: true, Extra: c.extra})
		if err != nil {
			t.Fatal(err)
		}
		if out != c.want {
			t.Errorf("enable_thinking %v:\n got %q\nwant %q", c.extra, out, c.want)
		}
	}
}

// TestGemma4CallsRoundTrip: the calls Gemma 4's own template writes for
// an assistant message's tool_calls (what its model learned to write) parse
// back to the arguments the message had.
func TestGemma4CallsRoundTrip(t *testing.T) {
	t.Parallel()
	tmpl := compileGolden(t, "google-gemma-4-31B-it")
	if tmpl.ToolFormat() != chat.ToolsGemma4 {
		t.Fatalf("ToolFormat %v", tmpl.ToolFormat())
	}
	if got, want := tmpl.ToolTokens(), []string{"<|tool_call>", "<tool_call|>", `<|"|>`}; !reflect.DeepEqual(got, want) {
		t.Errorf("ToolTokens %q, want %q", got, want)
	}
	args := []string{
		`{}`,
		`{"name": "Kitchen light", "brightness": 40}`,
		`{"text": "a \"quote\", {braces}: [x] \\ and\nlines <tool_call|>", "ok": true, "no": false}`,
		`{"n": -3, "f": 0.25, "big": 12345678901, "list": [1, "two", [3], {"k": "v"}], "obj": {"inner": {"deep": ["x"]}, "e": []}}`,
		`{"city": "Köln ☀", "empty": ""}`,
	}
	tools := []json.RawMessage{json.RawMessage(`{"type": "function", "function": {"name": "f", "description": "d", "parameters": {"type": "object", "properties": {}}}}`)}
	for _, a := range args {
		msgs := []chat.Message{
			{Role: "user", Content: "do it"},
			{Role: "assistant", ToolCalls: []chat.ToolCall{{ID: "c1", Name: "f", Arguments: json.RawMessage(a)}, {ID: "c2", Name: "g_2", Arguments: json.RawMessage(a)}}},
		}
		out, err := tmpl.Render(msgs, chat.Options{Tools: tools})
		if err != nil {
			t.Fatalf("%s: %v", a, err)
		}
		i := strings.Index(out, "<|tool_call>")
		if i < 0 {
			t.Fatalf("%s: no call rendered: %q", a, out)
		}
		text := out[i:]
		if j := strings.LastIndex(text, "<tool_call|>"); j >= 0 {
			text = text[:j+len("<tool_call|>")]
		}
		for _, ps := range dialect.Splits(text) {
			content, calls := dialect.ParseAll(chat.ToolsGemma4, []string{"f", "g_2"}, ps)
			if content != "" || len(calls) != 2 {
				t.Fatalf("%s: the template's %q parsed to %q %s", a, text, content, dialect.FmtCalls(calls))
			}
			for k, name := range []string{"f", "g_2"} {
				if calls[k].Name != name || !dialect.JSONEqual(t, calls[k].Arguments, []byte(a)) {
					t.Errorf("%s: the template's %q parsed to %s%s", a, text, calls[k].Name, calls[k].Arguments)
				}
			}
		}
	}
}

// TestTemplateLFM2: chat.ToolsLFM2's templates (chat.ToolsLFM2.5's "List of tools: [", chat.ToolsLFM2's
// tool list tokens) give chat.ToolsLFM2, whose tokens are preserved.
func TestTemplateLFM2(t *testing.T) {
	t.Parallel()
	for _, src := range []string{
		`{%- if tools -%}{{ "List of tools: [" }}{% for t in tools %}{{ t | tojson }}{% endfor %}]{%- endif -%}{% for m in messages %}{{ m.content }}{% endfor %}`,
		`{%- if tools -%}{{ "List of tools: <|tool_list_start|>[" }}{% for t in tools %}{{ t | tojson }}{% endfor %}]<|tool_list_end|>{%- endif -%}{% for m in messages %}{{ m.content }}{% endfor %}`,
	} {
		tmpl, err := chat.Compile(src)
		if err != nil {
			t.Fatal(err)
		}
		if f := tmpl.ToolFormat(); f != chat.ToolsLFM2 || f.String() != "lfm2" {
			t.Errorf("ToolFormat %v, want lfm2", f)
		}
		if got := tmpl.ToolTokens(); !reflect.DeepEqual(got, []string{"<|tool_call_start|>", "<|tool_call_end|>"}) {
			t.Errorf("ToolTokens %q", got)
		}
	}
}

// TestXMLToolCallsRoundTrip: Qwen3.5's template has the qwen35 dialect
// (its XML-like calls, no longer the tagged JSON one), and a call it
// writes into the history parses back to the same call.
func TestXMLToolCallsRoundTrip(t *testing.T) {
	t.Parallel()
	tmpl := compileGolden(t, "Qwen3.5-4B")
	if tmpl.ToolFormat() != chat.ToolsXML || !tmpl.SupportsTools() || !tmpl.SupportsThinking() {
		t.Fatalf("format %v, tools %v, thinking %v", tmpl.ToolFormat(), tmpl.SupportsTools(), tmpl.SupportsThinking())
	}
	args := `{"name":"kitchen light","brightness":50,"colors":["red","blue"]}`
	msgs := []chat.Message{
		{Role: "user", Content: "Turn on the kitchen light."},
		{Role: "assistant", ToolCalls: []chat.ToolCall{{Name: "HassTurnOn", Arguments: json.RawMessage(args)}}},
		{Role: "tool", Content: "done", ToolName: "HassTurnOn"},
	}
	out, err := tmpl.Render(msgs, chat.Options{})
	if err != nil {
		t.Fatal(err)
	}
	i := strings.Index(out, "<tool_call>")
	j := strings.Index(out, "</tool_call>")
	if i < 0 || j < i {
		t.Fatalf("no call rendered:\n%s", out)
	}
	p := chat.NewToolParser(tmpl.ToolFormat(), []string{"HassTurnOn"})
	_, k1 := p.Add(out[i : j+len("</tool_call>")])
	_, k2 := p.Flush()
	calls := append(k1, k2...)
	if len(calls) != 1 || calls[0].Name != "HassTurnOn" {
		t.Fatalf("parsed %+v from\n%s", calls, out[i:j])
	}
	var got, want any
	json.Unmarshal(calls[0].Arguments, &got)
	json.Unmarshal([]byte(args), &want)
	if g, w := dialect.MustJSON(got), dialect.MustJSON(want); g != w {
		t.Errorf("arguments %s, want %s", g, w)
	}
}

// TestQwen35TemplateCallsGrammar: the calls Qwen3.5's template writes
// for an assistant message's tool_calls (strings raw, True/False, None,
// numbers, tojson's lists and objects) are what the qwen35 grammar of
// the tools accepts, forced and lazy, and they parse back (with the
// tools' schemas) to the arguments the message had.
func TestQwen35TemplateCallsGrammar(t *testing.T) {
	t.Parallel()
	tmpl := compileGolden(t, "Qwen3.5-4B")
	tools := []json.RawMessage{
		json.RawMessage(`{"type": "function", "function": {"name": "set", "parameters": {"type": "object", "properties": {
			"name": {"type": "string"}, "brightness": {"type": "integer", "minimum": 0, "maximum": 100}, "ratio": {"type": "number"},
			"on": {"type": "boolean"}, "area": {"type": ["string", "null"]}, "mode": {"enum": ["eco", "max"]},
			"colors": {"type": "array", "items": {"type": "string"}}, "at": {"type": "object", "properties": {"floor": {"type": "integer"}}}},
			"required": ["name", "brightness"]}}}`),
		json.RawMessage(`{"type": "function", "function": {"name": "ping", "parameters": {"type": "object", "properties": {}}}}`),
	}
	argsList := []string{
		`{"name": "kitchen light", "brightness": 50, "ratio": 0.25, "on": true, "area": "hall", "mode": "eco", "colors": ["red", "blue"], "at": {"floor": 1}}`,
		`{"name": "50", "brightness": 0, "on": false, "area": "two\nlines <b>", "colors": []}`,
		`{"name": "True", "brightness": 100}`,
	}
	v := grammar.NewVocab([][]byte{[]byte("x")}, nil)
	for _, args := range argsList {
		msgs := []chat.Message{
			{Role: "user", Content: "Do it."},
			{Role: "assistant", ToolCalls: []chat.ToolCall{{Name: "set", Arguments: json.RawMessage(args)}, {Name: "ping", Arguments: json.RawMessage(`{}`)}}},
			{Role: "tool", Content: "done", ToolName: "set"},
		}
		out, err := tmpl.Render(msgs, chat.Options{Tools: tools})
		if err != nil {
			t.Fatal(err)
		}
		// The assistant's turn (the system message shows an example).
		a := strings.Index(out, "<|im_start|>assistant\n")
		i := strings.Index(out[max(a, 0):], "<tool_call>\n<function=") + max(a, 0)
		j := strings.LastIndex(out, "</tool_call>")
		if a < 0 || i < a || j < i {
			t.Fatalf("no call rendered:\n%s", out)
		}
		text := out[i : j+len("</tool_call>")]
		for _, lazy := range []bool{false, true} {
			src, trigger, err := dialect.Qwen35.Grammar(tools, "", lazy, false)
			if err != nil {
				t.Fatal(err)
			}
			g, err := grammar.Parse(src)
			if err != nil {
				t.Fatal(err)
			}
			m := grammar.Bind(g, v).NewMatcher()
			if s := strings.TrimPrefix(text, trigger); !m.AcceptBytes([]byte(s)) || !m.CanEnd() {
				t.Errorf("lazy %v: the grammar refuses the template's %q", lazy, s)
			}
		}
		p := dialect.NewToolParser(dialect.Qwen35, []string{"set", "ping"})
		p.Schemas(tools)
		content, k1 := p.Add(text)
		rest, k2 := p.Flush()
		calls := append(k1, k2...)
		if content+rest != "" || len(calls) != 2 || calls[0].Name != "set" || calls[1].Name != "ping" {
			t.Fatalf("%q parsed to %q %s", text, content+rest, dialect.FmtCalls(calls))
		}
		if !dialect.JSONEqual(t, calls[0].Arguments, []byte(args)) {
			t.Errorf("the template's %q parsed to %s, want %s", text, calls[0].Arguments, args)
		}
	}
}
