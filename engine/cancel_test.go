package engine

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
)

// TestCancelInsideSpeculativeStep: a request cancelled while a step
// accepts several drafted tokens (the grammar drafts a forced text, all
// of it accepted in one pass) stops before the next token's mask: one
// token, context.Canceled.
func TestCancelInsideSpeculativeStep(t *testing.T) {
	e := load(t, "tiny-qwen2-Q4_0", Options{Ctx: 512, Batch: 32, SelfSpec: SelfSpecOff})
	gbnf := `root ::= "` + strings.Repeat("the quick brown fox jumps over the lazy dog ", 4) + `"`
	// Uncancelled, the forced text comes in few passes (drafted by the grammar).
	_, _, st := constrained(t, e, "Once upon a time", gbnf, 100, SpecOptions{}, greedy())
	if st.Accepted == 0 || st.GeneratedTokens < 8 {
		t.Fatalf("the grammar drafted nothing: %+v", st)
	}
	e.Reset()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	n := 0
	st, err := e.Generate(ctx, Request{Prompt: "Once upon a time", MaxTokens: 100, Sampling: greedy(), Grammar: gbnf,
		OnToken: func(int32) {
			if n++; n == 1 {
				cancel()
			}
		}})
	if !errors.Is(err, context.Canceled) || st.GeneratedTokens != 1 {
		t.Errorf("cancelled at the first token: %d tokens, err %v; want 1 and context.Canceled", st.GeneratedTokens, err)
	}
}

// TestPrefillProgress: OnPrefill hears every prefill pass (the watchdog's
// progress) up to the prompt less its last token, and a cancel there stops
// the prefill at that pass.
func TestPrefillProgress(t *testing.T) {
	e := load(t, "stories260K-F32", Options{Ctx: 512, Batch: 16, SelfSpec: SelfSpecOff})
	prompt := strings.Repeat("Once upon a time there was a little girl. ", 8)
	var seen []int
	st, err := e.Generate(context.Background(), Request{Prompt: prompt, MaxTokens: 2, Sampling: greedy(),
		OnPrefill: func(done int) { seen = append(seen, done) }})
	if err != nil {
		t.Fatal(err)
	}
	if len(seen) < 3 || seen[0] != 0 || seen[len(seen)-1] != st.PromptTokens-1 {
		t.Fatalf("prefill progress %v for %d prompt tokens", seen, st.PromptTokens)
	}
	for i := 1; i < len(seen); i++ {
		if seen[i]-seen[i-1] <= 0 || seen[i]-seen[i-1] > 16 {
			t.Fatalf("prefill progress %v: steps of 1..16 tokens wanted", seen)
		}
	}
	e.Reset()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	calls := 0
	st, err = e.Generate(ctx, Request{Prompt: prompt, MaxTokens: 2, Sampling: greedy(),
		OnPrefill: func(done int) {
			if calls++; done > 0 {
				cancel()
			}
		}})
	if !errors.Is(err, context.Canceled) || st.GeneratedTokens != 0 || calls != 2 {
		t.Errorf("cancelled after the first pass: %d passes heard, %d tokens, err %v", calls, st.GeneratedTokens, err)
	}
}

// TestPromptProgress: OnPromptProgress hears what OnPrefill hears with the
// prompt's length, then the whole prompt once the prefill ends; a second
// request whose prompt extends the first starts at the tokens it reuses.
func TestPromptProgress(t *testing.T) {
	e := load(t, "stories260K-F32", Options{Ctx: 512, Batch: 16, SelfSpec: SelfSpecOff})
	prompt := strings.Repeat("Once upon a time there was a little girl. ", 8)
	var prefill []int
	var seen [][2]int
	st, err := e.Generate(context.Background(), Request{Prompt: prompt, MaxTokens: 2, Sampling: greedy(),
		OnPrefill:        func(done int) { prefill = append(prefill, done) },
		OnPromptProgress: func(done, total int) { seen = append(seen, [2]int{done, total}) }})
	if err != nil {
		t.Fatal(err)
	}
	n := st.PromptTokens
	if len(seen) != len(prefill)+1 || seen[len(seen)-1] != [2]int{n, n} {
		t.Fatalf("prompt progress %v, prefill %v, %d prompt tokens", seen, prefill, n)
	}
	for i, d := range prefill {
		if seen[i] != [2]int{d, n} {
			t.Fatalf("prompt progress %v, prefill %v", seen, prefill)
		}
	}
	seen = nil
	st, err = e.Generate(context.Background(), Request{Prompt: prompt + "She had a dog.", MaxTokens: 2, Sampling: greedy(),
		OnPromptProgress: func(done, total int) { seen = append(seen, [2]int{done, total}) }})
	if err != nil {
		t.Fatal(err)
	}
	if len(seen) < 2 || seen[0][0] != st.ReusedTokens || seen[0][0] < n/2 || seen[len(seen)-1] != [2]int{st.PromptTokens, st.PromptTokens} {
		t.Errorf("the second prompt's progress %v (reused %d of %d)", seen, st.ReusedTokens, st.PromptTokens)
	}
}

// TestLoadProgress: OnLoadProgress hears the repacking of the weights
// grow to all of them (the long part of loading a big file), one call at
// a time; with nothing to repack (a CPU whose kernels read the file's
// types as they are) it hears nothing.
func TestLoadProgress(t *testing.T) {
	var mu sync.Mutex
	var seen [][2]int64
	busy := false
	e := load(t, "tiny-llama-Q4_0", Options{Ctx: 256, OnLoadProgress: func(done, total int64) {
		mu.Lock()
		if busy {
			t.Error("OnLoadProgress called while a call runs")
		}
		busy = true
		seen = append(seen, [2]int64{done, total})
		busy = false
		mu.Unlock()
	}})
	r := e.Model().Repack
	if r.PackedFile == 0 {
		if len(seen) != 0 {
			t.Errorf("nothing repacked, progress %v", seen)
		}
		t.Skipf("nothing to repack on this CPU (%s)", r)
	}
	if len(seen) != r.Matrices || seen[len(seen)-1] != [2]int64{r.PackedFile, r.PackedFile} {
		t.Fatalf("progress %v for %d matrices of %d bytes", seen, r.Matrices, r.PackedFile)
	}
	for i := 1; i < len(seen); i++ {
		if seen[i][0] <= seen[i-1][0] {
			t.Fatalf("progress %v not increasing", seen)
		}
	}
}
