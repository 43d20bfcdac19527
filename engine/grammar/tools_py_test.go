package grammar

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"os"
	"strings"
	"testing"

	"github.com/geisten/geist/engine/chat"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

func TestToolCallsLFM2(t *testing.T) {
	t.Parallel()
	tools := []json.RawMessage{
		json.RawMessage(`{"type": "function", "function": {"name": "HassTurnOn", "parameters": {"type": "object", "properties": {"name": {"type": "string"}, "area": {"type": "string"}}}}}`),
		json.RawMessage(`{"type": "function", "function": {"name": "HassLightSet", "parameters": {"type": "object", "properties": {"brightness": {"type": "integer", "minimum": 0, "maximum": 100}, "on": {"type": "boolean"}, "color": {"enum": ["red", "warm white", null]}}, "required": ["brightness"]}}}`),
		json.RawMessage(`{"type": "function", "function": {"name": "get-time"}}`),
	}
	v := testVocab()
	for _, c := range []struct {
		only string
		lazy bool
		good []string
		bad  []string
	}{
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
	} {
		src, trigger, err := ToolCalls(tools, c.only, ToolsLFM2, c.lazy)
		if err != nil {
			t.Fatal(err)
		}
		if c.lazy != (trigger == "<|tool_call_start|>") {
			t.Errorf("lazy %v: trigger %q", c.lazy, trigger)
		}
		g, err := Parse(src)
		if err != nil {
			t.Fatalf("%v\n%s", err, src)
		}
		comp := Bind(g, v)
		for _, s := range c.good {
			m := comp.NewMatcher()
			if !m.AcceptBytes([]byte(s)) || !m.CanEnd() {
				t.Errorf("%q lazy %v: %q refused\n%s", c.only, c.lazy, s, src)
			}
		}
		for _, s := range c.bad {
			m := comp.NewMatcher()
			if m.AcceptBytes([]byte(s)) && m.CanEnd() {
				t.Errorf("%q lazy %v: %q accepted", c.only, c.lazy, s)
			}
		}
	}
	for _, bad := range []struct{ tools, want string }{
		{`{"type": "function", "function": {"name": "a b"}}`, "letters, digits"},
		{`{"type": "function", "function": {"name": "a", "parameters": {"type": "object", "properties": {"user id": {"type": "string"}}}}}`, "keyword argument"},
		{`{"type": "function", "function": {"name": "a", "parameters": {"anyOf": [{"type": "object"}]}}}`, `"anyOf"`},
		{`{"type": "function", "function": {"name": "a", "parameters": {"type": "array"}}}`, `"type"`},
		{`{"type": "function", "function": {"name": "a", "parameters": {"type": "object", "properties": {"x": {"type": "string", "format": "hostname"}}}}}`, `"format"`},
	} {
		_, _, err := ToolCalls([]json.RawMessage{json.RawMessage(bad.tools)}, "", ToolsLFM2, false)
		if err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%s: error %v, want one saying %s", bad.tools, err, bad.want)
		}
	}
	// parallel_tool_calls false: a list of one call.
	for _, lazy := range []bool{false, true} {
		src, _, err := OneToolCall(tools, "", ToolsLFM2, lazy)
		if err != nil {
			t.Fatal(err)
		}
		g, err := Parse(src)
		if err != nil {
			t.Fatalf("%v\n%s", err, src)
		}
		comp := Bind(g, v)
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
	if _, _, err := ToolCalls(tools, "Missing", ToolsLFM2, false); err == nil {
		t.Error("a named tool that is not offered: no error")
	}
}

// generateCalls walks a call grammar with random tokens, steered to
// close what is open as the text grows (generate's way, with the
// parentheses of calls).
func generateCalls(t *testing.T, c *Compiled, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, 11))
	m := c.NewMatcher()
	mask := make([]uint64, (c.v.n+63)/64)
	var out []byte
	for step := 0; step < 3000; step++ {
		m.Mask(mask)
		var allowed []int32
		for id := int32(0); id < int32(c.v.n); id++ {
			if mask[id>>6]&(1<<(id&63)) != 0 {
				allowed = append(allowed, id)
			}
		}
		if len(allowed) == 0 {
			t.Fatalf("seed %d: nothing allowed after %q", seed, out)
		}
		if allowed[0] == 0 && r.IntN(200) < step+20 {
			m.AcceptToken(0)
			return out
		}
		id := allowed[r.IntN(len(allowed))]
		if step > 40 && r.IntN(4) > 0 {
			id = -1
			var small []int32
			for _, a := range allowed {
				p := c.v.piece(a)
				if len(p) != 1 {
					continue
				}
				if p[0] == '"' || strings.IndexByte("}])<", p[0]) >= 0 && r.IntN(2) == 0 {
					id = a
					break
				}
				if strings.IndexByte("abcxyz0123.-@:T", p[0]) >= 0 {
					small = append(small, a)
				}
			}
			if id < 0 && len(small) > 0 {
				id = small[r.IntN(len(small))]
			}
			if id < 0 {
				id = allowed[r.IntN(len(allowed))]
			}
		}
		if id == 0 {
			m.AcceptToken(0)
			return out
		}
		if !m.AcceptToken(id) {
			t.Fatalf("seed %d: allowed token %q refused", seed, c.v.piece(id))
		}
		out = append(out, c.v.piece(id)...)
	}
	t.Fatalf("seed %d: no end after 3000 tokens: %q", seed, out)
	return nil
}

// TestToolCallsLFM2Parse: what the LFM2 grammar lets a model write is what
// engine/chat reads as LFM2's calls, with arguments valid under each
// tool's parameters: random walks through the grammar of one tool per
// schema of testdata/schemas.json (the schema as its one required
// argument, and as an optional one beside a string), and of Home
// Assistant's tools.
func TestToolCallsLFM2Parse(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("testdata/schemas.json")
	if err != nil {
		t.Fatal(err)
	}
	var schemas map[string]json.RawMessage
	if err := json.Unmarshal(raw, &schemas); err != nil {
		t.Fatal(err)
	}
	type tool struct {
		Type     string `json:"type"`
		Function struct {
			Name       string          `json:"name"`
			Parameters json.RawMessage `json:"parameters"`
		} `json:"function"`
	}
	sets := map[string][]json.RawMessage{"home-assistant": readTools(t)}
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
		src, _, err := ToolCalls(tools, "", ToolsLFM2, false)
		if err != nil {
			t.Logf("%s: %v", name, err) // parameters the keyword form cannot take
			continue
		}
		g, err := Parse(src)
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
		c := Bind(g, v)
		for seed := range 10 {
			out := generateCalls(t, c, uint64(seed))
			p := chat.NewToolParser(chat.ToolsLFM2, nil)
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
