package chat

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/geisten/geist/engine/zoo"
)

// TestXMLToolCalls: Qwen3.5's calls (<tool_call><function=NAME>
// <parameter=KEY>...) stream out of the parser as calls, cut anywhere,
// with values that read as JSON taken as such and the rest as strings;
// a malformed block stays content.
func TestXMLToolCalls(t *testing.T) {
	t.Parallel()
	text := "I'll turn it on.\n\n<tool_call>\n<function=HassTurnOn>\n<parameter=name>\nkitchen light\n</parameter>\n<parameter=brightness>\n50\n</parameter>\n<parameter=area>\n{\"floor\": 1}\n</parameter>\n<parameter=note>\ntwo\nlines\n</parameter>\n</function>\n</tool_call>"
	want := `{"name":"kitchen light","brightness":50,"area":{"floor": 1},"note":"two\nlines"}`
	for cut := 1; cut < len(text); cut += 7 {
		p := NewToolParser(ToolsTagged, []string{"HassTurnOn"})
		c1, k1 := p.Add(text[:cut])
		c2, k2 := p.Add(text[cut:])
		c3, k3 := p.Flush()
		calls := append(append(k1, k2...), k3...)
		if content := c1 + c2 + c3; content != "I'll turn it on." {
			t.Fatalf("cut %d: content %q", cut, content)
		}
		if len(calls) != 1 || calls[0].Name != "HassTurnOn" || string(calls[0].Arguments) != want {
			t.Fatalf("cut %d: calls %+v", cut, calls)
		}
		if !json.Valid(calls[0].Arguments) {
			t.Fatalf("arguments %s are not JSON", calls[0].Arguments)
		}
	}
	for _, bad := range []string{
		"<tool_call>\n<function=>\n</function>\n</tool_call>",
		"<tool_call>\n<function=f>\n<parameter=x>\n1\n</function>\n</tool_call>",
		"<tool_call>\n<function=f>\n<parameter=x>\n1\n</parameter>\n<parameter=x>\n2\n</parameter>\n</function>\n</tool_call>",
	} {
		p := NewToolParser(ToolsTagged, []string{"f"})
		c1, k1 := p.Add(bad)
		c2, k2 := p.Flush()
		if len(k1)+len(k2) != 0 || !strings.Contains(c1+c2, "function=") {
			t.Errorf("%q: calls %v, content %q", bad, append(k1, k2...), c1+c2)
		}
	}
}

// TestXMLToolCallsRoundTrip: a call Qwen3.5's template writes into the
// history parses back to the same call.
func TestXMLToolCallsRoundTrip(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile(zoo.Path(t, "golden", "chat-templates.json"))
	if err != nil {
		t.Fatal(err)
	}
	var g struct{ Templates map[string]string }
	if err := json.Unmarshal(raw, &g); err != nil {
		t.Fatal(err)
	}
	tmpl, err := Compile(g.Templates["Qwen3.5-4B"])
	if err != nil {
		t.Fatal(err)
	}
	if tmpl.ToolFormat() != ToolsTagged || !tmpl.SupportsTools() || !tmpl.SupportsThinking() {
		t.Fatalf("format %v, tools %v, thinking %v", tmpl.ToolFormat(), tmpl.SupportsTools(), tmpl.SupportsThinking())
	}
	args := `{"name":"kitchen light","brightness":50,"colors":["red","blue"]}`
	msgs := []Message{
		{Role: "user", Content: "Turn on the kitchen light."},
		{Role: "assistant", ToolCalls: []ToolCall{{Name: "HassTurnOn", Arguments: json.RawMessage(args)}}},
		{Role: "tool", Content: "done", ToolName: "HassTurnOn"},
	}
	out, err := tmpl.Render(msgs, Options{})
	if err != nil {
		t.Fatal(err)
	}
	i := strings.Index(out, "<tool_call>")
	j := strings.Index(out, "</tool_call>")
	if i < 0 || j < i {
		t.Fatalf("no call rendered:\n%s", out)
	}
	p := NewToolParser(tmpl.ToolFormat(), []string{"HassTurnOn"})
	_, k1 := p.Add(out[i : j+len("</tool_call>")])
	_, k2 := p.Flush()
	calls := append(k1, k2...)
	if len(calls) != 1 || calls[0].Name != "HassTurnOn" {
		t.Fatalf("parsed %+v from\n%s", calls, out[i:j])
	}
	var got, want any
	json.Unmarshal(calls[0].Arguments, &got)
	json.Unmarshal([]byte(args), &want)
	if g, w := mustJSON(got), mustJSON(want); g != w {
		t.Errorf("arguments %s, want %s", g, w)
	}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
