package dialect

import (
	"encoding/json"
	"math/rand/v2"
	"os"
	"strings"
	"testing"

	"github.com/geisten/geist/engine/grammar"
)

// The grammars of every dialect's calls; the helpers of the families'
// grammar tests.

// grammarTools are the tools of the families' grammar tests.
var grammarTools = []json.RawMessage{
	json.RawMessage(`{"type": "function", "function": {"name": "HassTurnOn", "parameters": {"type": "object", "properties": {"name": {"type": "string"}, "area": {"type": "string"}}}}}`),
	json.RawMessage(`{"type": "function", "function": {"name": "HassLightSet", "parameters": {"type": "object", "properties": {"brightness": {"type": "integer", "minimum": 0, "maximum": 100}}, "required": ["brightness"]}}}`),
}

// grammarCase is a grammar of calls to grammarTools (only the one named,
// lazy) and texts it must match whole (good) and must not (bad).
type grammarCase struct {
	only string
	lazy bool
	good []string
	bad  []string
}

// checkGrammar holds d's grammars of calls to tools to the cases, and
// their triggers: a lazy grammar's is the opening of d's calls (Llama's,
// which has none, {"name"), a whole one has none.
func checkGrammar(t *testing.T, d Dialect, tools []json.RawMessage, cases []grammarCase) {
	t.Helper()
	v := testVocab()
	for _, c := range cases {
		src, trigger, err := d.Grammar(tools, c.only, c.lazy, false)
		if err != nil {
			t.Fatal(err)
		}
		if c.lazy != (trigger != "") || trigger != "" && d.Tags().Open != "" && trigger != d.Tags().Open {
			t.Errorf("%v %q lazy %v: trigger %q", d, c.only, c.lazy, trigger)
		}
		g, err := grammar.Parse(src)
		if err != nil {
			t.Fatalf("%v\n%s", err, src)
		}
		comp := grammar.Bind(g, v)
		for _, s := range c.good {
			m := comp.NewMatcher()
			if !m.AcceptBytes([]byte(s)) || !m.CanEnd() {
				t.Errorf("%v %q: %q refused", d, c.only, s)
			}
		}
		for _, s := range c.bad {
			m := comp.NewMatcher()
			if m.AcceptBytes([]byte(s)) && m.CanEnd() {
				t.Errorf("%v %q: %q accepted", d, c.only, s)
			}
		}
	}
}

// TestOneToolCall: the one-call grammar of every syntax (OpenAI's
// parallel_tool_calls false) accepts one call and refuses two, which the
// grammar of several calls accepts; a list syntax's list has exactly one
// element. Lazy grammars are what follows the trigger.
func TestOneToolCall(t *testing.T) {
	t.Parallel()
	tools := []json.RawMessage{
		json.RawMessage(`{"type": "function", "function": {"name": "HassTurnOn", "parameters": {"type": "object", "properties": {"area": {"type": "string"}}}}}`),
		json.RawMessage(`{"type": "function", "function": {"name": "HassLightSet", "parameters": {"type": "object", "properties": {"brightness": {"type": "integer"}}, "required": ["brightness"]}}}`),
	}
	const a, b = `{"name": "HassTurnOn", "arguments": {"area": "hall"}}`, `{"name": "HassLightSet", "arguments": {"brightness": 40}}`
	const xa, xb = "<function=HassTurnOn>\n<parameter=area>\nhall\n</parameter>\n</function>", "<function=HassLightSet>\n<parameter=brightness>\n40\n</parameter>\n</function>"
	const la, lb = `{"name": "HassTurnOn", "parameters": {"area": "hall"}}`, `{"name": "HassLightSet", "parameters": {"brightness": 40}}`
	v := testVocab()
	for _, c := range []struct {
		syntax   Dialect
		lazy     bool
		one, two string
	}{
		{Hermes, false, "<tool_call>\n" + a + "</tool_call>", "<tool_call>\n" + a + "</tool_call>\n<tool_call>\n" + b + "</tool_call>"},
		{Hermes, true, "\n" + a + "</tool_call>", "\n" + a + "</tool_call>\n<tool_call>\n" + b + "</tool_call>"},
		{Llama, false, la, la + "; " + lb},
		{Any, false, a, a + "\n" + b},
		{Phi4, false, "<|tool_call|>[" + a + "]<|/tool_call|>", "<|tool_call|>[" + a + ", " + b + "]<|/tool_call|>"},
		{Phi4, true, "[" + a + "]<|/tool_call|>", "[" + a + ", " + b + "]<|/tool_call|>"},
		{Granite, false, "<|tool_call|>[" + a + "]", "<|tool_call|>[" + a + ", " + b + "]"},
		{Granite, true, "[" + a + "]", "[" + a + ", " + b + "]"},
		{Qwen35, false, "<tool_call>\n" + xa + "\n</tool_call>", "<tool_call>\n" + xa + "\n</tool_call>\n<tool_call>\n" + xb + "\n</tool_call>"},
		{Qwen35, true, "\n" + xa + "\n</tool_call>", "\n" + xa + "\n</tool_call>\n<tool_call>\n" + xb + "\n</tool_call>"},
	} {
		accepts := func(src, s string) bool {
			g, err := grammar.Parse(src)
			if err != nil {
				t.Fatalf("%v\n%s", err, src)
			}
			m := grammar.Bind(g, v).NewMatcher()
			return m.AcceptBytes([]byte(s)) && m.CanEnd()
		}
		one, _, err := c.syntax.Grammar(tools, "", c.lazy, true)
		if err != nil {
			t.Fatal(err)
		}
		many, _, err := c.syntax.Grammar(tools, "", c.lazy, false)
		if err != nil {
			t.Fatal(err)
		}
		if !accepts(one, c.one) {
			t.Errorf("syntax %d lazy %v: one call %q refused", c.syntax, c.lazy, c.one)
		}
		if accepts(one, c.two) {
			t.Errorf("syntax %d lazy %v: two calls %q accepted", c.syntax, c.lazy, c.two)
		}
		if !accepts(many, c.two) {
			t.Errorf("syntax %d lazy %v: the grammar of several calls refuses %q", c.syntax, c.lazy, c.two)
		}
	}
	// Llama's lazy grammar is one call after {"name" in both.
	one, _, err := Llama.Grammar(tools, "HassLightSet", true, true)
	if err != nil {
		t.Fatal(err)
	}
	g, err := grammar.Parse(one)
	if err != nil {
		t.Fatal(err)
	}
	if m := grammar.Bind(g, v).NewMatcher(); !m.AcceptBytes([]byte(`: "HassLightSet", "parameters": {"brightness": 5}}`)) || !m.CanEnd() {
		t.Errorf("lazy Llama: one call refused")
	}
	if _, _, err := Any.Grammar(tools, "", true, true); err == nil {
		t.Error("lazy plain JSON: no error")
	}
}

// generateCalls walks a call grammar with random tokens, steered to
// close what is open as the text grows (generate's way, with the
// parentheses of calls).
func generateCalls(t *testing.T, c *grammar.Compiled, seed uint64) []byte {
	return generateSteered(t, c, seed, func([]byte) string { return `"` })
}

// generateSteered is generateCalls steered by the bytes that end what is
// open: always one of first(text so far) when allowed (a string's quote;
// the line break before an XML block's closing, then its '<'), else one
// of "}])<" half the time.
func generateSteered(t *testing.T, c *grammar.Compiled, seed uint64, first func([]byte) string) []byte {
	r := rand.New(rand.NewPCG(seed, 11))
	m := c.NewMatcher()
	mask := make([]uint64, (c.Vocab().Size()+63)/64)
	var out []byte
	for step := 0; step < 3000; step++ {
		m.Mask(mask)
		var allowed []int32
		for id := int32(0); id < int32(c.Vocab().Size()); id++ {
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
				if p := c.Vocab().Piece(a); len(p) == 1 && strings.IndexByte(first(out), p[0]) >= 0 {
					id = a
					break
				}
			}
			for _, a := range allowed {
				p := c.Vocab().Piece(a)
				if len(p) != 1 || id >= 0 {
					continue
				}
				if strings.IndexByte("}])<", p[0]) >= 0 && r.IntN(2) == 0 {
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
			t.Fatalf("seed %d: allowed token %q refused", seed, c.Vocab().Piece(id))
		}
		out = append(out, c.Vocab().Piece(id)...)
	}
	t.Fatalf("seed %d: no end after 3000 tokens: %q", seed, out)
	return nil
}

// testVocab is a vocabulary of every byte and some longer pieces (as
// engine/grammar's tests have it); token 0 ends generation.
func testVocab() *grammar.Vocab {
	pieces := [][]byte{nil}
	for b := 0; b < 256; b++ {
		pieces = append(pieces, []byte{byte(b)})
	}
	for _, f := range []string{`{"`, `":`, `": `, `",`, `", "`, `"}`, `}}`, `]}`, `[{`, `true`, `false`, `null`, `name`, `light`, ` "`, `\n`, `\"`, `\\`, `12`, `-1`, `0.5`, `e+`, `é`, `ab`, `cat`, `dogs`, `2024-`, `T12:`, `@ex`, `.com`, `"\n`, `  `} {
		pieces = append(pieces, []byte(f))
	}
	return grammar.NewVocab(pieces, []int32{0})
}

// grammarTestdata decodes the JSON file name of engine/grammar's
// testdata into v: Home Assistant's tools (ha-tools.json), the AI Task
// schemas (schemas.json).
func grammarTestdata(tb testing.TB, name string, v any) {
	raw, err := os.ReadFile("../grammar/testdata/" + name)
	if err == nil {
		err = json.Unmarshal(raw, v)
	}
	if err != nil {
		tb.Fatal(err)
	}
}

// accepts reports whether g matches s whole.
func accepts(t *testing.T, g *grammar.Grammar, s string) bool {
	t.Helper()
	c := grammar.Bind(g, grammar.NewVocab([][]byte{[]byte("x")}, nil))
	m := c.NewMatcher()
	return m.AcceptBytes([]byte(s)) && m.CanEnd()
}
