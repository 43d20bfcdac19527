package dialect

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

func parseAll(format Dialect, tools []string, pieces []string) (string, []ToolCall) {
	p := NewToolParser(format, tools)
	var content strings.Builder
	var calls []ToolCall
	for _, s := range pieces {
		c, cs := p.Add(s)
		content.WriteString(c)
		calls = append(calls, cs...)
	}
	c, cs := p.Flush()
	content.WriteString(c)
	return content.String(), append(calls, cs...)
}

// splits returns text whole, byte by byte, and in pieces of 3 and 7.
func splits(text string) [][]string {
	out := [][]string{{text}}
	for _, n := range []int{1, 3, 7} {
		var ps []string
		for i := 0; i < len(text); i += n {
			ps = append(ps, text[i:min(i+n, len(text))])
		}
		out = append(out, ps)
	}
	return out
}

// parserTools are the tools offered in the families' parser tests.
var parserTools = []string{"HassTurnOn", "get_weather"}

// call is a parsed call of name with the JSON arguments args.
func call(name, args string) ToolCall { return ToolCall{Name: name, Arguments: json.RawMessage(args)} }

// parserCase is an answer and what a parser makes of it, whole and in
// pieces.
type parserCase struct {
	name    string
	text    string
	content string
	calls   []ToolCall
}

// checkParser holds d's parser to the cases, offered parserTools.
func checkParser(t *testing.T, d Dialect, cases []parserCase) {
	t.Helper()
	for _, c := range cases {
		for _, ps := range splits(c.text) {
			content, calls := parseAll(d, parserTools, ps)
			if content != c.content || !reflect.DeepEqual(calls, c.calls) {
				t.Errorf("%s (pieces of %d): got %q %s, want %q %s", c.name, len(ps[0]), content, fmtCalls(calls), c.content, fmtCalls(c.calls))
			}
		}
	}
}

func fmtCalls(cs []ToolCall) string {
	var b strings.Builder
	for _, c := range cs {
		b.WriteString(c.Name + string(c.Arguments) + " ")
	}
	return "[" + b.String() + "]"
}

// TestToolParserStreams: text before a call streams before the call is
// complete; a call is returned as soon as its closing tag arrives.
func TestToolParserStreams(t *testing.T) {
	t.Parallel()
	p := NewToolParser(Hermes, nil)
	if c, _ := p.Add("The kitchen"); c != "The kitchen" {
		t.Errorf("plain text held back: %q", c)
	}
	if c, _ := p.Add(" light <tool"); c != " light" {
		t.Errorf("got %q, want the text before the possible tag", c)
	}
	if c, cs := p.Add("_call>{\"name\": \"a\", \"arguments\": {}}"); c != "" || cs != nil {
		t.Errorf("an open call leaked: %q %v", c, cs)
	}
	if _, cs := p.Add("</tool_call>"); len(cs) != 1 || cs[0].Name != "a" {
		t.Errorf("call not returned at its closing tag: %v", cs)
	}
}

func FuzzToolParser(f *testing.F) {
	f.Add("<tool_call>{\"name\": \"a\", \"arguments\": {}}</tool_call>", 3)
	f.Add("{\"name\": \"a\", \"parameters\": {\"x\": [1, 2]}};{", 1)
	f.Add("text <tool_call> <tool_call></tool_call>", 2)
	f.Add("<|tool_call|>[{\"name\": \"a\", \"arguments\": {}}]<|/tool_call|> x", 4)
	f.Add("ok <|tool_call_start|>[a(x=\"y\", n=[1, {'k': None}]), b()]<|tool_call_end|> done", 5)
	f.Add("<|tool_call_start|>[a(s='\\u00e9', t=True)", 2)
	f.Add("ok <|tool_call>call:a{s:<|\"|>x<tool_call|><|\"|>,n:[1,{k:null}]}<tool_call|><|tool_call>call:a{}<tool_call|>", 5)
	f.Add("<|tool_call>call:a{s:<|\"|>open <tool_call|> <|tool_call>call:a{b:}", 2)
	f.Fuzz(func(t *testing.T, text string, n int) {
		n = max(1, n%17)
		for _, format := range []Dialect{Any, Hermes, Llama, Phi4, Granite, LFM2, Gemma4} {
			var ps []string
			for i := 0; i < len(text); i += n {
				ps = append(ps, text[i:min(i+n, len(text))])
			}
			c1, k1 := parseAll(format, []string{"a"}, ps)
			c2, k2 := parseAll(format, []string{"a"}, []string{text})
			if c1 != c2 || !reflect.DeepEqual(k1, k2) {
				t.Fatalf("%v: streamed %q %v, whole %q %v", format, c1, k1, c2, k2)
			}
			if len(k1) == 0 && c1 != text && strings.TrimSpace(c1) != strings.TrimSpace(text) {
				t.Fatalf("%v: no calls, but content %q differs from the text %q", format, c1, text)
			}
		}
	})
}

// TestToolParserFirstOnly: limited to the first call (OpenAI's
// parallel_tool_calls false), the parser returns the content before it
// and that call alone, of every format; further calls and text after it
// are dropped, a list is cut to its first element, and a malformed call
// before it stays content.
func TestToolParserFirstOnly(t *testing.T) {
	t.Parallel()
	tools := []string{"HassTurnOn", "get_weather"}
	call := func(name, args string) ToolCall { return ToolCall{Name: name, Arguments: json.RawMessage(args)} }
	on := []ToolCall{call("HassTurnOn", `{"name": "Kitchen"}`)}
	const a, b = `{"name": "HassTurnOn", "arguments": {"name": "Kitchen"}}`, `{"name": "get_weather", "arguments": {"city": "Köln"}}`
	for _, c := range []struct {
		name    string
		format  Dialect
		text    string
		content string
		calls   []ToolCall
	}{
		{"tagged two, text after", Hermes, "Sure.\n<tool_call>\n" + a + "\n</tool_call>\n<tool_call>\n" + b + "\n</tool_call>\nDone.", "Sure.", on},
		{"tagged one, text after", Hermes, "<tool_call>" + a + "</tool_call> The light is on.", "", on},
		{"tagged malformed first", Hermes, "<tool_call>{\"name\": </tool_call><tool_call>" + a + "</tool_call><tool_call>" + b + "</tool_call>", "<tool_call>{\"name\": </tool_call>", on},
		{"tagged unclosed", Hermes, "<tool_call>" + a, "", on},
		{"plain text", Hermes, "No call.", "No call.", nil},
		{"any: two", Any, "<tool_call>" + a + "</tool_call><tool_call>" + b + "</tool_call>", "", on},
		{"llama two", Llama, `{"name": "HassTurnOn", "parameters": {"name": "Kitchen"}}; {"name": "get_weather", "parameters": {}}`, "", on},
		{"phi4 list of two", Phi4, "<|tool_call|>[" + a + ", " + b + "]<|/tool_call|>", "", on},
		{"phi4 two lists", Phi4, "Ok <|tool_call|>[" + a + "]<|/tool_call|><|tool_call|>[" + b + "]<|/tool_call|>", "Ok", on},
		{"granite list of two", Granite, "<|tool_call|>[" + a + ", " + b + "]", "", on},
		{"lfm2 list of two, text after", LFM2, "Sure.\n<|tool_call_start|>[HassTurnOn(name='Kitchen'), get_weather(city=\"Köln\")]<|tool_call_end|>Checking.", "Sure.",
			[]ToolCall{call("HassTurnOn", `{"name":"Kitchen"}`)}},
		{"gemma4 two, text after", Gemma4, `Sure. <|tool_call>call:HassTurnOn{name:<|"|>Kitchen<|"|>}<tool_call|><|tool_call>call:get_weather{city:<|"|>Köln<|"|>}<tool_call|> Done.`, "Sure.",
			[]ToolCall{call("HassTurnOn", `{"name":"Kitchen"}`)}},
	} {
		for _, ps := range splits(c.text) {
			p := NewToolParser(c.format, tools)
			p.FirstOnly()
			var content strings.Builder
			var calls []ToolCall
			for _, s := range ps {
				co, cs := p.Add(s)
				content.WriteString(co)
				calls = append(calls, cs...)
			}
			co, cs := p.Flush()
			content.WriteString(co)
			calls = append(calls, cs...)
			if content.String() != c.content || !reflect.DeepEqual(calls, c.calls) {
				t.Errorf("%s (pieces of %d): got %q %s, want %q %s", c.name, len(ps[0]), content.String(), fmtCalls(calls), c.content, fmtCalls(c.calls))
			}
			if p.Done() != (len(c.calls) > 0) {
				t.Errorf("%s (pieces of %d): Done %v", c.name, len(ps[0]), p.Done())
			}
		}
	}
	// Done comes with the call's closing tag: generation may end there.
	p := NewToolParser(Hermes, tools)
	p.FirstOnly()
	if _, cs := p.Add("<tool_call>" + a); cs != nil || p.Done() {
		t.Errorf("an open call: %v, done %v", cs, p.Done())
	}
	if _, cs := p.Add("</tool_call>"); len(cs) != 1 || !p.Done() {
		t.Errorf("at the closing tag: %v, done %v", cs, p.Done())
	}
	if co, cs := p.Add("<tool_call>" + b + "</tool_call> more"); co != "" || cs != nil {
		t.Errorf("after the first call: %q %v", co, cs)
	}
}

// TestToolParserCut: an answer cut off (by its token limit) inside a
// call never returns that call's markup as content: the unfinished call
// is dropped, and of a list the calls complete before the cut are
// returned (Granite's, Phi-4-mini's); a complete answer is read as Flush
// reads it.
func TestToolParserCut(t *testing.T) {
	t.Parallel()
	tools := []string{"HassTurnOn", "get_weather"}
	call := func(name, args string) ToolCall { return ToolCall{Name: name, Arguments: json.RawMessage(args)} }
	on := call("HassTurnOn", `{"name": "Kitchen"}`)
	const a, b = `{"name": "HassTurnOn", "arguments": {"name": "Kitchen"}}`, `{"name": "get_weather", "arguments": {"city": "Köln"}}`
	for _, c := range []struct {
		name    string
		format  Dialect
		text    string
		content string
		calls   []ToolCall
	}{
		{"tagged unfinished", Hermes, "Sure.\n<tool_call>\n{\"name\": \"HassTurnOn\", \"argu", "Sure.", nil},
		{"tagged one done, one unfinished", Hermes, "<tool_call>" + a + "</tool_call>\n<tool_call>{\"name\": \"get_w", "", []ToolCall{on}},
		{"tagged opening tag cut", Hermes, "Sure. <tool_ca", "Sure. ", nil},
		{"granite list cut in the second", Granite, "<|tool_call|>[" + a + ", {\"name\": \"get_weather\", \"arguments\": {\"ci", "", []ToolCall{on}},
		{"granite list cut after the first", Granite, "<|tool_call|>[" + a + ",", "", []ToolCall{on}},
		{"granite list cut in the first", Granite, "<|tool_call|>[{\"name\": \"HassT", "", nil},
		{"granite whole list", Granite, "<|tool_call|>[" + a + ", " + b + "]", "", []ToolCall{on, call("get_weather", `{"city": "Köln"}`)}},
		{"phi4 list cut", Phi4, "<|tool_call|>[" + a + ", " + b[:20], "", []ToolCall{on}},
		{"gemma4 cut", Gemma4, `Sure. <|tool_call>call:HassTurnOn{name:<|"|>Kit`, "Sure.", nil},
		{"plain text", Hermes, "The light is", "The light is", nil},
	} {
		for _, ps := range splits(c.text) {
			p := NewToolParser(c.format, tools)
			var content strings.Builder
			var calls []ToolCall
			for _, s := range ps {
				co, cs := p.Add(s)
				content.WriteString(co)
				calls = append(calls, cs...)
			}
			co, cs := p.Cut()
			content.WriteString(co)
			calls = append(calls, cs...)
			if content.String() != c.content || !reflect.DeepEqual(calls, c.calls) {
				t.Errorf("%s (pieces of %d): got %q %s, want %q %s", c.name, len(ps[0]), content.String(), fmtCalls(calls), c.content, fmtCalls(c.calls))
			}
		}
	}
}
