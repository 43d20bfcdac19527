package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/geisten/geist/engine/chat"
	"github.com/geisten/geist/engine/sample"
	"github.com/geisten/geist/engine/zoo"
)

type golden struct {
	Cases []struct {
		Prompt       string  `json:"prompt"`
		PromptTokens []int32 `json:"prompt_tokens"`
		Tokens       []int32 `json:"tokens"`
	} `json:"cases"`
}

func readGolden(t testing.TB, name string) golden {
	return readGoldenFile(t, zoo.Path(t, "golden", "gen-"+name+".json"))
}

func readGoldenFile(t testing.TB, path string) golden {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var g golden
	if err := json.Unmarshal(b, &g); err != nil {
		t.Fatal(err)
	}
	return g
}

func load(t testing.TB, name string, opt Options) *Engine {
	return loadFile(t, zoo.Path(t, "models", name+".gguf"), opt)
}

func loadFile(t testing.TB, path string, opt Options) *Engine {
	e, err := Load(path, opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

func greedy() sample.Params { return sample.Params{Temperature: 0, TopP: 1, RepeatPenalty: 1} }

// TestGreedyStories reproduces llama.cpp's greedy continuations of the
// trained stories260K model token for token, prompt tokenization included.
func TestGreedyStories(t *testing.T) {
	for _, name := range []string{"stories260K-F32", "stories260K-F16"} {
		g := readGolden(t, name)
		e := load(t, name, Options{})
		for _, c := range g.Cases {
			req := Request{Prompt: c.Prompt, MaxTokens: len(c.Tokens), Sampling: greedy()}
			toks, err := e.Tokens(&req)
			if err != nil {
				t.Fatal(err)
			}
			if !equal(toks, c.PromptTokens) {
				t.Fatalf("%s: prompt tokens %v, llama.cpp %v", name, toks, c.PromptTokens)
			}
			var got []int32
			req.OnToken = func(id int32) { got = append(got, id) }
			st, err := e.Generate(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			if !equal(got, c.Tokens) {
				t.Errorf("%s %q:\n got %v\nwant %v", name, c.Prompt, got, c.Tokens)
			}
			if st.PromptTokens != len(c.PromptTokens) || st.GeneratedTokens != len(c.Tokens) {
				t.Errorf("stats %+v", st)
			}
		}
	}
}

func equal(a, b []int32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestStreamingAndStop(t *testing.T) {
	e := load(t, "stories260K-F32", Options{})
	var text []byte
	req := Request{Prompt: "Once upon a time", MaxTokens: 96, Sampling: greedy(), Stop: []string{"park"},
		OnText: func(b []byte) error { text = append(text, b...); return nil }}
	st, err := e.Generate(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if st.StopReason != "stop" || string(text) != ", there was a little girl named Lily. She loved to play outside in the " {
		t.Errorf("stop: reason %q text %q", st.StopReason, text)
	}
}

// TestStopFromOnText: OnText returning ErrStop ends the generation there
// as a stop string does (reason "stop", no error, nothing more streamed),
// with and without speculation.
func TestStopFromOnText(t *testing.T) {
	e := load(t, "stories260K-F32", Options{})
	for _, sp := range []SpecOptions{{Mode: SpecOff}, {Mode: SpecAuto, Fixed: true}, {Mode: SpecLookup}} {
		var text []byte
		req := Request{Prompt: "Once upon a time", MaxTokens: 96, Sampling: greedy(), Spec: sp,
			OnText: func(b []byte) error {
				text = append(text, b...)
				if bytes.Contains(text, []byte("Lily")) {
					return ErrStop
				}
				return nil
			}}
		st, err := e.Generate(context.Background(), req)
		if err != nil || st.StopReason != "stop" || string(text) != ", there was a little girl named Lily" {
			t.Errorf("%+v: err %v reason %q text %q", sp, err, st.StopReason, text)
		}
	}
}

func TestCancel(t *testing.T) {
	e := load(t, "stories260K-F32", Options{})
	ctx, cancel := context.WithCancel(context.Background())
	n := 0
	req := Request{Prompt: "Once upon a time", MaxTokens: 200, Sampling: greedy(),
		OnToken: func(int32) {
			n++
			if n == 5 {
				cancel()
			}
		}}
	_, err := e.Generate(ctx, req)
	if !errors.Is(err, context.Canceled) || n != 5 {
		t.Errorf("err %v after %d tokens", err, n)
	}
}

func TestPromptTooLong(t *testing.T) {
	e := load(t, "stories260K-F32", Options{Ctx: 16})
	_, err := e.Generate(context.Background(), Request{Prompt: "Once upon a time there was a little girl named Lily who loved to play", Sampling: greedy()})
	if !errors.Is(err, ErrPromptTooLong) {
		t.Errorf("err = %v", err)
	}
	// Generation stops cleanly when the context fills up.
	st, err := e.Generate(context.Background(), Request{Prompt: "Once upon a time", Sampling: greedy()})
	if err != nil || st.StopReason != "context" || st.PromptTokens+st.GeneratedTokens != 16 {
		t.Errorf("full context: %+v %v", st, err)
	}
}

func TestChatTemplateFallback(t *testing.T) {
	e := load(t, "tiny-qwen2-Q4_0", Options{Ctx: 256})
	req := Request{Prompt: "hi", Chat: true, System: "be brief"}
	p, err := e.renderMessages(&req, req.messages(), true)
	if err != nil {
		t.Fatal(err)
	}
	if p == "hi" || len(p) < 20 {
		t.Errorf("rendered %q", p)
	}
}

func TestScoreMatchesGolden(t *testing.T) {
	g := readGolden(t, "stories260K-F32")
	e := load(t, "stories260K-F32", Options{})
	c := g.Cases[0]
	seq := append(append([]int32{}, c.PromptTokens...), c.Tokens...)
	lp, err := e.Score(context.Background(), seq, 8)
	if err != nil {
		t.Fatal(err)
	}
	if len(lp) != len(seq) || len(lp[0]) != 8 {
		t.Fatalf("shape %d×%d", len(lp), len(lp[0]))
	}
	// Greedy tokens are the top-1 of the scores at the generated positions.
	for i, id := range c.Tokens {
		if top := lp[len(c.PromptTokens)-1+i][0].ID; top != id {
			t.Fatalf("position %d: top %d, greedy %d", i, top, id)
		}
	}
	for _, row := range lp {
		for j := 1; j < len(row); j++ {
			if row[j].Logprob > row[j-1].Logprob {
				t.Fatal("scores not sorted")
			}
		}
	}
}

func TestDecodeAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are not meaningful under the race detector")
	}
	e := load(t, "stories260K-Q4_0", Options{Ctx: 512})
	s := e.state
	s.Truncate(0)
	tok := []int32{1}
	if _, err := s.Forward(tok, false); err != nil {
		t.Fatal(err)
	}
	allocs := steadyAllocs(50, func() {
		if _, err := s.Forward(tok, false); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("%v allocations per decoded token", allocs)
	}
}

func TestLoadErrors(t *testing.T) {
	dir := t.TempDir()
	if _, err := Load(filepath.Join(dir, "nope.gguf"), Options{}); err == nil {
		t.Error("missing file: no error")
	}
	p := filepath.Join(dir, "x.gguf")
	os.WriteFile(p, []byte("not a model at all, just text"), 0o644)
	if _, err := Load(p, Options{}); err == nil {
		t.Error("text file: no error")
	}
	if _, err := Load(zoo.Path(t, "vocab", "ggml-vocab-llama-spm.gguf"), Options{}); err == nil {
		t.Error("vocab-only file: no error")
	}
}

// TestPromptTokenizedOnce is issue 11's counter test: a chat request (a
// system prompt, a conversation's history, a new user turn) renders its
// prompt with the template and tokenizes it exactly once when it fits;
// only when history has to be left out is it rendered again, once per
// exchange dropped. With a prompt cache, the system prompt alone is
// tokenized once for the first request that carries it, not again.
func TestPromptTokenizedOnce(t *testing.T) {
	e := load(t, "stories260K-Q4_0", Options{Ctx: 1024})
	system := chat.Message{Role: "system", Content: "You tell short stories."}
	var history []chat.Message
	for i := range 4 {
		history = append(history,
			chat.Message{Role: "user", Content: fmt.Sprintf("Story %d?", i)},
			chat.Message{Role: "assistant", Content: "Lily went to the park."})
	}
	user := chat.Message{Role: "user", Content: "And another one?"}
	msgs := slices.Concat([]chat.Message{system}, history, []chat.Message{user})
	req := Request{Messages: msgs, History: len(history), MaxTokens: 4, Sampling: greedy()}
	whole, err := e.Tokens(&req)
	if err != nil {
		t.Fatal(err)
	}

	e.counts.renders, e.counts.encodes = 0, 0
	st, err := e.Generate(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	if e.counts.renders != 1 || e.counts.encodes != 1 || st.DroppedTurns != 0 || st.PromptTokens != len(whole) {
		t.Errorf("fits: rendered %d times, tokenized %d times, %d turns dropped, %d prompt tokens (want 1, 1, 0, %d)",
			e.counts.renders, e.counts.encodes, st.DroppedTurns, st.PromptTokens, len(whole))
	}
	t.Logf("a chat request of %d messages (%d prompt tokens): rendered %d time, tokenized %d time",
		len(msgs), st.PromptTokens, e.counts.renders, e.counts.encodes)

	// Room for two of the four exchanges: the two oldest are left out, one
	// render and tokenization each, and the prompt is that of the rest.
	kept := slices.Concat([]chat.Message{system}, history[4:], []chat.Message{user})
	want, _ := e.Tokens(&Request{Messages: kept})
	req.FitTokens = len(want)
	e.counts.renders, e.counts.encodes = 0, 0
	if st, err = e.Generate(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	if st.DroppedTurns != 4 || st.PromptTokens != len(want) || e.counts.encodes != 3 {
		t.Errorf("fitted: %d turns dropped, %d prompt tokens, tokenized %d times (want 4, %d, 3)", st.DroppedTurns, st.PromptTokens, e.counts.encodes, len(want))
	}
	// Nothing left to drop: too long.
	least, _ := e.Tokens(&Request{Messages: []chat.Message{system, user}})
	req.FitTokens, req.MaxPromptTokens = 0, len(least)-1
	if st, err := e.Generate(t.Context(), req); !errors.Is(err, ErrPromptTooLong) || st.DroppedTurns != len(history) {
		t.Errorf("history all dropped and still too long: %v, %d turns dropped", err, st.DroppedTurns)
	}

	// With a prompt cache the system prompt's own tokens are kept, for
	// the prefix snapshot: computed for the first request only.
	c := load(t, "stories260K-Q4_0", Options{Ctx: 1024, Cache: &memCache{}})
	req = Request{Messages: msgs, History: len(history), MaxTokens: 4, Sampling: greedy()}
	for i := range 2 {
		c.counts.encodes = 0
		if _, err := c.Generate(t.Context(), req); err != nil {
			t.Fatal(err)
		}
		if want := 2 - i; c.counts.encodes != want {
			t.Errorf("request %d with a prompt cache: tokenized %d times, want %d", i, c.counts.encodes, want)
		}
	}
}

// steadyAllocs is testing.AllocsPerRun for code that runs on the worker
// pool: a nonzero count is measured again, up to three times, and the
// least is returned. A goroutine that parks (the pool's workers and its
// caller, once their polling runs out) takes a sudog from the runtime's
// per-P cache, and the runtime allocates one when that cache is empty;
// under qemu's timing the goroutines park often and move between Ps, so
// a run of a few steps saw such an allocation now and then (CI, the
// gemma4 speculative step: "1 allocations per speculative step", which
// pprof put in pool.await, 112 B: a sudog). An allocation of our own
// code shows on every run.
func steadyAllocs(runs int, f func()) float64 {
	a := testing.AllocsPerRun(runs, f)
	for try := 1; a != 0 && try < 3; try++ {
		a = min(a, testing.AllocsPerRun(runs, f))
	}
	return a
}
