package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/geisten/geist/engine/chat"
	"github.com/geisten/geist/engine/grammar"
	"github.com/geisten/geist/engine/sample"
	"github.com/geisten/geist/engine/zoo"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

func constrained(t testing.TB, e *Engine, prompt, gbnf string, n int, sp SpecOptions, p sample.Params) ([]int32, string, Stats) {
	t.Helper()
	var ids []int32
	var text []byte
	st, err := e.Generate(context.Background(), Request{Prompt: prompt, MaxTokens: n, Sampling: p, Spec: sp, Grammar: gbnf,
		OnToken: func(id int32) { ids = append(ids, id) },
		OnText:  func(b []byte) error { text = append(text, b...); return nil }})
	if err != nil {
		t.Fatal(err)
	}
	return ids, string(text), st
}

func schemaCases(t *testing.T) (names []string, schemas map[string]json.RawMessage) {
	raw, err := os.ReadFile("grammar/testdata/schemas.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &schemas); err != nil {
		t.Fatal(err)
	}
	for n := range schemas {
		names = append(names, n)
	}
	sort.Strings(names)
	return names, schemas
}

// TestConstrainedOutputValidates: every answer a random-weight model
// samples under a schema (20 seeds each) parses and validates, or was cut
// by the token budget while still a prefix of a valid document.
func TestConstrainedOutputValidates(t *testing.T) {
	e := load(t, "tiny-qwen2-Q4_0", Options{Ctx: 512, Batch: 32, SelfSpec: SelfSpecOff})
	names, schemas := schemaCases(t)
	seeds, budget := 20, 200
	if testing.Short() { // qemu: every seventh schema, 2 seeds
		seeds, budget = 2, 120
		var some []string
		for i := 0; i < len(names); i += 7 {
			some = append(some, names[i])
		}
		names = some
	}
	complete := 0
	for _, name := range names {
		s := schemas[name]
		src, err := grammar.FromSchema(s)
		if err != nil {
			t.Fatal(err)
		}
		c := jsonschema.NewCompiler()
		c.AssertFormat()
		doc, _ := jsonschema.UnmarshalJSON(bytes.NewReader(s))
		if err := c.AddResource("s.json", doc); err != nil {
			t.Fatal(err)
		}
		sch, err := c.Compile("s.json")
		if err != nil {
			t.Fatal(err)
		}
		for seed := range seeds {
			p := sample.Params{Temperature: 0.7, TopK: 40, TopP: 0.95, RepeatPenalty: 1, Seed: uint64(seed)}
			_, text, st := constrained(t, e, "Answer in JSON:", src, budget, SpecOptions{}, p)
			if st.StopReason == "length" {
				continue // cut: checked to be a prefix by the matcher itself
			}
			complete++
			inst, err := jsonschema.UnmarshalJSON(bytes.NewReader([]byte(text)))
			if err != nil {
				t.Fatalf("%s seed %d: %q does not parse: %v", name, seed, text, err)
			}
			if err := sch.Validate(inst); err != nil {
				t.Fatalf("%s seed %d: %q does not validate: %v", name, seed, text, err)
			}
		}
	}
	t.Logf("%d of %d answers complete", complete, len(names)*seeds)
	if 3*complete < len(names)*seeds {
		t.Errorf("only %d of %d answers ended within the budget", complete, len(names)*seeds)
	}
}

// TestConstrainedSpeculationExact: under a grammar, greedy output is the
// same with every speculation mode, and sampling emits seed for seed what
// plain constrained sampling emits; the grammar drafts the forced tokens.
func TestConstrainedSpeculationExact(t *testing.T) {
	e := load(t, "stories260K-F32", Options{Ctx: 256, Batch: 16})
	installLastMLPSkip(e)
	schema := `{"type": "object", "properties": {"name": {"type": "string", "maxLength": 20}, "age": {"type": "integer", "minimum": 0, "maximum": 120}, "tags": {"type": "array", "items": {"enum": ["tall", "small", "kind"]}, "maxItems": 3}}, "required": ["name", "age", "tags"]}`
	src, err := grammar.FromSchema([]byte(schema))
	if err != nil {
		t.Fatal(err)
	}
	prompt := copyHeavy[0]
	want, text, _ := constrained(t, e, prompt, src, 80, SpecOptions{Mode: SpecOff}, greedy())
	t.Logf("greedy: %q", text)
	grammarDrafted := 0
	for _, sp := range []SpecOptions{{Mode: SpecAuto}, {Mode: SpecAuto, Fixed: true}, {Mode: SpecLookup, Fixed: true}, {Mode: SpecSelf, Fixed: true}} {
		got, _, st := constrained(t, e, prompt, src, 80, sp, greedy())
		if !equal(got, want) {
			t.Fatalf("%+v: greedy tokens differ\n got %v\nwant %v", sp, got, want)
		}
		t.Logf("%+v: %+v", sp.Mode, st.Drafters)
		grammarDrafted += st.Drafters["grammar"].Accepted
	}
	if grammarDrafted == 0 {
		t.Error("the grammar drafted no accepted token")
	}
	seeds := 10
	if testing.Short() {
		seeds = 2
	}
	for seed := uint64(1); seed <= uint64(seeds); seed++ {
		p := samplingParams
		p.Seed = seed
		want, _, _ := constrained(t, e, prompt, src, 60, SpecOptions{Mode: SpecOff}, p)
		for _, sp := range []SpecOptions{{Mode: SpecAuto, Fixed: true}, {Mode: SpecSelf, Fixed: true}, {Mode: SpecLookup, Fixed: true, Chains: true}} {
			got, _, _ := constrained(t, e, prompt, src, 60, sp, p)
			if !equal(got, want) {
				t.Fatalf("seed %d, %+v: sampled tokens differ\n got %v\nwant %v", seed, sp, got, want)
			}
		}
	}
}

// TestConstrainedSamplingDistribution extends the chi-square test to a
// masked distribution: the first two tokens under a grammar are
// distributed alike with and without a drafted tree, and the test does
// fail when the acceptance rule is broken.
func TestConstrainedSamplingDistribution(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: 3×6,000 sampled generations are too slow under emulation")
	}
	samples := 6000
	e := load(t, "stories260K-F32", Options{Ctx: 64, Batch: 8})
	prompt := "Once upon a time, there was a little"
	const gbnf = `root ::= " " ("girl" | "boy" | "dog" | "cat" | [a-z]+) " " [a-z]+ "."`
	_, tree := samplingDrafts(t, e, prompt)
	run := func(sp SpecOptions, seed uint64, samples int) map[[2]int32]int {
		counts := map[[2]int32]int{}
		for i := 0; i < samples; i++ {
			p := samplingParams
			p.Seed = seed + uint64(i)
			ids, _, _ := constrained(t, e, prompt, gbnf, 3, sp, p)
			if len(ids) < 2 {
				t.Fatalf("generated %v", ids)
			}
			counts[[2]int32{ids[0], ids[1]}]++
		}
		return counts
	}
	plain := run(SpecOptions{Mode: SpecOff}, 1, samples)
	got := run(SpecOptions{Drafter: tree, Fixed: true}, 1_000_000, samples)
	chi, df, p := chiSquare(plain, got)
	t.Logf("masked tree vs plain: chi² = %.1f, df = %d, p = %.4g", chi, df, p)
	if p <= 0.01 {
		t.Errorf("speculation changes the masked distribution: p = %.4g", p)
	}
	// The broken rule is far off (chi² 2,293 at 6,000 samples): a third
	// of them detects it with a wide margin (13.3 for p = 0.01 at df 4).
	broken := run(SpecOptions{Drafter: tree, Fixed: true, BreakAcceptance: true}, 2_000_000, samples/3)
	chi, df, p = chiSquare(plain, broken)
	t.Logf("broken rule vs plain: chi² = %.1f, df = %d, p = %.4g", chi, df, p)
	if p > 0.01 {
		t.Errorf("the test does not detect a broken acceptance rule: p = %.4g", p)
	}
}

// TestLazyGrammar: with a trigger, the model writes freely (the same text
// as unconstrained) up to the trigger's end, then keeps to the grammar
// until it ends and writes freely again, with and without speculation.
func TestLazyGrammar(t *testing.T) {
	e := load(t, "stories260K-F32", Options{Ctx: 256, Batch: 16, SelfSpec: SelfSpecOff})
	prompt := "Once upon a time"
	_, free, _ := constrained(t, e, prompt, "", 40, SpecOptions{Mode: SpecOff}, greedy())
	i := strings.Index(free, "little")
	if i < 0 {
		t.Fatalf("the free text %q has no trigger", free)
	}
	const gbnf = `root ::= " dog" [a-z ]{0,10} "."`
	re := regexp.MustCompile(`^ dog[a-z ]{0,10}\.`)
	var first string
	for _, sp := range []SpecOptions{{Mode: SpecOff}, {Mode: SpecAuto, Fixed: true}, {Mode: SpecLookup}} {
		var text []byte
		_, err := e.Generate(context.Background(), Request{Prompt: prompt, MaxTokens: 60, Sampling: greedy(), Spec: sp,
			Grammar: gbnf, GrammarTrigger: "little", OnText: func(b []byte) error { text = append(text, b...); return nil }})
		if err != nil {
			t.Fatal(err)
		}
		got := string(text)
		head := free[:i+len("little")]
		if !strings.HasPrefix(got, head) || !re.MatchString(got[len(head):]) {
			t.Errorf("%+v: %q, want %q then the grammar's text", sp, got, head)
		} else if m := re.FindString(got[len(head):]); len(got) == len(head)+len(m) {
			t.Errorf("%+v: %q: nothing after the grammar's text (60 tokens: free text should follow)", sp, got)
		}
		if first == "" {
			first = got
		} else if got != first {
			t.Errorf("%+v: %q differs from plain decoding's %q", sp, got, first)
		}
	}
}

// TestGrammarPhases: a thinking model thinks before the grammar applies
// (whether it opens the block or the prompt did, and the tool call
// trigger counts only after the block); a lazy grammar that ended gives
// way to free text, and its trigger starts it again.
func TestGrammarPhases(t *testing.T) {
	e := loadFile(t, zoo.Path(t, "new", "models", "tiny-qwen3moe-Q4_0.gguf"), Options{Ctx: 128, Batch: 8, SelfSpec: SelfSpecOff})
	if !e.thinks() {
		t.Fatal("tiny-qwen3moe (Qwen3's template) does not think")
	}
	const gbnf = `root ::= "{" [a-z]* "}"`
	enc := func(s string) []int32 { return e.grammarVocab().Longest(nil, []byte(s)) } // no dummy prefix
	newGen := func(req Request, prompt []int32) *generation {
		k, err := e.newConstraint(&req, prompt)
		if err != nil {
			t.Fatal(err)
		}
		return &generation{e: e, con: k}
	}
	feed := func(g *generation, s string) {
		for _, id := range enc(s) {
			g.accept(id)
		}
	}
	allowed := func(g *generation, s string) bool {
		k := g.con
		if k.free() {
			return true
		}
		if k.phase == phOpening {
			k.openingMask()
		} else {
			k.m.Mask(k.mask)
		}
		id := enc(s)[0]
		return k.mask[id>>6]&(1<<(id&63)) != 0
	}
	g := newGen(Request{Grammar: gbnf, GrammarAfterThink: true}, enc("hi"))
	if g.con.phase != phOpening || !allowed(g, "<think>") || !allowed(g, "{") || allowed(g, "x") {
		t.Fatalf("opening: phase %d, <think> %v, { %v, x %v", g.con.phase, allowed(g, "<think>"), allowed(g, "{"), allowed(g, "x"))
	}
	feed(g, "<think>")
	if g.con.phase != phThinking || !allowed(g, "x") {
		t.Fatalf("after <think>: phase %d", g.con.phase)
	}
	feed(g, "a {b} c</think>\n\n")
	if g.con.phase != phActive || allowed(g, "x") || !allowed(g, "{") {
		t.Fatalf("after </think>: phase %d", g.con.phase)
	}
	feed(g, "{ab}")
	if !g.con.m.CanEnd() {
		t.Fatal("the grammar's text did not complete it")
	}

	// A little blank space before <think>, which the grammar does not
	// allow: the grammar stays at its start, and at openingBlank bytes
	// of it the grammar applies.
	g = newGen(Request{Grammar: gbnf, GrammarAfterThink: true}, enc("hi"))
	feed(g, "\n\n")
	if g.con.phase != phOpening || !g.con.gramOK || !allowed(g, "<think>") || !allowed(g, "{") || !allowed(g, " ") {
		t.Fatalf("after blank lines: phase %d, grammar %v, <think> %v, { %v", g.con.phase, g.con.gramOK, allowed(g, "<think>"), allowed(g, "{"))
	}
	feed(g, "<think>")
	if g.con.phase != phThinking {
		t.Fatalf("<think> after blank lines: phase %d", g.con.phase)
	}
	g = newGen(Request{Grammar: gbnf, GrammarAfterThink: true}, enc("hi"))
	feed(g, "\n")
	feed(g, "{")
	if g.con.phase != phActive || !allowed(g, "}") || allowed(g, "{") {
		t.Fatalf("the grammar after a blank line: phase %d", g.con.phase)
	}
	g = newGen(Request{Grammar: gbnf, GrammarAfterThink: true}, enc("hi"))
	feed(g, strings.Repeat(" ", openingBlank-1))
	if g.con.phase != phOpening || !allowed(g, "<think>") || !allowed(g, " ") || allowed(g, "  ") {
		t.Fatalf("%d blanks: phase %d, <think> %v, one more blank %v, two %v", openingBlank-1, g.con.phase, allowed(g, "<think>"), allowed(g, " "), allowed(g, "  "))
	}
	feed(g, " ")
	if g.con.phase != phActive || allowed(g, " ") || allowed(g, "<think>") || !allowed(g, "{") {
		t.Fatalf("%d blanks: phase %d, blank %v, <think> %v", openingBlank, g.con.phase, allowed(g, " "), allowed(g, "<think>"))
	}

	g = newGen(Request{Grammar: gbnf, GrammarAfterThink: true}, enc("hi"))
	feed(g, "{a")
	if g.con.phase != phActive || !allowed(g, "}") || allowed(g, "<think>") {
		t.Fatalf("no thinking block: phase %d", g.con.phase)
	}

	g = newGen(Request{Grammar: gbnf, GrammarAfterThink: true}, enc("hi<think>\n"))
	if g.con.phase != phThinking {
		t.Fatalf("a prompt that opens the block: phase %d", g.con.phase)
	}

	g = newGen(Request{Grammar: gbnf}, enc("hi"))
	if g.con.phase != phActive || allowed(g, "<think>") {
		t.Fatalf("without GrammarAfterThink: phase %d", g.con.phase)
	}

	g = newGen(Request{Grammar: gbnf, GrammarTrigger: "<tool_call>", GrammarAfterThink: true}, enc("hi"))
	if !g.con.free() {
		t.Fatal("lazy: the opening is not free")
	}
	feed(g, "<think>a <tool_call> b")
	if g.con.phase != phThinking {
		t.Fatalf("the trigger inside the thinking block: phase %d", g.con.phase)
	}
	feed(g, "</think>ok <tool_call>")
	if g.con.phase != phActive || allowed(g, "x") {
		t.Fatalf("the trigger after the block: phase %d", g.con.phase)
	}
	feed(g, "{ab}")
	if !g.con.free() {
		t.Fatal("a lazy grammar that may end does not let free text follow")
	}
	feed(g, " done.")
	if g.con.phase != phWaiting {
		t.Fatalf("free text after the call: phase %d", g.con.phase)
	}
	feed(g, "<tool_call>{")
	if g.con.phase != phActive || allowed(g, "{") || !allowed(g, "}") {
		t.Fatalf("the second call: phase %d", g.con.phase)
	}
}

// TestGrammarOpeningBlank: a thinking model's answer forced into tool
// calls (tool_choice required, Granite 3's list, with and without
// parallel_tool_calls) by a model that prefers white space to anything:
// scripted logits, blank tokens far above the rest, the rest random. It
// may open with a little of it, at most openingBlank bytes where the
// grammar has no room for it, and then writes the calls, whole, the
// grammar's own white space bounded by its rules (it once wrote white
// space to max tokens: nothing bounded it on the way to <think>).
func TestGrammarOpeningBlank(t *testing.T) {
	e := loadFile(t, zoo.Path(t, "new", "models", "tiny-qwen3moe-Q4_0.gguf"), Options{Ctx: 128, Batch: 8, SelfSpec: SelfSpecOff})
	tools := []json.RawMessage{
		json.RawMessage(`{"type": "function", "function": {"name": "HassTurnOn", "parameters": {"type": "object", "properties": {"name": {"type": "string", "maxLength": 8}, "area": {"type": "string", "maxLength": 8}}, "required": ["name"]}}}`),
		json.RawMessage(`{"type": "function", "function": {"name": "HassLightSet", "parameters": {"type": "object", "properties": {"brightness": {"type": "integer", "minimum": 0, "maximum": 100}}, "required": ["brightness"]}}}`),
	}
	v := e.grammarVocab()
	var blanks []int32
	for id := int32(0); id < int32(v.Size()); id++ {
		if p := v.Piece(id); len(p) > 0 && isBlank(p) {
			blanks = append(blanks, id)
		}
	}
	if len(blanks) == 0 {
		t.Fatal("the vocabulary has no blank tokens")
	}
	prompt := v.Longest(nil, []byte("hi"))
	const maxTokens = 400
	for _, one := range []bool{false, true} {
		gbnf, _, err := chat.ToolsGranite.Grammar(tools, "", false, one)
		if err != nil {
			t.Fatal(err)
		}
		for seed := uint64(1); seed <= 4; seed++ {
			req := Request{Grammar: gbnf, GrammarAfterThink: true}
			k, err := e.newConstraint(&req, prompt)
			if err != nil {
				t.Fatal(err)
			}
			if k.phase != phOpening {
				t.Fatalf("phase %d, want the opening", k.phase)
			}
			smp, err := sample.New(greedy(), e.model.NVocab)
			if err != nil {
				t.Fatal(err)
			}
			g := &generation{e: e, con: k, smp: smp}
			rng := rand.New(rand.NewPCG(seed, 7))
			logits := make([]float32, e.model.NVocab)
			var text []byte
			ended := false
			for range maxTokens {
				for i := range logits {
					logits[i] = rng.Float32()
				}
				for _, id := range blanks {
					logits[id] += 10
				}
				id, err := g.sample(logits)
				if err != nil {
					t.Fatalf("one %v, seed %d: %v after %q", one, seed, err, text)
				}
				g.accept(id)
				if e.tok.IsEOG(id) {
					ended = true
					break
				}
				text = append(text, e.tok.TokenToPiece(id, true)...)
			}
			if !ended || !k.m.Done() {
				t.Fatalf("one %v, seed %d: no end in %d tokens: %.120q", one, seed, maxTokens, text)
			}
			if lead := len(text) - len(bytes.TrimLeft(text, " \t\r\n")); lead > openingBlank {
				t.Errorf("one %v, seed %d: %d bytes of blank space before the calls", one, seed, lead)
			}
			p := chat.NewToolParser(chat.ToolsGranite, chat.ToolNames(tools))
			content, calls := p.Add(string(text))
			c2, calls2 := p.Flush()
			content, calls = content+c2, append(calls, calls2...)
			if strings.TrimSpace(content) != "" || len(calls) == 0 || one && len(calls) != 1 {
				t.Errorf("one %v, seed %d: %q: %d calls, content %q", one, seed, text, len(calls), content)
			}
			t.Logf("one %v, seed %d: %d calls: %.100q", one, seed, len(calls), text)
		}
	}
}

// TestConstrainedAllocations: a decoding step under a grammar allocates
// nothing once the states it visits have their masks (computed on a
// state's first use and kept with the compiled grammar): the mask, the
// masked sampling, the matcher's advance, and with speculation the
// pruning of the tree and the grammar's own drafts.
func TestConstrainedAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are not meaningful under the race detector")
	}
	if testing.Short() {
		t.Skip("-short (qemu: 30 s): the grammar's code is the same on every architecture, the native run counts its allocations, and TestSpeculativeAllocations counts the steps' own under emulation")
	}
	e := load(t, "stories260K-Q4_0", Options{Ctx: 512, Batch: 16, SelfSpec: SelfSpecOff})
	src, err := grammar.FromSchema([]byte(`{"type": "array", "minItems": 3, "items": {"type": "object", "properties": {"name": {"type": "string", "maxLength": 12}, "n": {"type": "integer"}}, "required": ["name", "n"]}}`))
	if err != nil {
		t.Fatal(err)
	}
	runs := 60
	ids, _ := e.Tokens(&Request{Prompt: "Once upon a time"})
	for _, sp := range []SpecOptions{{Mode: SpecOff}, {Mode: SpecAuto, Fixed: true, DraftMax: 8}} {
		t.Run(string(sp.Mode), func(t *testing.T) {
			g := newTestGeneration(e, &sp, ids)
			con, err := e.newConstraint(&Request{Grammar: src}, ids)
			if err != nil {
				t.Fatal(err)
			}
			g.con = con
			e.Reset()
			if _, _, err := e.prefill(context.Background(), ids[:len(ids)-1]); err != nil {
				t.Fatal(err)
			}
			step := func() {
				if e.state.Len() > 400 || con.m.Done() {
					e.state.Truncate(len(ids) - 1)
					g.history = g.history[:len(ids)]
					con.m.Reset()
				}
				room := 0
				if sp.Mode != SpecOff {
					room = 8
				}
				next, err := g.step(g.history[len(g.history)-1], g.draftTree(room))
				if err != nil {
					t.Fatal(err)
				}
				if err := g.emit(next); err != nil {
					t.Fatal(err)
				}
			}
			resets := 0
			for range 200 { // every state of this small grammar gets its mask
				if con.m.Done() {
					resets++
				}
				step()
			}
			if a := steadyAllocs(runs, step); a != 0 {
				t.Errorf("%v allocations per constrained step", a)
			}
			if sp.Mode != SpecOff && g.st.Drafted == 0 {
				t.Error("nothing drafted (the grammar forces keys and punctuation)")
			}
			var text []byte
			for _, id := range g.history[len(ids):] {
				text = append(text, e.tok.TokenToPiece(id, false)...)
			}
			if !bytes.HasPrefix(bytes.TrimSpace(text), []byte(`[`)) || !bytes.Contains(text, []byte(`"name"`)) {
				t.Errorf("the text does not follow the grammar: %.80q", text)
			}
			t.Logf("%d documents in the warm-up; the last: %.60q", resets, text)
		})
	}
}

// TestGrammarPhasesGemma4: Gemma 4 thinks in its thought channel: under
// GrammarAfterThink its grammar (a tool_choice required answer) lets an
// optional <|channel>thought\n ... <channel|> come first, as llama.cpp's
// Gemma 4 grammar does, and then applies (the thought's text is free);
// an answer may also start with the grammar at once; with thinking off
// the template renders an empty channel in the prompt, and the grammar
// applies from the first token.
func TestGrammarPhasesGemma4(t *testing.T) {
	e := loadFile(t, zoo.Path(t, "new", "models", "tiny-gemma4-Q4_0.gguf"), Options{Ctx: 128, Batch: 8, SelfSpec: SelfSpecOff})
	if !e.Template().SupportsThinking() || !e.thinks() {
		t.Fatalf("SupportsThinking %v, thinks %v: want both", e.Template().SupportsThinking(), e.thinks())
	}
	gv := e.grammarVocab()
	req := Request{Grammar: `root ::= "<|tool_call>call:f{}<tool_call|>"`, GrammarAfterThink: true}
	allowed := func(k *constraint, s string) bool {
		id := gv.Longest(nil, []byte(s))[0]
		return k.mask[id>>6]&(1<<(id&63)) != 0
	}
	g := newTestGeneration(e, &SpecOptions{Mode: SpecOff}, nil)
	for _, c := range []struct{ answer, thought string }{
		{"<|channel>thought\nweigh it<channel|><|tool_call>call:f{}<tool_call|>", "thought"},
		{"<|channel>thought\n<channel|><|tool_call>call:f{}<tool_call|>", "empty thought"},
		{"<|tool_call>call:f{}<tool_call|>", "no thought"},
	} {
		k, err := e.newConstraint(&req, gv.Longest(nil, []byte("<|turn>model\n")))
		if err != nil {
			t.Fatal(err)
		}
		if k.phase != phOpening {
			t.Fatalf("%s: phase %d, want the opening", c.thought, k.phase)
		}
		g.con = k
		thought := false
		for _, id := range gv.Longest(nil, []byte(c.answer)) {
			if !k.free() {
				if k.phase == phOpening {
					k.openingMask()
				} else {
					k.m.Mask(k.mask)
				}
				if k.mask[id>>6]&(1<<(id&63)) == 0 {
					t.Fatalf("%s: %q refused", c.thought, gv.Piece(id))
				}
				if k.phase == phOpening && allowed(k, "x") {
					t.Errorf("%s: x allowed in the opening", c.thought)
				}
			}
			g.accept(id)
			thought = thought || k.phase == phThinking
		}
		if k.phase != phActive || !k.m.CanEnd() || thought != (c.thought != "no thought") {
			t.Errorf("%s: phase %d, grammar may end %v, thought %v", c.thought, k.phase, k.m.CanEnd(), thought)
		}
	}
	off, _ := e.Tokens(&Request{Messages: []chat.Message{{Role: "user", Content: "hi"}}, TemplateVars: map[string]any{"enable_thinking": false}})
	k, err := e.newConstraint(&req, off)
	if err != nil {
		t.Fatal(err)
	}
	if k.phase != phActive || k.free() {
		t.Fatalf("thinking off: phase %d, free %v: want the grammar from the start", k.phase, k.free())
	}
	k.m.Mask(k.mask)
	for s, want := range map[string]bool{"<": true, " ": false, "\n": false, "x": false} {
		if got := allowed(k, s); got != want {
			t.Errorf("thinking off: %q allowed %v, want %v", s, got, want)
		}
	}
}

// TestGrammarOpeningText: under a thinking template with the grammar
// applied after the thinking block, the delivered text holds nothing the
// grammar did not read: the blank space a model writes on its way to a
// <think> that does not come is dropped (it was delivered before: tiny
// Qwen3-MoE answered format json with eight newlines, then the array),
// and a grammar that allows nothing (root ::= "") gets nothing, or a
// thinking block.
func TestGrammarOpeningText(t *testing.T) {
	e := loadFile(t, zoo.Path(t, "new", "models", "tiny-qwen3moe-Q4_0.gguf"), Options{Ctx: 512, Batch: 8, SelfSpec: SelfSpecOff})
	for _, g := range []string{grammar.AnyJSON(), `root ::= ""`} {
		for seed := uint64(1); seed <= 3; seed++ {
			p := sample.DefaultParams()
			p.Seed = seed
			var text []byte
			ids := 0
			_, err := e.Generate(context.Background(), Request{Messages: []chat.Message{{Role: "user", Content: "Describe a person as JSON"}},
				MaxTokens: 40, Sampling: p, Grammar: g, GrammarAfterThink: true,
				OnToken: func(int32) { ids++ },
				OnText:  func(b []byte) error { text = append(text, b...); return nil }})
			if err != nil {
				t.Fatal(err)
			}
			if bytes.HasPrefix(text, []byte("<think>")) {
				continue
			}
			m := grammar.Bind(mustParse(t, g), e.grammarVocab()).NewMatcher()
			if !m.AcceptBytes(text) {
				t.Errorf("seed %d: %.60q is not a prefix of the grammar's text", seed, text)
			}
			t.Logf("seed %d, %d tokens: %.60q", seed, ids, text)
		}
	}
}

func mustParse(t *testing.T, src string) *grammar.Grammar {
	g, err := grammar.Parse(src)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// TestGrammarDepthError: at the matcher's depth bound a token that would
// open one more rule is masked out (under format json the model must
// close a bracket), and where nothing else may follow, the generation
// ends with an error naming the bound, not "the grammar allows no next
// token".
func TestGrammarDepthError(t *testing.T) {
	e := loadFile(t, zoo.Path(t, "new", "models", "tiny-qwen3moe-Q4_0.gguf"), Options{Ctx: 128, Batch: 8, SelfSpec: SelfSpecOff})
	v := e.grammarVocab()
	open := v.Longest(nil, []byte("["))
	if len(open) != 1 {
		t.Fatalf("[ is %d tokens", len(open))
	}
	req := Request{Grammar: `root ::= "[" root "]"`}
	k, err := e.newConstraint(&req, v.Longest(nil, []byte("hi")))
	if err != nil {
		t.Fatal(err)
	}
	smp, err := sample.New(greedy(), e.model.NVocab)
	if err != nil {
		t.Fatal(err)
	}
	g := &generation{e: e, con: k, smp: smp}
	logits := make([]float32, e.model.NVocab)
	logits[open[0]] = 10
	for i := 0; ; i++ {
		id, err := g.sample(logits)
		if err != nil {
			if !errors.Is(err, grammar.ErrDepth) {
				t.Fatalf("after %d brackets: %v, want ErrDepth", i, err)
			}
			t.Logf("after %d brackets: %v", i, err)
			break
		}
		if i > 2*grammar.MaxDepth {
			t.Fatal("no bound on the depth")
		}
		g.accept(id)
	}
	// Format json: at the bound [ is masked out and the model closes.
	req = Request{Grammar: grammar.AnyJSON()}
	if k, err = e.newConstraint(&req, v.Longest(nil, []byte("hi"))); err != nil {
		t.Fatal(err)
	}
	g = &generation{e: e, con: k, smp: smp}
	closeID := v.Longest(nil, []byte("]"))[0]
	logits[closeID] = 5
	depth, deepest := 0, 0
	for i := 0; i < 2*grammar.MaxDepth && (i == 0 || depth > 0); i++ {
		id, err := g.sample(logits)
		if err != nil {
			t.Fatalf("at depth %d: %v", depth, err)
		}
		switch id {
		case open[0]:
			depth++
		case closeID:
			depth--
		default:
			t.Fatalf("at depth %d: %q", depth, v.Piece(id))
		}
		deepest = max(deepest, depth)
		g.accept(id)
	}
	if depth != 0 || deepest < grammar.MaxDepth/2-2 || deepest > grammar.MaxDepth/2 {
		t.Fatalf("depth %d at the end, %d at most", depth, deepest)
	}
	if !k.m.CanEnd() {
		t.Fatal("the closed array cannot end")
	}
}

// TestParsedGrammar: a grammar handed over parsed (Request.Parsed, as the
// core does with engine/constraint's compile) generates exactly what its
// text does, and its Grammar text is not parsed again (a text that would
// not parse beside it is ignored).
func TestParsedGrammar(t *testing.T) {
	e := load(t, "tiny-qwen2-Q4_0", Options{Ctx: 256, Batch: 16, SelfSpec: SelfSpecOff})
	src := `root ::= "{\"a\": " [0-9]+ ", \"b\": \"" [a-z]+ "\"}"`
	run := func(req Request) string {
		var text []byte
		req.Prompt, req.MaxTokens, req.Sampling = "Once upon a time", 24, greedy()
		req.OnText = func(b []byte) error { text = append(text, b...); return nil }
		if _, err := e.Generate(context.Background(), req); err != nil {
			t.Fatal(err)
		}
		return string(text)
	}
	want := run(Request{Grammar: src})
	got := run(Request{Grammar: "root ::= (", Parsed: mustParse(t, src)})
	if got != want || !strings.HasPrefix(got, `{"a": `) {
		t.Errorf("parsed: %q, text: %q", got, want)
	}
	v := e.grammarVocab()
	if a, b := v.BindCached(mustParse(t, src)), v.BindCached(mustParse(t, src)); a != b {
		t.Error("the same grammar bound twice")
	}
}
