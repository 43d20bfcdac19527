package dialect

import (
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/geisten/geist/engine/grammar"
	"github.com/santhosh-tekuri/jsonschema/v6"
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
			content, calls := parseAll(Gemma4, tools, ps)
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
	p := NewToolParser(Gemma4, tools)
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

// TestGemma4FirstOnly: with parallel_tool_calls false only the first of
// Gemma 4's calls is kept, and the parser is done at its closing tag.
func TestGemma4FirstOnly(t *testing.T) {
	t.Parallel()
	p := NewToolParser(Gemma4, []string{"a", "b"})
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

// haTools are Home Assistant's kind of tools: bounded strings, an
// integer range, required and optional properties, and one without
// parameters.
var haTools = []json.RawMessage{
	json.RawMessage(`{"type": "function", "function": {"name": "HassTurnOn", "description": "Turns on a device", "parameters": {"type": "object", "properties": {"name": {"type": "string", "maxLength": 20}, "area": {"type": "string", "maxLength": 20}}, "required": ["name"]}}}`),
	json.RawMessage(`{"type": "function", "function": {"name": "HassLightSet", "parameters": {"type": "object", "properties": {"name": {"type": "string"}, "brightness": {"type": "integer", "minimum": 0, "maximum": 100}, "color": {"enum": ["red", "warm white"]}, "on": {"type": "boolean"}, "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 3}, "extra": {"type": "object", "properties": {"fade": {"type": "number"}, "odd key": {"type": "null"}}}}, "required": ["brightness"]}}}`),
	json.RawMessage(`{"type": "function", "function": {"name": "GetTime"}}`),
	json.RawMessage(`{"type": "function", "function": {"name": "Note", "parameters": {"properties": {"text": {"type": "string"}, "any": {}}, "additionalProperties": {"type": "integer"}}}}`),
}

func TestGemma4ToolCallsGrammar(t *testing.T) {
	t.Parallel()
	call := func(s string) string { return "<|tool_call>call:" + s + "<tool_call|>" }
	src, trigger, err := Gemma4.Grammar(haTools, "", false, false)
	if err != nil {
		t.Fatal(err)
	}
	if trigger != "" {
		t.Errorf("trigger %q without lazy", trigger)
	}
	g, err := grammar.Parse(src)
	if err != nil {
		t.Fatalf("%v\n%s", err, src)
	}
	for _, s := range []string{
		call(`HassTurnOn{name:<|"|>Kitchen<|"|>}`),
		call(`HassTurnOn{area:<|"|>Küche ☀<|"|>,name:<|"|>Kitchen<|"|>}`),
		call(`HassTurnOn{name:<|"|><|"|>}`),
		call(`HassLightSet{brightness:0}`),
		call(`HassLightSet{brightness:100,color:<|"|>warm white<|"|>,extra:{fade:-0.5e3,odd key:null},name:<|"|>a < b, {c}: "d" \ e<|"|>,on:false,tags:[<|"|>x<|"|>,<|"|><|"|>]}`),
		call(`HassLightSet{brightness:7,name:<|"|>line
break<tool_call|><|"|>}`),
		call(`HassTurnOn{area:<|"|>Flur<|"|>,name:<|"|>Licht<|"|>}`),
		call(`GetTime{}`),
		call(`Note{}`),
		call(`Note{text:<|"|>t<|"|>,any:[1,{k:<|"|>v<|"|>},null,true],n:3,m:-2}`),
		call(`GetTime{}`) + call(`HassTurnOn{name:<|"|>x<|"|>}`),
	} {
		if !accepts(t, g, s) {
			t.Errorf("refused %s", s)
		}
	}
	for _, s := range []string{
		``,
		`<|tool_call>call:GetTime{}`,
		call(`GetTime{} `),
		call(`GetTime{ }`),
		call(`Launch{}`),
		call(`HassTurnOn{}`), // name is required
		call(`HassTurnOn{name:<|"|>123456789012345678901<|"|>}`), // maxLength 20
		call(`HassTurnOn{name:"Kitchen"}`),                       // JSON's quotes
		call(`HassTurnOn{"name":<|"|>Kitchen<|"|>}`),
		call(`HassTurnOn{name: <|"|>Kitchen<|"|>}`),
		call(`HassTurnOn{name:<|"|>Kitchen<|"|>,other:1}`),
		call(`HassTurnOn{name:<|"|>Licht<|"|>,area:<|"|>Flur<|"|>}`), // keys sorted, as the template writes them
		call(`HassTurnOn{area:<|"|>Flur<|"|>}`),
		call(`HassTurnOn{area:<|"|>Flur<|"|>,,name:<|"|>Licht<|"|>}`),
		call(`HassLightSet{brightness:101}`),
		call(`HassLightSet{brightness:5,color:<|"|>blue<|"|>}`),
		call(`HassLightSet{brightness:5,tags:[<|"|>a<|"|>,<|"|>b<|"|>,<|"|>c<|"|>,<|"|>d<|"|>]}`),
		call(`HassLightSet{brightness:5,name:<|"|>a<|tool_call>b<|"|>}`), // a string never holds <|
		call(`Note{n:<|"|>x<|"|>}`),
		`{"name": "GetTime", "arguments": {}}`,
	} {
		if accepts(t, g, s) {
			t.Errorf("accepted %s", s)
		}
	}

	// Lazy: from after the trigger, calls may follow each other.
	src, trigger, err = Gemma4.Grammar(haTools, "", true, false)
	if err != nil || trigger != "<|tool_call>" {
		t.Fatalf("lazy: trigger %q, %v", trigger, err)
	}
	lazy := mustParse(t, src)
	for s, want := range map[string]bool{
		`call:GetTime{}<tool_call|>`:                           true,
		`call:GetTime{}<tool_call|>` + call(`GetTime{}`):       true,
		`<|tool_call>call:GetTime{}<tool_call|>`:               false,
		`call:HassLightSet{brightness:-1}<tool_call|>`:         false,
		`call:HassTurnOn{name:<|"|>x<|"|>}<tool_call|> thanks`: false,
	} {
		if accepts(t, lazy, s) != want {
			t.Errorf("lazy: %s: accepted %v, want %v", s, !want, want)
		}
	}

	// Named and one.
	src, _, err = Gemma4.Grammar(haTools, "HassLightSet", false, false)
	if err != nil {
		t.Fatal(err)
	}
	named := mustParse(t, src)
	if !accepts(t, named, call(`HassLightSet{brightness:3}`)) || accepts(t, named, call(`GetTime{}`)) {
		t.Errorf("named: HassLightSet refused or GetTime accepted")
	}
	src, _, err = Gemma4.Grammar(haTools, "", false, true)
	if err != nil {
		t.Fatal(err)
	}
	one := mustParse(t, src)
	if !accepts(t, one, call(`GetTime{}`)) || accepts(t, one, call(`GetTime{}`)+call(`GetTime{}`)) {
		t.Errorf("one: one call refused or two accepted")
	}
}

func mustParse(t *testing.T, src string) *grammar.Grammar {
	t.Helper()
	g, err := grammar.Parse(src)
	if err != nil {
		t.Fatalf("%v\n%s", err, src)
	}
	return g
}

func TestGemma4ToolCallsErrors(t *testing.T) {
	t.Parallel()
	tool := func(name, params string) []json.RawMessage {
		return []json.RawMessage{json.RawMessage(`{"type": "function", "function": {"name": "` + name + `", "parameters": ` + params + `}}`)}
	}
	for _, c := range []struct {
		tools []json.RawMessage
		only  string
		want  string
	}{
		{tool("f", `{"type": "object", "properties": {"s": {"type": "string", "pattern": "^a+$"}}}`), "", "pattern"},
		{tool("f", `{"type": "string"}`), "", "want an object schema"},
		{tool("f", `{"$ref": "#/$defs/x", "$defs": {"x": {"type": "object"}}}`), "", "$ref"},
		{tool("f", `{"type": "object", "properties": {"s": {"const": "a<|\"|>b"}}}`), "", "quote"},
		{tool("f", `{"type": "object", "properties": {"a<|\"|>b": {"type": "integer"}}}`), "", "quote"},
		{tool("two words", `{}`), "", "cannot be written"},
		{tool("f", `{}`), "g", "not among the tools"},
		{tool("f", `{"type": "object", "properties": {"s": {"type": "string", "maxLength": 100000}}}`), "", "lengths up to"},
	} {
		_, _, err := Gemma4.Grammar(c.tools, c.only, false, false)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want %q", c.tools[0], err, c.want)
		}
	}
	// Keys a bare key cannot write are quoted; refs resolve inside each
	// tool's own schema even when two tools name the same definition.
	two := []json.RawMessage{
		json.RawMessage(`{"type": "function", "function": {"name": "a", "parameters": {"type": "object", "properties": {"x": {"$ref": "#/$defs/v"}, "k:1": {"type": "boolean"}}, "$defs": {"v": {"type": "integer"}}}}}`),
		json.RawMessage(`{"type": "function", "function": {"name": "b", "parameters": {"type": "object", "properties": {"x": {"$ref": "#/$defs/v"}}, "$defs": {"v": {"type": "string"}}}}}`),
	}
	src, _, err := Gemma4.Grammar(two, "", false, false)
	if err != nil {
		t.Fatal(err)
	}
	g := mustParse(t, src)
	for s, want := range map[string]bool{
		`<|tool_call>call:a{<|"|>k:1<|"|>:true,x:3}<tool_call|>`: true,
		`<|tool_call>call:a{k:1:true}<tool_call|>`:               false,
		`<|tool_call>call:a{x:<|"|>3<|"|>}<tool_call|>`:          false,
		`<|tool_call>call:b{x:<|"|>3<|"|>}<tool_call|>`:          true,
		`<|tool_call>call:b{x:3}<tool_call|>`:                    false,
	} {
		if accepts(t, g, s) != want {
			t.Errorf("%s: accepted %v, want %v", s, !want, want)
		}
	}
}

// TestGemma4GrammarParses: what Gemma 4's tool-call grammar lets a model
// write, its parser reads as calls (no content left over) to
// the tools offered, their arguments valid under each tool's schema.
// Random walks through the grammar over a vocabulary of single
// characters and the syntax's tokens write the calls.
func TestGemma4GrammarParses(t *testing.T) {
	t.Parallel()
	tools := haTools
	names := ToolNames(tools)
	schemas := map[string]*jsonschema.Schema{}
	for _, raw := range tools {
		var d struct {
			Function struct {
				Name       string
				Parameters json.RawMessage
			}
		}
		if err := json.Unmarshal(raw, &d); err != nil {
			t.Fatal(err)
		}
		params := string(d.Function.Parameters)
		if params == "" {
			params = `{"type": "object", "additionalProperties": false}`
		}
		doc, err := jsonschema.UnmarshalJSON(strings.NewReader(params))
		if err != nil {
			t.Fatal(err)
		}
		c := jsonschema.NewCompiler()
		if err := c.AddResource("s.json", doc); err != nil {
			t.Fatal(err)
		}
		if schemas[d.Function.Name], err = c.Compile("s.json"); err != nil {
			t.Fatal(err)
		}
	}
	pieces := [][]byte{nil} // 0: end of generation
	for b := byte(' '); b <= '~'; b++ {
		pieces = append(pieces, []byte{b})
	}
	for _, s := range append([]string{"\n", "é", "☀", `<|"|>`, "<|tool_call>", "<tool_call|>", "call:", "true", "null", "<|"}, names...) {
		pieces = append(pieces, []byte(s))
	}
	v := grammar.NewVocab(pieces, []int32{0})
	mask := make([]uint64, (v.Size()+63)/64)
	r := rand.New(rand.NewPCG(4, 27))
	for _, c := range []struct {
		name      string
		only      string
		lazy, one bool
	}{{"required", "", false, false}, {"named", "HassLightSet", false, false}, {"lazy", "", true, false}, {"one", "", false, true}} {
		src, trigger, err := Gemma4.Grammar(tools, c.only, c.lazy, c.one)
		if err != nil {
			t.Fatal(err)
		}
		g, err := grammar.Parse(src)
		if err != nil {
			t.Fatal(err)
		}
		comp := grammar.Bind(g, v)
		seen, done := map[string]bool{}, 0
		for walk := 0; walk < 300; walk++ {
			m := comp.NewMatcher()
			text := trigger
			for step := 0; step < 4000; step++ {
				m.Mask(mask)
				var allowed []int32
				for id := int32(1); id < int32(v.Size()); id++ {
					if mask[id>>6]&(1<<(id&63)) != 0 {
						allowed = append(allowed, id)
					}
				}
				if m.CanEnd() && (len(allowed) == 0 || r.IntN(3) == 0) {
					break
				}
				if len(allowed) == 0 {
					t.Fatalf("%s: the grammar allows nothing after %q", c.name, text)
				}
				id := allowed[r.IntN(len(allowed))]
				if !m.AcceptToken(id) {
					t.Fatalf("%s: allowed token %q refused", c.name, v.Piece(id))
				}
				text += string(v.Piece(id))
			}
			if !m.CanEnd() {
				continue // too long: not finished
			}
			done++
			p := NewToolParser(Gemma4, names)
			content, got := p.Add(text)
			rest, more := p.Flush()
			content += rest
			got = append(got, more...)
			if content != "" || len(got) == 0 || c.one && len(got) != 1 {
				t.Fatalf("%s: %q parsed to content %q and %d calls", c.name, text, content, len(got))
			}
			for _, call := range got {
				seen[call.Name] = true
				sch, ok := schemas[call.Name]
				if !ok || c.only != "" && call.Name != c.only {
					t.Fatalf("%s: %q called %q", c.name, text, call.Name)
				}
				doc, err := jsonschema.UnmarshalJSON(strings.NewReader(string(call.Arguments)))
				if err != nil {
					t.Fatalf("%s: %q: arguments %s: %v", c.name, text, call.Arguments, err)
				}
				if err := sch.Validate(doc); err != nil {
					t.Fatalf("%s: %q: arguments %s do not validate: %v", c.name, text, call.Arguments, err)
				}
			}
		}
		if c.only == "" && len(seen) < len(names) {
			t.Errorf("%s: the walks called %d of the %d tools", c.name, len(seen), len(names))
		}
		if done < 100 {
			t.Errorf("%s: %d of 300 walks finished", c.name, done)
		}
	}
}

// TestGemma4Dialect: its name, what the registry finds it by, the tokens
// that must render (the call tags and the quote) and its thought channel.
func TestGemma4Dialect(t *testing.T) {
	t.Parallel()
	checkDialect(t, Gemma4, "gemma4", []string{"<|tool_call>call:{{ name }}", "<|channel>thought\n"}, []string{"<|tool_call>", "<tool_call|>", `<|"|>`}, GemmaThought)
	if got := Gemma4.ThinkTokens(); !slices.Equal(got, []string{"<|channel>", "<channel|>"}) {
		t.Errorf("ThinkTokens %q", got)
	}
}
