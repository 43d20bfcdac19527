package dialect

import (
	"bytes"
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/geisten/geist/engine/grammar"
	"github.com/santhosh-tekuri/jsonschema/v6"
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
		p := NewToolParser(Hermes, []string{"HassTurnOn"})
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
		p := NewToolParser(Hermes, []string{"f"})
		c1, k1 := p.Add(bad)
		c2, k2 := p.Flush()
		if len(k1)+len(k2) != 0 || !strings.Contains(c1+c2, "function=") {
			t.Errorf("%q: calls %v, content %q", bad, append(k1, k2...), c1+c2)
		}
	}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// TestQwen35Dialect: its name, what the registry finds it by (<tool_call>
// and <function=, as Qwen3.5's and Qwen3-Coder's templates write), the
// tokens that must render and its thinking marks.
func TestQwen35Dialect(t *testing.T) {
	t.Parallel()
	checkDialect(t, Qwen35, "qwen35", []string{"<tool_call>\n<function=" + "{{ name }}>", "{{- '<tool_call>\\n<function=' + tool_call.name + '>\\n' }}"}, []string{"<tool_call>", "</tool_call>"}, ThinkTags)
}

// TestQwen35Grammar: the grammar of calls in the XML-like form matches
// them as the template writes them, values valid under their
// parameters' schemas; it refuses the JSON form, unknown tools, values
// out of their schema, a missing required parameter and malformed
// blocks. Lazy, it is what follows the trigger <tool_call>.
func TestQwen35Grammar(t *testing.T) {
	t.Parallel()
	on := "<tool_call>\n<function=HassTurnOn>\n<parameter=name>\nkitchen light\n</parameter>\n</function>\n</tool_call>"
	set := "<tool_call>\n<function=HassLightSet>\n<parameter=brightness>\n40\n</parameter>\n</function>\n</tool_call>"
	checkGrammar(t, Qwen35, grammarTools, []grammarCase{
		{"", false, []string{
			on, set, on + "\n" + set,
			"<tool_call>\n<function=HassTurnOn>\n</function>\n</tool_call>",
			"<tool_call>\n<function=HassTurnOn>\n<parameter=name>\ntwo\nlines, <b>bold</b> </para </parameter \n</parameter>\n<parameter=area>\n\n</parameter>\n</function>\n</tool_call>",
			"<tool_call>\n<function=HassTurnOn>\n<parameter=name>\nends with <\n</parameter>\n</function>\n</tool_call>",
		}, []string{
			`<tool_call>{"name": "HassTurnOn", "arguments": {}}</tool_call>`,
			"<tool_call>\n<function=Nope>\n</function>\n</tool_call>",
			"<tool_call>\n<function=HassLightSet>\n<parameter=brightness>\n101\n</parameter>\n</function>\n</tool_call>",
			"<tool_call>\n<function=HassLightSet>\n<parameter=brightness>\n\"40\"\n</parameter>\n</function>\n</tool_call>",
			"<tool_call>\n<function=HassLightSet>\n</function>\n</tool_call>",
			"<tool_call>\n<function=HassTurnOn>\n<parameter=name>\na</parameter>b\n</parameter>\n</function>\n</tool_call>",
			"<tool_call>\n<function=HassTurnOn>\n<parameter=name>\na</tool_call>b\n</parameter>\n</function>\n</tool_call>",
			"<tool_call>\n<function=HassTurnOn>\n<parameter=name>\na\n</function>\n</tool_call>",
			"<tool_call>\n<function=HassTurnOn>\n<parameter=nope>\na\n</parameter>\n</function>\n</tool_call>",
			"<tool_call>\n<function=HassTurnOn>\n</function>\n",
			on + set,
		}},
		{"HassLightSet", false, []string{set}, []string{on}},
		{"", true, []string{"\n<function=HassTurnOn>\n</function>\n</tool_call>", strings.TrimPrefix(on, "<tool_call>") + "\n" + set}, []string{on}},
	})
	for _, bad := range []string{
		`{"type": "function", "function": {"name": "a b"}}`,
		`{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {"a<b": {"type": "string"}}}}}`,
		`{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {"s": {"type": "string", "pattern": "^a+$"}}}}}`,
		`{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {"s": {"enum": ["x</parameter>"]}}}}}`,
	} {
		if _, _, err := Qwen35.Grammar([]json.RawMessage{json.RawMessage(bad)}, "", false, false); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
	if _, _, err := Qwen35.Grammar(grammarTools, "Missing", false, false); err == nil {
		t.Error("a named tool that is not offered: no error")
	}
}

// TestQwen35TypedValues: with the tools' schemas (Schemas), each value is
// read as its parameter's type: a string stays a string whatever it
// looks like, True and None (as the template writes them) are a boolean
// and null, numbers, objects and lists are JSON; a parameter no schema
// types is read from its text.
func TestQwen35TypedValues(t *testing.T) {
	t.Parallel()
	tools := []json.RawMessage{json.RawMessage(`{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {
		"s": {"type": "string"}, "n": {"type": "integer"}, "x": {"type": "number"}, "b": {"type": "boolean"}, "z": {"type": ["string", "null"]},
		"e": {"enum": ["50", "on"]}, "o": {"type": "object"}, "l": {"type": "array"}, "u": {"anyOf": [{"type": "integer"}, {"type": "string"}]}}}}}`)}
	param := func(k, v string) string { return "<parameter=" + k + ">\n" + v + "\n</parameter>\n" }
	text := "<tool_call>\n<function=f>\n" + param("s", "50") + param("n", "-3") + param("x", "2.5") + param("b", "True") + param("z", "None") +
		param("e", "50") + param("o", `{"a": [1, true]}`) + param("l", `["x", 2]`) + param("u", "7") + param("free", "false") + "</function>\n</tool_call>"
	want := `{"s":"50","n":-3,"x":2.5,"b":true,"z":null,"e":"50","o":{"a": [1, true]},"l":["x", 2],"u":7,"free":false}`
	p := NewToolParser(Qwen35, []string{"f"})
	p.Schemas(tools)
	_, k1 := p.Add(text)
	_, k2 := p.Flush()
	calls := append(k1, k2...)
	if len(calls) != 1 || string(calls[0].Arguments) != want {
		t.Fatalf("calls %s, want f%s", FmtCalls(calls), want)
	}
	// Without the schemas: guessed from the text.
	p = NewToolParser(Qwen35, []string{"f"})
	_, k1 = p.Add(text)
	_, k2 = p.Flush()
	calls = append(k1, k2...)
	if len(calls) != 1 || !strings.Contains(string(calls[0].Arguments), `"s":50`) || !strings.Contains(string(calls[0].Arguments), `"b":"True"`) {
		t.Fatalf("calls %s", FmtCalls(calls))
	}
}

// TestQwen35GrammarParses: what the grammar lets a model write, the
// parser (with the tools' schemas) reads back as calls to the tools
// offered whose arguments are valid under their schemas: random walks
// through the grammars of Home Assistant's tools and of one tool per
// schema of engine/grammar's testdata/schemas.json.
func TestQwen35GrammarParses(t *testing.T) {
	t.Parallel()
	var schemas map[string]json.RawMessage
	grammarTestdata(t, "schemas.json", &schemas)
	var assist []json.RawMessage
	grammarTestdata(t, "ha-tools.json", &assist)
	sets := map[string][]json.RawMessage{"home-assistant": assist}
	for name, s := range schemas {
		if bytes.Contains(s, []byte(`"$ref"`)) {
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
		src, _, err := Qwen35.Grammar(tools, "", false, false)
		if err != nil {
			t.Logf("%s: %v", name, err) // parameters the XML form cannot take
			continue
		}
		g, err := grammar.Parse(src)
		if err != nil {
			t.Fatalf("%s: %v\n%s", name, err, src)
		}
		compiled++
		params := map[string]*jsonschema.Schema{}
		for _, raw := range tools {
			var tl struct {
				Function struct {
					Name       string          `json:"name"`
					Parameters json.RawMessage `json:"parameters"`
				} `json:"function"`
			}
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
			out := generateSteered(t, c, uint64(seed), xmlSteer)
			p := NewToolParser(Qwen35, ToolNames(tools))
			p.Schemas(tools)
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

// xmlSteer steers a walk through an XML call grammar to close what is
// open: the next byte of the closing tags that the text has begun.
func xmlSteer(out []byte) string {
	const closing = "\n</parameter>\n</function>\n</tool_call>"
	for k := min(len(closing)-1, len(out)); k > 0; k-- {
		if bytes.HasSuffix(out, []byte(closing[:k])) {
			return closing[k : k+1]
		}
	}
	return "\n"
}

// TestQwen35GrammarBounds: the grammar of a big tool set (128 tools,
// the requests' limit, each Home Assistant's intents renamed) keeps
// within the compiler's budgets (no ErrTooLarge), its text grows with
// the tools linearly (one shared rule for raw text, not one per
// parameter), and a matcher masks and walks it.
func TestQwen35GrammarBounds(t *testing.T) {
	t.Parallel()
	var assist []json.RawMessage
	grammarTestdata(t, "ha-tools.json", &assist)
	many := func(n int) []json.RawMessage {
		var out []json.RawMessage
		for i := 0; len(out) < n; i++ {
			var tl map[string]any
			if err := json.Unmarshal(assist[i%len(assist)], &tl); err != nil {
				t.Fatal(err)
			}
			f := tl["function"].(map[string]any)
			f["name"] = f["name"].(string) + "_" + strconv.Itoa(i)
			b, _ := json.Marshal(tl)
			out = append(out, b)
		}
		return out
	}
	size := map[int]int{}
	for _, n := range []int{16, 128} {
		tools := many(n)
		src, _, err := Qwen35.Grammar(tools, "", false, false)
		if err != nil {
			t.Fatal(err)
		}
		size[n] = len(src)
		if c := strings.Count(src, "\nxml-text ::="); c != 1 {
			t.Errorf("%d tools: %d raw text rules", n, c)
		}
		g, err := grammar.ParseContext(context.Background(), src)
		if err != nil {
			t.Fatalf("%d tools: %v", n, err)
		}
		tagged, _, err := Hermes.Grammar(tools, "", false, false)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%d tools: grammar of %d bytes (the tagged JSON one: %d)", n, len(src), len(tagged))
		if len(src) > 2*len(tagged) {
			t.Errorf("%d tools: %d bytes, more than twice the JSON grammar's %d", n, len(src), len(tagged))
		}
		out := generateSteered(t, grammar.Bind(g, testVocab()), 1, xmlSteer)
		p := NewToolParser(Qwen35, ToolNames(tools))
		p.Schemas(tools)
		_, k1 := p.Add(string(out))
		_, k2 := p.Flush()
		if len(k1)+len(k2) == 0 {
			t.Errorf("%d tools: no call in %q", n, out)
		}
	}
	if size[128] > 9*size[16] {
		t.Errorf("grammar of 16 tools %d bytes, of 128 %d: more than linear", size[16], size[128])
	}
}
