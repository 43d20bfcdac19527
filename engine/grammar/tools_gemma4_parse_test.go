package grammar_test

import (
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/geisten/geist/engine/chat"
	"github.com/geisten/geist/engine/grammar"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// TestGemma4GrammarParses: what Gemma 4's tool-call grammar lets a model
// write, engine/chat's parser reads as calls (no content left over) to
// the tools offered, their arguments valid under each tool's schema.
// Random walks through the grammar over a vocabulary of single
// characters and the syntax's tokens write the calls.
func TestGemma4GrammarParses(t *testing.T) {
	t.Parallel()
	tools := grammar.HATools
	names := chat.ToolNames(tools)
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
		calls := grammar.ToolCalls
		if c.one {
			calls = grammar.OneToolCall
		}
		src, trigger, err := calls(tools, c.only, grammar.ToolsGemma4, c.lazy)
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
			p := chat.NewToolParser(chat.ToolsGemma4, names)
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
