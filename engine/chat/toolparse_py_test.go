package chat

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

func TestParsePyCalls(t *testing.T) {
	t.Parallel()
	call := func(name, args string) ToolCall { return ToolCall{Name: name, Arguments: json.RawMessage(args)} }
	for _, c := range []struct {
		body  string
		calls []ToolCall
	}{
		{`[get_weather(city="Köln", days=2)]`, []ToolCall{call("get_weather", `{"city":"Köln","days":2}`)}},
		{`[HassTurnOn()]`, []ToolCall{call("HassTurnOn", `{}`)}},
		{` [ a ( x = 'it\'s' ) , b(y=True, z=False, w=None) ] `, []ToolCall{call("a", `{"x":"it's"}`), call("b", `{"y":true,"z":false,"w":null}`)}},
		{`[a(t=true, f=false, n=null)]`, []ToolCall{call("a", `{"t":true,"f":false,"n":null}`)}},
		{`[a(x=[1, 2.5, -3, +4, 1e3, 1.E-2, .5, 5., 1_000, 0x1F, 0o17, 0b101, 007.5, 00])]`, []ToolCall{call("a", `{"x":[1,2.5,-3,4,1e3,1.0e-2,0.5,5.0,1000,31,15,5,7.5,0]}`)}},
		{`[a(d={"k": [1, (2, 3)], 'j': {}, u"u": (4,), r"r": ()}, p=(5))]`, []ToolCall{call("a", `{"d":{"k":[1,[2,3]],"j":{},"u":[4],"r":[]},"p":5}`)}},
		{`[a(s="tab\there \"q\" \\ \x41\u00e9\U0001F600\101\d", r=r"\d+\"")]`, []ToolCall{call("a", `{"s":"tab\there \"q\" \\ Aé😀A\\d","r":"\\d+\\\""}`)}},
		{`[a(s="\ud83d\ude00 \ud800 <b>&", c="` + "\x01" + `")]`, []ToolCall{call("a", `{"s":"😀 � <b>&","c":"\u0001"}`)}},
		{"[a(x=1,\n  y=2,),\n]", []ToolCall{call("a", `{"x":1,"y":2}`)}},
		{`get-weather.v2(city="Paris")`, []ToolCall{call("get-weather.v2", `{"city":"Paris"}`)}},
		{`[a(n=123456789012345678901234567890)]`, []ToolCall{call("a", `{"n":123456789012345678901234567890}`)}},
		{`[a(r=r"\é\"", s="x" 'y'  r"\z" u"w")]`, []ToolCall{call("a", `{"r":"\\é\\\"","s":"xy\\zw"}`)}},
	} {
		calls, err := parsePyCalls(c.body)
		if err != nil {
			t.Errorf("%s: %v", c.body, err)
			continue
		}
		if !reflect.DeepEqual(calls, c.calls) {
			t.Errorf("%s: got %s, want %s", c.body, fmtCalls(calls), fmtCalls(c.calls))
		}
		for _, cl := range calls {
			if !json.Valid(cl.Arguments) {
				t.Errorf("%s: arguments %s are not JSON", c.body, cl.Arguments)
			}
		}
	}
	for body, want := range map[string]string{
		``:                                "want a function name",
		`[]`:                              "want a function name",
		`[a(1)]`:                          "positional arguments",
		`[a(x)]`:                          "positional arguments",
		`[a(x=1, x=2)]`:                   `"x" repeated`,
		`[a(x=1`:                          "want ',' or ')'",
		`[a(x=1)`:                         "want ',' or ']'",
		`[a(x=1)] more`:                   "text after the list",
		`[a(x="abc)]`:                     "unterminated string",
		`[a(x='''doc''')]`:                "triple-quoted",
		`[a(x=b"x")]`:                     `string prefix "b"`,
		`[a(x=foo)]`:                      `"foo" is not a literal`,
		`[a(x=inf)]`:                      `"inf" is not a literal`,
		`[a(x=-inf)]`:                     `"-inf" is not a number`,
		`[a(x=012)]`:                      `"012" is not a number`,
		`[a(0x=1)]`:                       "want a keyword argument",
		`[a(x=1e400)]`:                    "is not a number",
		`[a(x="a" b"b")]`:                 "want ',' or ')'",
		`[a(x=1__0)]`:                     `is not a number`,
		`[a(x=1j)]`:                       `is not a number`,
		`[a(x=0x)]`:                       `is not a number`,
		`[a(x={1, 2})]`:                   "want a string key",
		`[a(x={"k" 1})]`:                  "want ':'",
		`[a(x=[1 2])]`:                    "want ',' or ']'",
		`[a(x="\xZZ")]`:                   `\x wants 2 hex digits`,
		`[a(x="\U00110000")]`:             "beyond Unicode",
		`[a(x="\N{BULLET}")]`:             `\N{...}`,
		`[a(x=` + strings.Repeat("[", 70): "nested deeper than 64",
	} {
		calls, err := parsePyCalls(body)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: got %s, %v; want an error saying %q", body, fmtCalls(calls), err, want)
		}
	}
	if _, err := parsePyCalls("[a(x=\"" + strings.Repeat("x", maxPyCallBytes) + "\")]"); err == nil || !strings.Contains(err.Error(), "at most") {
		t.Errorf("an oversized list: %v", err)
	}
}

// TestToolParserLFM2: LFM2's calls between its tokens, whole and split at
// every byte, text before and after, malformed lists as content; JSON
// lists (as llama.cpp's LFM2 JSON mode writes) are read too.
func TestToolParserLFM2(t *testing.T) {
	t.Parallel()
	tools := []string{"HassTurnOn", "get_weather"}
	call := func(name, args string) ToolCall { return ToolCall{Name: name, Arguments: json.RawMessage(args)} }
	for _, c := range []struct {
		name    string
		text    string
		content string
		calls   []ToolCall
	}{
		{"one", `<|tool_call_start|>[HassTurnOn(name="Kitchen")]<|tool_call_end|>`, "", []ToolCall{call("HassTurnOn", `{"name":"Kitchen"}`)}},
		{"two after text, text after", "Sure.\n<|tool_call_start|>[HassTurnOn(name='Kitchen'), get_weather(city=\"Köln\", days=2)]<|tool_call_end|>Checking the weather.", "Sure.Checking the weather.",
			[]ToolCall{call("HassTurnOn", `{"name":"Kitchen"}`), call("get_weather", `{"city":"Köln","days":2}`)}},
		{"unclosed at the end", `<|tool_call_start|>[get_weather(city="Paris")]`, "", []ToolCall{call("get_weather", `{"city":"Paris"}`)}},
		{"json list", `<|tool_call_start|>[{"name": "get_weather", "arguments": {"city": "Paris"}}]<|tool_call_end|>`, "", []ToolCall{call("get_weather", `{"city": "Paris"}`)}},
		{"malformed is content", `<|tool_call_start|>[get_weather(city=Paris)]<|tool_call_end|>`, `<|tool_call_start|>[get_weather(city=Paris)]<|tool_call_end|>`, nil},
		{"plain text", "It is sunny in [Paris](x).", "It is sunny in [Paris](x).", nil},
		{"a tag's start in the text", "a <|tool_call", "a <|tool_call", nil},
	} {
		for _, ps := range splits(c.text) {
			content, calls := parseAll(ToolsLFM2, tools, ps)
			if content != c.content || !reflect.DeepEqual(calls, c.calls) {
				t.Errorf("%s (pieces of %d): got %q %s, want %q %s", c.name, len(ps[0]), content, fmtCalls(calls), c.content, fmtCalls(c.calls))
			}
		}
	}
}

// TestTemplateLFM2: LFM2's templates (LFM2.5's "List of tools: [", LFM2's
// tool list tokens) give ToolsLFM2, whose tokens are preserved.
func TestTemplateLFM2(t *testing.T) {
	t.Parallel()
	for _, src := range []string{
		`{%- if tools -%}{{ "List of tools: [" }}{% for t in tools %}{{ t | tojson }}{% endfor %}]{%- endif -%}{% for m in messages %}{{ m.content }}{% endfor %}`,
		`{%- if tools -%}{{ "List of tools: <|tool_list_start|>[" }}{% for t in tools %}{{ t | tojson }}{% endfor %}]<|tool_list_end|>{%- endif -%}{% for m in messages %}{{ m.content }}{% endfor %}`,
	} {
		tmpl, err := Compile(src)
		if err != nil {
			t.Fatal(err)
		}
		if f := tmpl.ToolFormat(); f != ToolsLFM2 || f.String() != "lfm2" {
			t.Errorf("ToolFormat %v, want lfm2", f)
		}
		if got := tmpl.ToolTokens(); !reflect.DeepEqual(got, []string{"<|tool_call_start|>", "<|tool_call_end|>"}) {
			t.Errorf("ToolTokens %q", got)
		}
	}
}

func FuzzPyCalls(f *testing.F) {
	for _, s := range []string{`[a(x="y", n=3)]`, `[a(d={'k': [1, (2,)], "j": None}), b()]`, `a(s="\u00e9\x41\101\U0001F600", r=r"\d")`, `[a(x=0x1F_FF, y=1_0.5e-3, z=.5)]`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		calls, err := parsePyCalls(body)
		if err != nil {
			if len(calls) > 0 {
				t.Fatalf("calls with an error")
			}
			return
		}
		if len(calls) == 0 {
			t.Fatalf("%q: no calls and no error", body)
		}
		for _, c := range calls {
			var args map[string]any
			if c.Name == "" || json.Unmarshal(c.Arguments, &args) != nil {
				t.Fatalf("%q: call %q with arguments %s", body, c.Name, c.Arguments)
			}
		}
	})
}

// TestPyCallsInContent: an assistant message's calls are written before
// its content as LFM2 writes them, and read back by parsePyCalls to the
// same arguments; names Python cannot take make a JSON list.
func TestPyCallsInContent(t *testing.T) {
	t.Parallel()
	call := func(name, args string) ToolCall { return ToolCall{Name: name, Arguments: json.RawMessage(args)} }
	for _, c := range []struct {
		calls []ToolCall
		want  string
	}{
		{[]ToolCall{call("HassTurnOn", `{"name": "Kitchen Light", "domain": ["light"]}`), call("get_weather", `{"city": "Köln", "days": 2, "threshold": 0.75}`)},
			`[HassTurnOn(name="Kitchen Light", domain=["light"]), get_weather(city="Köln", days=2, threshold=0.75)]`},
		{[]ToolCall{call("get_weather", `"{\"city\": \"Paris\"}"`), call("GetLiveContext", ``), call("x", `{}`)}, `[get_weather(city="Paris"), GetLiveContext(), x()]`},
		{[]ToolCall{call("f", `{"q": "say \"hi\"\n<b> \\ \u0001", "o": {"a": null, "b": [true, false, 1e5, -0.5]}}`)}, `[f(q="say \"hi\"\n<b> \\ \u0001", o={"a": None, "b": [True, False, 1e5, -0.5]})]`},
		{[]ToolCall{call("f", `{"user id": 1}`), call("g", `{}`)}, `[{"name": "f", "arguments": {"user id": 1}}, {"name": "g", "arguments": {}}]`},
		{[]ToolCall{call("f", `[1, 2]`)}, `[{"name": "f", "arguments": [1, 2]}]`},
	} {
		got, err := pyCallList(c.calls)
		if err != nil || got != c.want {
			t.Errorf("%s: got %s %v, want %s", fmtCalls(c.calls), got, err, c.want)
			continue
		}
		if strings.HasPrefix(got, "[{") {
			continue
		}
		back, err := parsePyCalls(got)
		if err != nil || len(back) != len(c.calls) {
			t.Errorf("%s: read back %s, %v", got, fmtCalls(back), err)
			continue
		}
		for i, b := range back {
			var want, have any
			raw := c.calls[i].Arguments
			if strings.HasPrefix(string(raw), `"`) {
				var s string
				json.Unmarshal(raw, &s)
				raw = json.RawMessage(s)
			}
			if len(raw) == 0 {
				raw = json.RawMessage(`{}`)
			}
			json.Unmarshal(raw, &want)
			json.Unmarshal(b.Arguments, &have)
			if b.Name != c.calls[i].Name || !reflect.DeepEqual(want, have) {
				t.Errorf("%s: call %d read back as %s %s", got, i, b.Name, b.Arguments)
			}
		}
	}
	msgs := []Message{{Role: "user", Content: "hi"}, {Role: "assistant", Content: "On it.", ToolCalls: []ToolCall{call("HassTurnOn", `{"name": "lamp"}`)}}, {Role: "tool", Content: "ok", ToolName: "HassTurnOn"}}
	out, err := pyCallsInContent(msgs)
	if err != nil {
		t.Fatal(err)
	}
	if out[1].Content != `<|tool_call_start|>[HassTurnOn(name="lamp")]<|tool_call_end|>On it.` || out[1].ToolCalls != nil || msgs[1].ToolCalls == nil {
		t.Errorf("got %+v (the caller's messages %+v)", out[1], msgs[1])
	}
	if _, err := pyCallsInContent([]Message{{Role: "assistant", ToolCalls: []ToolCall{call("f", `{"a": `)}}}); err == nil {
		t.Error("broken arguments: no error")
	}
}
