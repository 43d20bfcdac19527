package chat

import (
	"encoding/json"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/geisten/geist/engine/zoo"
)

// jsonEqual reports whether two JSON texts hold the same value.
func jsonEqual(t *testing.T, a, b []byte) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Fatalf("%s: %v", a, err)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	return reflect.DeepEqual(x, y)
}

func TestGemma4Arguments(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ in, want string }{
		{`{}`, `{}`},
		{`{ }`, `{}`},
		{`{name:<|"|>Kitchen<|"|>}`, `{"name": "Kitchen"}`},
		{`{brightness:40,name:<|"|>Kitchen light<|"|>}`, `{"brightness": 40, "name": "Kitchen light"}`},
		{`{a:-1.5e+3,b:0,c:true,d:false,e:null}`, `{"a": -1500, "b": 0, "c": true, "d": false, "e": null}`},
		{`{list:[1,<|"|>x<|"|>,[],{}],obj:{inner:{deep:[true]}}}`, `{"list": [1, "x", [], {}], "obj": {"inner": {"deep": [true]}}}`},
		{`{ a : 1 , b :[ 1 , 2 ] }`, `{"a": 1, "b": [1, 2]}`},
		{`{<|"|>odd: key<|"|>:1}`, `{"odd: key": 1}`},
		{`{text:<|"|>a "quoted" \ back, {braces}: [x]
new line<|"|>}`, `{"text": "a \"quoted\" \\ back, {braces}: [x]\nnew line"}`},
		{`{s:<|"|><tool_call|> <|tool_call> < | "<|"|>}`, `{"s": "<tool_call|> <|tool_call> < | \""}`},
		{`{k:<|"|>Köln ☀<|"|>}`, `{"k": "Köln ☀"}`},
		{"{bad:<|\"|>\xff<|\"|>}", `{"bad": "\ufffd"}`},
	} {
		got, err := gemma4JSON(c.in)
		if err != nil {
			t.Errorf("%s: %v", c.in, err)
			continue
		}
		if !json.Valid(got) || !jsonEqual(t, got, []byte(c.want)) {
			t.Errorf("%s: got %s, want %s", c.in, got, c.want)
		}
	}
	deep := strings.Repeat("[", 100) + strings.Repeat("]", 100)
	for _, c := range []struct{ in, err string }{
		{``, "want the arguments object"},
		{`[1]`, "want the arguments object"},
		{`{a:1`, "the text ends"},
		{`{a:1}}`, "text after the arguments"},
		{`{a 1}`, "want a key"},
		{`{:1}`, "bad key"},
		{`{a:}`, "want a value"},
		{`{a:<|"|>open}`, "closing"},
		{`{a:01}`, "bad number"},
		{`{a:1.}`, "bad number"},
		{`{a:-}`, "bad number"},
		{`{a:1e}`, "bad number"},
		{`{a:"json"}`, "want a value"},
		{`{a:True}`, "want a value"},
		{`{a:1 b:2}`, "want ',' or"},
		{`{a:[1 2]}`, "want ',' or"},
		{`{a:` + deep + `}`, "nested deeper"},
	} {
		got, err := gemma4JSON(c.in)
		if err == nil || !strings.Contains(err.Error(), c.err) {
			t.Errorf("%q: got %s, %v; want an error with %q", c.in, got, err, c.err)
		}
	}
	if _, err := parseGemma4Call("call:f{a:<|\"|>" + strings.Repeat("x", maxGemmaCall) + "<|\"|>}"); err == nil || !strings.Contains(err.Error(), "at most") {
		t.Errorf("an oversized call: %v", err)
	}
	for _, body := range []string{`f{}`, `call:{}`, `call:f`, `call:two words{}`, `call:f<x>{}`} {
		if c, err := parseGemma4Call(body); err == nil {
			t.Errorf("%q: parsed as %s%s", body, c.Name, c.Arguments)
		}
	}
}

func TestGemma4ToolParser(t *testing.T) {
	t.Parallel()
	tools := []string{"HassTurnOn", "get_weather"}
	call := func(name, args string) ToolCall { return ToolCall{Name: name, Arguments: json.RawMessage(args)} }
	for _, c := range []struct {
		name    string
		text    string
		content string
		calls   []ToolCall
	}{
		{"plain", "The light is on.", "The light is on.", nil},
		{"one", `<|tool_call>call:HassTurnOn{name:<|"|>Kitchen<|"|>}<tool_call|>`, "", []ToolCall{call("HassTurnOn", `{"name":"Kitchen"}`)}},
		{"two after text", `Sure. <|tool_call>call:HassTurnOn{area:<|"|>Küche<|"|>,name:<|"|>Licht<|"|>}<tool_call|><|tool_call>call:get_weather{city:<|"|>Köln<|"|>,days:2}<tool_call|>`, "Sure.",
			[]ToolCall{call("HassTurnOn", `{"area":"Küche","name":"Licht"}`), call("get_weather", `{"city":"Köln","days":2}`)}},
		{"close tag inside a string", `<|tool_call>call:get_weather{city:<|"|>a<tool_call|>b<|"|>}<tool_call|> done`, "done",
			[]ToolCall{call("get_weather", `{"city":"a<tool_call|>b"}`)}},
		{"unclosed at the end", `<|tool_call>call:get_weather{days:1}`, "", []ToolCall{call("get_weather", `{"days":1}`)}},
		{"malformed is content", `<|tool_call>call:get_weather{days:}<tool_call|>`, `<|tool_call>call:get_weather{days:}<tool_call|>`, nil},
		{"unterminated string is content", `x <|tool_call>call:get_weather{city:<|"|>Paris}<tool_call|>`, `x <|tool_call>call:get_weather{city:<|"|>Paris}<tool_call|>`, nil},
		{"json in the tags is content", `<|tool_call>{"name": "a", "arguments": {}}<tool_call|>`, `<|tool_call>{"name": "a", "arguments": {}}<tool_call|>`, nil},
		{"other tags stay text", `<tool_call>{"name": "a", "arguments": {}}</tool_call>`, `<tool_call>{"name": "a", "arguments": {}}</tool_call>`, nil},
		{"a lone <", "x < y and <|tool", "x < y and <|tool", nil},
	} {
		for _, ps := range splits(c.text) {
			content, calls := parseAll(ToolsGemma4, tools, ps)
			if content != c.content || len(calls) != len(c.calls) {
				t.Errorf("%s (pieces of %d): got %q %s, want %q %s", c.name, len(ps[0]), content, fmtCalls(calls), c.content, fmtCalls(c.calls))
				continue
			}
			for i := range calls {
				if calls[i].Name != c.calls[i].Name || !jsonEqual(t, calls[i].Arguments, c.calls[i].Arguments) {
					t.Errorf("%s (pieces of %d): call %d is %s%s, want %s%s", c.name, len(ps[0]), i, calls[i].Name, calls[i].Arguments, c.calls[i].Name, c.calls[i].Arguments)
				}
			}
		}
	}
	// A call streams out when its closing tag arrives, not before.
	p := NewToolParser(ToolsGemma4, tools)
	if c, _ := p.Add("On it <|tool"); c != "On it" {
		t.Errorf("got %q before a possible tag", c)
	}
	if c, cs := p.Add(`_call>call:HassTurnOn{name:<|"|>a <tool_call|`); c != "" || cs != nil {
		t.Errorf("an open call leaked: %q %v", c, cs)
	}
	if _, cs := p.Add(`><|"|>}<tool_call`); cs != nil {
		t.Errorf("a call returned before its closing tag: %v", cs)
	}
	if _, cs := p.Add(`|>`); len(cs) != 1 || cs[0].Name != "HassTurnOn" {
		t.Errorf("call not returned at its closing tag: %v", cs)
	}
}

// TestGemma4CallsRoundTrip: the calls Gemma 4's own template writes for
// an assistant message's tool_calls (what its model learned to write) parse
// back to the arguments the message had.
func TestGemma4CallsRoundTrip(t *testing.T) {
	t.Parallel()
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
	tmpl, err := Compile(g.Templates["google-gemma-4-31B-it"])
	if err != nil {
		t.Fatal(err)
	}
	if tmpl.ToolFormat() != ToolsGemma4 {
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
		msgs := []Message{
			{Role: "user", Content: "do it"},
			{Role: "assistant", ToolCalls: []ToolCall{{ID: "c1", Name: "f", Arguments: json.RawMessage(a)}, {ID: "c2", Name: "g_2", Arguments: json.RawMessage(a)}}},
		}
		out, err := tmpl.Render(msgs, Options{Tools: tools})
		if err != nil {
			t.Fatalf("%s: %v", a, err)
		}
		i := strings.Index(out, gemmaCallOpen)
		if i < 0 {
			t.Fatalf("%s: no call rendered: %q", a, out)
		}
		text := out[i:]
		if j := strings.LastIndex(text, gemmaCallClose); j >= 0 {
			text = text[:j+len(gemmaCallClose)]
		}
		for _, ps := range splits(text) {
			content, calls := parseAll(ToolsGemma4, []string{"f", "g_2"}, ps)
			if content != "" || len(calls) != 2 {
				t.Fatalf("%s: the template's %q parsed to %q %s", a, text, content, fmtCalls(calls))
			}
			for k, name := range []string{"f", "g_2"} {
				if calls[k].Name != name || !jsonEqual(t, calls[k].Arguments, []byte(a)) {
					t.Errorf("%s: the template's %q parsed to %s%s", a, text, calls[k].Name, calls[k].Arguments)
				}
			}
		}
	}
}

// TestGemma4FirstOnly: with parallel_tool_calls false only the first of
// Gemma 4's calls is kept, and the parser is done at its closing tag.
func TestGemma4FirstOnly(t *testing.T) {
	t.Parallel()
	p := NewToolParser(ToolsGemma4, []string{"a", "b"})
	p.FirstOnly()
	_, calls := p.Add(`<|tool_call>call:a{x:1}<tool_call|>`)
	if len(calls) != 1 || calls[0].Name != "a" || !p.Done() {
		t.Fatalf("calls %s, done %v", fmtCalls(calls), p.Done())
	}
	c, more := p.Add(`<|tool_call>call:b{}<tool_call|> text`)
	c2, more2 := p.Flush()
	if c+c2 != "" || len(more)+len(more2) != 0 {
		t.Errorf("after the first call: %q %s", c+c2, fmtCalls(append(more, more2...)))
	}
}

// FuzzGemma4Arguments: any text converts to a JSON object or to an error,
// never a panic; what converts is valid JSON, an object.
func FuzzGemma4Arguments(f *testing.F) {
	for _, s := range []string{
		`{}`, `{a:1,b:[true,false,null,-0.5e-3],c:{d:<|"|>x<|"|>}}`, `{<|"|>k<|"|>:<|"|>v<|"|>}`,
		`{a:<|"|>open`, `{a:[[[[`, `{a:01}`, "{a:<|\"|>\xff<|\"|>}", `{ a : [ 1 , { } ] }`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := gemma4JSON(s)
		if err != nil {
			return
		}
		var v map[string]any
		if json.Unmarshal(got, &v) != nil {
			t.Fatalf("%q converted to %q, not a JSON object", s, got)
		}
	})
}
