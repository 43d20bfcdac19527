package engine

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/geisten/geist/engine/zoo"
)

// drafterPair is a target and a model drafter of the zoo, by the mode
// that drafts with it.
type drafterPair struct {
	name, target, drafter string // drafter "": none (mtp: the file's own block; self: a skipped-layer set)
	mode                  SpecMode
}

func drafterPairs(t *testing.T) []drafterPair {
	return []drafterPair{
		{"draft", zoo.Path(t, "models", "tiny-llama-Q4_0.gguf"), zoo.Path(t, "models", "tiny-llama-Q8_0.gguf"), SpecDraft},
		{"self", zoo.Path(t, "models", "tiny-llama-Q4_0.gguf"), "", SpecSelf},
		{"assistant", zoo.Path(t, "drafters", "models", "tiny-gemma4e-Q4_0.gguf"), zoo.Path(t, "drafters", "models", "tiny-gemma4e-assistant-Q4_0.gguf"), SpecAssistant},
		{"eagle3", zoo.Path(t, "drafters", "models", "tiny-eagle3-target-Q4_0.gguf"), zoo.Path(t, "drafters", "models", "tiny-eagle3-Q4_0.gguf"), SpecEagle3},
		{"mtp", zoo.Path(t, "new2", "models", "tiny-qwen35-mtp-Q4_0.gguf"), "", SpecMTP},
		// The skipped-layer draft of a recurrent model: its steps skip a
		// DeltaNet layer and are dropped as a whole.
		{"self-qwen35", zoo.Path(t, "new2", "models", "tiny-qwen35-Q4_0.gguf"), "", SpecSelf},
	}
}

// loadPair loads p's target with its drafter for parallel sequences.
func loadPair(t *testing.T, p drafterPair, parallel int) *Engine {
	e := loadFile(t, p.target, Options{Ctx: 1024, Batch: 16, Threads: 2, Parallel: parallel, DraftModel: p.drafter, SelfSpec: SelfSpecOff})
	switch {
	case p.mode == SpecSelf && e.model.RecLayers() > 0:
		installRecSkip(e)
	case p.mode == SpecSelf:
		installLastMLPSkip(e)
	}
	return e
}

// TestBatchedModelDrafters: requests decoded together, each drafting with
// a model drafter of its slot's own (a draft model, the skipped-layer
// draft, a Gemma 4 assistant, an EAGLE-3 head, Qwen3.5's MTP block; in
// its own mode every step, under adaptive control, in auto mode, and one
// request plain), give bit for bit the tokens and text they give alone
// without speculation, greedy and with seeded sampling, in two rounds
// (the second reusing the slots' prefixes and drafter states); the first
// request, drafting every step in a fresh slot, drafts and has accepted
// what it drafts alone (its slot's drafter state is its own); a request
// cancelled while it drafts returns at once and the slots serve the next
// round as before.
func TestBatchedModelDrafters(t *testing.T) {
	for _, p := range drafterPairs(t) {
		t.Run(p.name, func(t *testing.T) {
			want := batchRequests()
			aloneAnswers(t, p.target, want)
			// The first request drafting every step alone, with a fresh
			// controller as its fresh slot has.
			fixed := SpecOptions{Mode: p.mode, Fixed: true, DraftMax: 4}
			solo := want[0].req
			solo.Spec = fixed
			ref, err := loadPair(t, p, 1).Generate(t.Context(), solo)
			if err != nil {
				t.Fatal(err)
			}
			e := loadPair(t, p, 4)
			drafted, accepted := 0, 0
			for round := range 2 {
				got := batchRequests()
				for i, r := range got {
					switch i % 4 {
					case 0:
						r.req.Spec = fixed
					case 1:
						r.req.Spec = SpecOptions{Mode: p.mode}
					case 2:
						r.req.Spec = SpecOptions{Mode: SpecOff}
					case 3:
						r.req.Spec = SpecOptions{Mode: SpecAuto}
					}
				}
				batchedAnswers(t, e, got)
				for i := range got {
					if got[i].err != nil {
						t.Fatalf("round %d request %d: %v", round, i, got[i].err)
					}
					if !slices.Equal(got[i].toks, want[i].toks) || got[i].text.String() != want[i].text.String() {
						t.Errorf("round %d request %d (%s): batched %v %q, alone %v %q", round, i, got[i].req.Spec.Mode, got[i].toks, got[i].text.String(), want[i].toks, want[i].text.String())
					}
					if got[i].st.StopReason != want[i].st.StopReason || got[i].st.GeneratedTokens != want[i].st.GeneratedTokens {
						t.Errorf("round %d request %d: stop %s after %d, alone %s after %d", round, i, got[i].st.StopReason, got[i].st.GeneratedTokens, want[i].st.StopReason, want[i].st.GeneratedTokens)
					}
					for name, d := range got[i].st.Drafters {
						if name == string(p.mode) || name == "draft" && p.mode == SpecDraft {
							drafted += d.Drafted
							accepted += d.Accepted
						}
					}
				}
				if a, b := ref.Drafters[string(p.mode)], got[0].st.Drafters[string(p.mode)]; round == 0 && (a.Drafted != b.Drafted || a.Accepted != b.Accepted) {
					// Its slot's drafter state and controller are fresh:
					// it drafts what it drafts alone.
					t.Errorf("request 0 drafting every step: batched %d drafted, %d accepted; alone %d, %d", b.Drafted, b.Accepted, a.Drafted, a.Accepted)
				}
				if round == 0 {
					// A drafting request cancelled after 3 tokens, beside
					// another: it returns the cancellation, the other its
					// answer.
					ctx, cancel := context.WithCancel(t.Context())
					n := 0
					req := want[0].req
					req.Spec = fixed
					req.OnToken = func(int32) {
						if n++; n == 3 {
							cancel()
						}
					}
					other := batchRequests()[2:3]
					other[0].req.Spec = SpecOptions{Mode: p.mode}
					other[0].after = 0
					done := make(chan struct{})
					go func() { batchedAnswers(t, e, other); close(done) }()
					_, err := e.Generate(ctx, req)
					cancel()
					<-done
					if !errors.Is(err, context.Canceled) || n > 3+4 {
						t.Errorf("a cancelled request: %v after %d tokens", err, n)
					}
					if other[0].err != nil || !slices.Equal(other[0].toks, want[2].toks) {
						t.Errorf("beside a cancelled request: %v %v, alone %v", other[0].err, other[0].toks, want[2].toks)
					}
				}
			}
			t.Logf("%s: %d drafted, %d accepted; %d passes, %d with several sequences", p.name, drafted, accepted, e.batch.passes, e.batch.multi)
			if drafted == 0 || accepted == 0 || e.batch.multi == 0 {
				t.Errorf("the %s drafter drafted %d, accepted %d in batched mode (%d passes with several sequences)", p.name, drafted, accepted, e.batch.multi)
			}
		})
	}
}

// TestAllocationsBatchedModelDrafters: a batched sequence's speculative
// step drafting with a model drafter of its slot (draft model,
// skipped-layer draft, assistant, EAGLE-3, MTP: their steps, the rows
// through the runner's pass, the walk, Compact, the drafter fed the kept
// rows) allocates nothing, while another sequence decodes beside it.
func TestAllocationsBatchedModelDrafters(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are not meaningful under the race detector")
	}
	for _, p := range drafterPairs(t) {
		t.Run(p.name, func(t *testing.T) {
			e := loadPair(t, p, 2)
			b := e.batch
			ids, err := e.Tokens(&Request{Prompt: copyHeavy[0]})
			if err != nil {
				t.Fatal(err)
			}
			sl, err := b.acquire(t.Context(), ids)
			if err != nil {
				t.Fatal(err)
			}
			defer b.release(sl)
			other, err := b.acquire(t.Context(), nil)
			if err != nil {
				t.Fatal(err)
			}
			defer b.release(other)
			sl.s.Truncate(0)
			other.s.Truncate(0)
			sl.feed = sl.native != nil
			if d := sl.native; d != nil {
				d.Truncate(0)
			}
			for i := 0; i < len(ids)-1; i += sl.took {
				if _, err := b.pass(sl, ids[i:min(i+b.chunk, len(ids)-1)], false); err != nil {
					t.Fatal(err)
				}
				if d := sl.native; d != nil {
					for j := range sl.took {
						d.Kept(j, i+j)
					}
				}
			}
			sp := SpecOptions{Mode: p.mode, DraftMax: 4, Fixed: true}
			g := newTestGeneration(e, &sp, ids)
			g.s, g.sl, g.w = sl.s, sl, &sl.w
			sl.logits = make([]float32, 5*e.model.NVocab)
			stop := make(chan struct{})
			done := make(chan struct{})
			go func() {
				defer close(done)
				for {
					select {
					case <-stop:
						return
					default:
					}
					other.one[0] = 5
					if _, err := b.pass(other, other.one[:], true); err != nil {
						panic(err)
					}
					if other.s.Len() > 900 {
						other.s.Truncate(0)
					}
				}
			}()
			step := func() {
				next, err := g.step(g.history[len(g.history)-1], g.draftTree(4))
				if err != nil {
					t.Fatal(err)
				}
				if err := g.emit(next); err != nil {
					t.Fatal(err)
				}
			}
			for range 10 {
				step()
			}
			a := steadyAllocs(10, step)
			close(stop)
			<-done
			if a != 0 {
				t.Errorf("%v allocations per batched speculative step with the %s drafter", a, p.name)
			}
			if d := g.dstats[modelIdx(p.mode)]; d.Drafted == 0 {
				t.Errorf("the %s drafter drafted nothing", p.name)
			}
		})
	}
}

// modelIdx is the drafter index of a model drafter's mode.
func modelIdx(m SpecMode) int {
	switch m {
	case SpecDraft:
		return idxDraft
	case SpecSelf:
		return idxSelf
	}
	return idxNative
}
