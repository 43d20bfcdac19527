package chat

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/geisten/geist/engine/zoo"
)

// hfMessage is a message in the form Hugging Face transformers documents
// for chat templates (testdata/tools/cases.json).
type hfMessage struct {
	Role      string `json:"role"`
	Content   string `json:"content"`
	ToolCalls []struct {
		ID       string `json:"id"`
		Function struct {
			Name      string          `json:"name"`
			Arguments json.RawMessage `json:"arguments"`
		} `json:"function"`
	} `json:"tool_calls"`
	Name       string `json:"name"`
	ToolCallID string `json:"tool_call_id"`
}

type toolCase struct {
	Name     string            `json:"name"`
	Template string            `json:"template"`
	Messages []hfMessage       `json:"messages"`
	Tools    []json.RawMessage `json:"tools"`
	AddGen   bool              `json:"add_generation_prompt"`
	BOS      string            `json:"bos_token"`
	EOS      string            `json:"eos_token"`
	Date     string            `json:"date"`
}

// jinja2Render renders the cases with Python's jinja2 in the environment
// transformers builds (testdata/tools/render.py); it skips the test when
// python3-jinja2 is missing.
func jinja2Render(t *testing.T, templates map[string]string, cases json.RawMessage) []struct{ Prompt, Error string } {
	t.Helper()
	py := "/usr/bin/python3"
	if err := exec.Command(py, "-c", "import jinja2").Run(); err != nil {
		t.Skipf("%s with jinja2 is needed for the tool-calling goldens (apt-get install python3-jinja2): %v", py, err)
	}
	in, err := json.Marshal(map[string]any{"templates": templates, "cases": cases})
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(py, "testdata/tools/render.py")
	cmd.Stdin = bytes.NewReader(in)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("render.py: %v\n%s", err, stderr.Bytes())
	}
	var res []struct{ Prompt, Error string }
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatal(err)
	}
	return res
}

// TestToolTemplatesMatchJinja2: the Qwen 2.5, Qwen 3 and Llama 3.2 chat
// templates rendered with two tools, tool calls and tool results give
// byte for byte what Python's jinja2 gives the same template and the same
// dicts the way transformers' apply_chat_template renders them (the BOS
// text at the start aside: the tokenizer adds BOS). The goldens are made
// at test time, as the templates are the zoo's (not to be copied here).
func TestToolTemplatesMatchJinja2(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile(zoo.Path(t, "golden", "chat-templates.json"))
	if err != nil {
		t.Fatal(err)
	}
	var zt struct {
		Templates map[string]string `json:"templates"`
	}
	if err := json.Unmarshal(raw, &zt); err != nil {
		t.Fatal(err)
	}
	casesRaw, err := os.ReadFile("testdata/tools/cases.json")
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Cases json.RawMessage `json:"cases"`
	}
	if err := json.Unmarshal(casesRaw, &file); err != nil {
		t.Fatal(err)
	}
	var cases []toolCase
	if err := json.Unmarshal(file.Cases, &cases); err != nil {
		t.Fatal(err)
	}
	// LFM2's templates print no tool_calls: geist writes the calls into
	// the content (tools.go's pyCallsInContent; TestPyCallsInContent checks the text),
	// and jinja2 is given the same content.
	var forJinja []json.RawMessage // the cases, the others' text unchanged (tools keep their key order)
	if err := json.Unmarshal(file.Cases, &forJinja); err != nil {
		t.Fatal(err)
	}
	for i, c := range cases {
		tmpl, err := Compile(zt.Templates[c.Template])
		if err != nil || !tmpl.callsInContent() {
			continue
		}
		var jc map[string]json.RawMessage
		var jmsgs []map[string]json.RawMessage
		if json.Unmarshal(forJinja[i], &jc) != nil || json.Unmarshal(jc["messages"], &jmsgs) != nil {
			t.Fatalf("case %d does not decode", i)
		}
		for j, m := range c.Messages {
			if len(m.ToolCalls) == 0 {
				continue
			}
			var calls []ToolCall
			for _, tc := range m.ToolCalls {
				calls = append(calls, ToolCall{Name: tc.Function.Name, Arguments: tc.Function.Arguments})
			}
			out, err := pyCallsInContent([]Message{{Role: m.Role, Content: m.Content, ToolCalls: calls}})
			if err != nil {
				t.Fatal(err)
			}
			jmsgs[j]["content"], _ = json.Marshal(out[0].Content)
			delete(jmsgs[j], "tool_calls")
		}
		jc["messages"], _ = json.Marshal(jmsgs)
		forJinja[i], _ = json.Marshal(jc)
	}
	jcases, err := json.Marshal(forJinja)
	if err != nil {
		t.Fatal(err)
	}
	want := jinja2Render(t, zt.Templates, jcases)
	if len(want) != len(cases) {
		t.Fatalf("render.py returned %d results for %d cases", len(want), len(cases))
	}
	compiled := map[string]*Template{}
	for i, c := range cases {
		tmpl := compiled[c.Template]
		if tmpl == nil {
			src, ok := zt.Templates[c.Template]
			if !ok {
				t.Fatalf("no template %q in the zoo", c.Template)
			}
			if tmpl, err = Compile(src); err != nil {
				t.Fatalf("%s: %v", c.Template, err)
			}
			compiled[c.Template] = tmpl
			if !tmpl.SupportsTools() {
				t.Errorf("%s: SupportsTools false", c.Template)
			}
		}
		now, err := time.Parse("2006-01-02", c.Date)
		if err != nil {
			t.Fatal(err)
		}
		msgs := make([]Message, len(c.Messages))
		for j, m := range c.Messages {
			msgs[j] = Message{Role: m.Role, Content: m.Content, ToolName: m.Name, ToolCallID: m.ToolCallID}
			for _, tc := range m.ToolCalls {
				args := tc.Function.Arguments
				if strings.Contains(c.Name, "string arguments") {
					// OpenAI's form: the arguments object as a JSON string.
					s, _ := json.Marshal(string(args))
					args = s
				}
				msgs[j].ToolCalls = append(msgs[j].ToolCalls, ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: args})
			}
		}
		got, err := tmpl.Render(msgs, Options{AddGenerationPrompt: c.AddGen, BOS: c.BOS, EOS: c.EOS, Now: now, Tools: c.Tools})
		name := c.Template + ": " + c.Name
		switch w := want[i]; {
		case w.Error != "":
			if err == nil {
				t.Errorf("%s: jinja2 failed (%s), geist rendered %q", name, w.Error, got)
			} else {
				t.Logf("%s: both fail: jinja2 %s; geist %v", name, w.Error, err)
			}
		case err != nil:
			t.Errorf("%s: %v (jinja2 rendered it)", name, err)
		default:
			wantPrompt := strings.TrimPrefix(w.Prompt, c.BOS)
			if got != wantPrompt {
				t.Errorf("%s: %s", name, firstDiff(got, wantPrompt))
			}
		}
	}
}

// TestXMLToolsMatchJinja2: SmolLM3's own template prints each of
// xml_tools with jinja's string filter, Python's str of the dict, which
// this engine prints differently (no repr quoting); geist hands the
// template each tool as that string already (pyRepr). A template written
// here in the same constructs, and tools with quotes, backslashes,
// newlines, non-ASCII, control characters, numbers, booleans and null,
// render byte for byte as jinja2 renders them.
func TestXMLToolsMatchJinja2(t *testing.T) {
	t.Parallel()
	const src = `{%- if xml_tools -%}{%- for tool in xml_tools[:] -%}{{ (tool | string) ~ "\n" }}{%- endfor -%}{%- endif -%}` +
		`{%- for m in messages -%}{{ m.role + ": " + m.content + "\n" }}{%- endfor -%}`
	tools := []json.RawMessage{
		json.RawMessage(`{"type": "function", "function": {"name": "it's", "description": "say \"hi\" \\ ö\n\tx\u0001\u00a0\u2028😀", "parameters": {"type": "object", "properties": {"n": {"type": "integer", "default": 3}, "f": {"type": "number", "maximum": 1e16, "minimum": 0.25, "x": 100.0}, "b": {"type": "boolean", "default": true}, "z": {"default": null}, "both": {"enum": ["a'b\"c", "'", "\""]}}, "required": []}}}`),
		json.RawMessage(`{"name": "bare", "parameters": {}}`),
	}
	cases, _ := json.Marshal([]map[string]any{{"template": "xml", "messages": []map[string]string{{"role": "user", "content": "hi"}}, "tools": tools, "geist_tools": "xml_tools"}})
	want := jinja2Render(t, map[string]string{"xml": src}, cases)
	tmpl, err := Compile(src)
	if err != nil {
		t.Fatal(err)
	}
	if !tmpl.SupportsTools() || tmpl.place != placeXMLTools {
		t.Fatalf("SupportsTools %v, place %d: want xml_tools", tmpl.SupportsTools(), tmpl.place)
	}
	got, err := tmpl.Render([]Message{{Role: "user", Content: "hi"}}, Options{Tools: tools})
	if err != nil {
		t.Fatal(err)
	}
	if want[0].Error != "" {
		t.Fatal(want[0].Error)
	}
	if got != want[0].Prompt {
		t.Errorf("%s", firstDiff(got, want[0].Prompt))
	}
}
