package dialect

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/geisten/geist/engine/grammar"
	"github.com/santhosh-tekuri/jsonschema/v6"
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
	checkParser(t, LFM2, []parserCase{
		{"one", `<|tool_call_start|>[HassTurnOn(name="Kitchen")]<|tool_call_end|>`, "", []ToolCall{call("HassTurnOn", `{"name":"Kitchen"}`)}},
		{"two after text, text after", "Sure.\n<|tool_call_start|>[HassTurnOn(name='Kitchen'), get_weather(city=\"Köln\", days=2)]<|tool_call_end|>Checking the weather.", "Sure.Checking the weather.",
			[]ToolCall{call("HassTurnOn", `{"name":"Kitchen"}`), call("get_weather", `{"city":"Köln","days":2}`)}},
		{"unclosed at the end", `<|tool_call_start|>[get_weather(city="Paris")]`, "", []ToolCall{call("get_weather", `{"city":"Paris"}`)}},
		{"json list", `<|tool_call_start|>[{"name": "get_weather", "arguments": {"city": "Paris"}}]<|tool_call_end|>`, "", []ToolCall{call("get_weather", `{"city": "Paris"}`)}},
		{"malformed is content", `<|tool_call_start|>[get_weather(city=Paris)]<|tool_call_end|>`, `<|tool_call_start|>[get_weather(city=Paris)]<|tool_call_end|>`, nil},
		{"plain text", "It is sunny in [Paris](x).", "It is sunny in [Paris](x).", nil},
		{"a tag's start in the text", "a <|tool_call", "a <|tool_call", nil},
	})
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

func TestToolCallsLFM2(t *testing.T) {
	t.Parallel()
	tools := []json.RawMessage{
		json.RawMessage(`{"type": "function", "function": {"name": "HassTurnOn", "parameters": {"type": "object", "properties": {"name": {"type": "string"}, "area": {"type": "string"}}}}}`),
		json.RawMessage(`{"type": "function", "function": {"name": "HassLightSet", "parameters": {"type": "object", "properties": {"brightness": {"type": "integer", "minimum": 0, "maximum": 100}, "on": {"type": "boolean"}, "color": {"enum": ["red", "warm white", null]}}, "required": ["brightness"]}}}`),
		json.RawMessage(`{"type": "function", "function": {"name": "get-time"}}`),
	}
	v := testVocab()
	checkGrammar(t, LFM2, tools, []grammarCase{
		{"", false, []string{
			`<|tool_call_start|>[HassTurnOn()]<|tool_call_end|>`,
			`<|tool_call_start|>[HassTurnOn(name="Kitchen", area="it\'s \"down\" \\ \x41\u00e9")]<|tool_call_end|>`,
			`<|tool_call_start|>[HassTurnOn(area="hall"), HassLightSet(brightness=40, on=True, color=None),get-time()]<|tool_call_end|>`,
			`<|tool_call_start|>[HassLightSet(brightness=0 , color="warm white")]<|tool_call_end|>`,
		}, []string{
			`[HassTurnOn()]<|tool_call_end|>`,
			`<|tool_call_start|>[HassTurnOn()]`,
			`<|tool_call_start|>[]<|tool_call_end|>`,
			`<|tool_call_start|>HassTurnOn()<|tool_call_end|>`,
			`<|tool_call_start|>[Nope()]<|tool_call_end|>`,
			`<|tool_call_start|>[HassTurnOn(area="hall", name="x")]<|tool_call_end|>`, // out of order
			`<|tool_call_start|>[HassTurnOn(name='Kitchen')]<|tool_call_end|>`,        // single quotes are read, not written
			`<|tool_call_start|>[HassTurnOn(name="a` + "\n" + `b")]<|tool_call_end|>`,
			`<|tool_call_start|>[HassTurnOn(name=3)]<|tool_call_end|>`,
			`<|tool_call_start|>[HassTurnOn(room="x")]<|tool_call_end|>`,
			`<|tool_call_start|>[HassLightSet()]<|tool_call_end|>`,
			`<|tool_call_start|>[HassLightSet(brightness=101)]<|tool_call_end|>`,
			`<|tool_call_start|>[HassLightSet(brightness=4, on=true)]<|tool_call_end|>`,
			`<|tool_call_start|>[HassLightSet(brightness=4, color="blue")]<|tool_call_end|>`,
			`<|tool_call_start|>[HassLightSet(brightness=4, color=null)]<|tool_call_end|>`,
			`<|tool_call_start|>[HassLightSet("4")]<|tool_call_end|>`,
		}},
		{"HassLightSet", false, []string{`<|tool_call_start|>[HassLightSet(brightness=7)]<|tool_call_end|>`}, []string{`<|tool_call_start|>[HassTurnOn()]<|tool_call_end|>`}},
		{"", true, []string{`[HassTurnOn(name="lamp")]<|tool_call_end|>`}, []string{`<|tool_call_start|>[HassTurnOn()]<|tool_call_end|>`, `[HassTurnOn()]`}},
	})
	for _, bad := range []struct{ tools, want string }{
		{`{"type": "function", "function": {"name": "a b"}}`, "letters, digits"},
		{`{"type": "function", "function": {"name": "a", "parameters": {"type": "object", "properties": {"user id": {"type": "string"}}}}}`, "keyword argument"},
		{`{"type": "function", "function": {"name": "a", "parameters": {"anyOf": [{"type": "object"}]}}}`, `"anyOf"`},
		{`{"type": "function", "function": {"name": "a", "parameters": {"type": "array"}}}`, `"type"`},
		{`{"type": "function", "function": {"name": "a", "parameters": {"type": "object", "properties": {"x": {"type": "string", "format": "hostname"}}}}}`, `"format"`},
	} {
		_, _, err := LFM2.Grammar([]json.RawMessage{json.RawMessage(bad.tools)}, "", false, false)
		if err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%s: error %v, want one saying %s", bad.tools, err, bad.want)
		}
	}
	// parallel_tool_calls false: a list of one call.
	for _, lazy := range []bool{false, true} {
		src, _, err := LFM2.Grammar(tools, "", lazy, true)
		if err != nil {
			t.Fatal(err)
		}
		g, err := grammar.Parse(src)
		if err != nil {
			t.Fatalf("%v\n%s", err, src)
		}
		comp := grammar.Bind(g, v)
		open := ""
		if !lazy {
			open = "<|tool_call_start|>"
		}
		for s, want := range map[string]bool{`[HassTurnOn()]<|tool_call_end|>`: true, `[HassTurnOn(), get-time()]<|tool_call_end|>`: false} {
			m := comp.NewMatcher()
			if got := m.AcceptBytes([]byte(open+s)) && m.CanEnd(); got != want {
				t.Errorf("one call, lazy %v: %q accepted %v", lazy, open+s, got)
			}
		}
	}
	if _, _, err := LFM2.Grammar(tools, "Missing", false, false); err == nil {
		t.Error("a named tool that is not offered: no error")
	}
}

// TestToolCallsLFM2Parse: what the LFM2 grammar lets a model write is what
// its parser reads as LFM2's calls, with arguments valid under each
// tool's parameters: random walks through the grammar of one tool per
// schema of testdata/schemas.json (the schema as its one required
// argument, and as an optional one beside a string), and of Home
// Assistant's tools.
func TestToolCallsLFM2Parse(t *testing.T) {
	t.Parallel()
	var schemas map[string]json.RawMessage
	grammarTestdata(t, "schemas.json", &schemas)
	var assist []json.RawMessage
	grammarTestdata(t, "ha-tools.json", &assist)
	type tool struct {
		Type     string `json:"type"`
		Function struct {
			Name       string          `json:"name"`
			Parameters json.RawMessage `json:"parameters"`
		} `json:"function"`
	}
	sets := map[string][]json.RawMessage{"home-assistant": assist}
	for name, s := range schemas {
		if bytes.Contains(s, []byte(`"$ref"`)) {
			// The references point into the schema: it is the tool's
			// parameters as it stands when it is an object's.
			if bytes.Contains(s, []byte(`"type": "object"`)) && !bytes.HasPrefix(bytes.TrimSpace(s), []byte(`{"$ref`)) {
				sets[name] = []json.RawMessage{json.RawMessage(`{"type": "function", "function": {"name": "f", "parameters": ` + string(s) + `}}`)}
			}
			continue
		}
		sets[name] = []json.RawMessage{
			json.RawMessage(`{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {"v": ` + string(s) + `}, "required": ["v"]}}}`),
			json.RawMessage(`{"type": "function", "function": {"name": "g_2", "parameters": {"type": "object", "properties": {"s": {"type": "string"}, "v": ` + string(s) + `}}}}`),
		}
	}
	v := testVocab()
	calls, compiled := 0, 0
	for name, tools := range sets {
		src, _, err := LFM2.Grammar(tools, "", false, false)
		if err != nil {
			t.Logf("%s: %v", name, err) // parameters the keyword form cannot take
			continue
		}
		g, err := grammar.Parse(src)
		if err != nil {
			t.Fatalf("%s: %v\n%s", name, err, src)
		}
		compiled++
		params := map[string]*jsonschema.Schema{}
		for _, raw := range tools {
			var tl tool
			json.Unmarshal(raw, &tl)
			p := tl.Function.Parameters
			if len(p) == 0 {
				p = json.RawMessage(`{}`)
			}
			comp := jsonschema.NewCompiler()
			comp.AssertFormat()
			doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(p))
			if err != nil {
				t.Fatal(err)
			}
			if err := comp.AddResource("s.json", doc); err != nil {
				t.Fatal(err)
			}
			if params[tl.Function.Name], err = comp.Compile("s.json"); err != nil {
				t.Fatal(err)
			}
		}
		c := grammar.Bind(g, v)
		for seed := range 10 {
			out := generateCalls(t, c, uint64(seed))
			p := NewToolParser(LFM2, nil)
			content, cs := p.Add(string(out))
			rest, more := p.Flush()
			cs = append(cs, more...)
			if content+rest != "" || len(cs) == 0 {
				t.Fatalf("%s seed %d: %q read as content %q and %d calls\n%s", name, seed, out, content+rest, len(cs), src)
			}
			for _, call := range cs {
				sch, ok := params[call.Name]
				if !ok {
					t.Fatalf("%s seed %d: %q calls %q", name, seed, out, call.Name)
				}
				inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(call.Arguments))
				if err != nil {
					t.Fatalf("%s seed %d: arguments %s of %q: %v", name, seed, call.Arguments, out, err)
				}
				if err := sch.Validate(inst); err != nil {
					t.Fatalf("%s seed %d: arguments %s of %q do not validate: %v", name, seed, call.Arguments, out, err)
				}
				calls++
			}
		}
	}
	t.Logf("%d tool sets compiled of %d, %d calls read and validated", compiled, len(sets), calls)
	if compiled < len(sets)*3/4 {
		t.Errorf("only %d of %d tool sets compiled", compiled, len(sets))
	}
}

// TestLFM2Dialect: its name, what the registry finds it by (LFM2's
// tokens, LFM2.5's "List of tools: [") and the tokens that must render.
func TestLFM2Dialect(t *testing.T) {
	t.Parallel()
	checkDialect(t, LFM2, "lfm2", []string{"<|tool_call_start|>", "<|tool_list_start|>", "List of tools: ["}, []string{"<|tool_call_start|>", "<|tool_call_end|>"}, ThinkTags)
}
