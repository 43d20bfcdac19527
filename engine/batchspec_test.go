package engine

import (
	"slices"
	"strings"
	"testing"

	"github.com/geisten/geist/engine/spec"
	"github.com/geisten/geist/engine/zoo"
)

// specModes gives the batching test's requests their speculation: prompt
// lookup (trees), lookup and n-grams under adaptive control, an oracle
// drafter that proposes the answer alone with 70% of its tokens right (a
// chain, accepted deep), plain decoding, and lookup drafting every step
// (Fixed: trees verified whatever the controller would choose).
func specModes(t *testing.T, e *Engine, rs, alone []*batchReq) {
	for i, r := range rs {
		switch i % 5 {
		case 0:
			r.req.Spec = SpecOptions{Mode: SpecLookup}
		case 1:
			r.req.Spec = SpecOptions{Mode: SpecAuto}
		case 2:
			prompt, err := e.Tokens(&r.req)
			if err != nil {
				t.Fatal(err)
			}
			ref := append(slices.Clone(prompt), alone[i].toks...)
			r.req.Spec = SpecOptions{Mode: SpecAuto, Drafter: spec.NewOracle(ref, 0.7, e.model.NVocab, uint64(i)), Fixed: true, DraftMax: 6}
		case 3:
			r.req.Spec = SpecOptions{Mode: SpecOff}
		case 4:
			r.req.Spec = SpecOptions{Mode: SpecLookup, Fixed: true, DraftMax: 5}
		}
	}
}

// TestBatchedSpeculation: requests decoded together, each with its own
// speculation (lookup and n-gram trees, an oracle's deep chains, plain
// decoding), their drafted rows in the same passes as the others' decoding
// rows and prompt chunks, give bit for bit the tokens and text they give
// alone without speculation, greedy and with seeded sampling, in two
// rounds (the second reusing the slots' prefixes and the n-gram
// statistics of the first).
func TestBatchedSpeculation(t *testing.T) {
	files := []string{zoo.Path(t, "models", "tiny-llama-Q4_0.gguf"), zoo.Path(t, "new", "models", "tiny-gemma3-Q4_0.gguf")}
	if !testing.Short() {
		files = append(files, zoo.Path(t, "models", "tiny-qwen3-Q4_K_M.gguf"))
	}
	for _, path := range files {
		t.Run(path[strings.LastIndex(path, "/")+1:], func(t *testing.T) { batchedSpeculation(t, path) })
	}
}

// batchedSpeculation runs TestBatchedSpeculation's check on one file and
// returns the answers alone.
func batchedSpeculation(t *testing.T, path string) []*batchReq {
	want := batchRequests()
	aloneAnswers(t, path, want)
	e := loadFile(t, path, Options{Ctx: 1024, Batch: 16, Threads: 2, Parallel: 4})
	if e.Parallel() != 4 {
		t.Fatalf("Parallel() = %d, want 4", e.Parallel())
	}
	drafted, accepted, trees := 0, 0, 0
	for round := range 2 {
		got := batchRequests()
		specModes(t, e, got, want)
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
			drafted += got[i].st.Drafted
			accepted += got[i].st.Accepted
			trees += got[i].st.TreePasses
		}
	}
	b := e.batch
	t.Logf("%d passes, %d with several sequences, %d with a prompt chunk beside decoding rows, most rows %d; %d drafted, %d accepted in %d verification steps", b.passes, b.multi, b.mixed, b.most, drafted, accepted, trees)
	if b.multi == 0 || accepted == 0 || b.most <= 4 {
		t.Error("no pass ran several sequences, or no draft was accepted, or no pass held a drafted tree")
	}
	return want
}

// TestAllocationsBatchedSpeculation: a batched sequence's speculative
// step (drafting a tree, its rows through the runner's pass, the walk,
// Compact, for a recurrent family the replay) allocates nothing, while
// another sequence decodes beside it.
func TestAllocationsBatchedSpeculation(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are not meaningful under the race detector")
	}
	for _, path := range []string{zoo.Path(t, "models", "tiny-llama-Q4_0.gguf"), zoo.Path(t, "new", "models", "tiny-lfm2-Q4_0.gguf"), zoo.Path(t, "new2", "models", "tiny-qwen35-Q4_0.gguf"), zoo.Path(t, "new2", "models", "tiny-granitehybrid-Q4_0.gguf")} {
		t.Run(path[strings.LastIndex(path, "/")+1:], func(t *testing.T) {
			e := loadFile(t, path, Options{Ctx: 2048, Batch: 16, Threads: 2, Parallel: 2})
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
			for i := 0; i < len(ids)-1; i += sl.took {
				if _, err := b.pass(sl, ids[i:min(i+b.chunk, len(ids)-1)], false); err != nil {
					t.Fatal(err)
				}
			}
			sp := SpecOptions{Mode: SpecAuto, DraftMax: 8, Fixed: true}
			g := newTestGeneration(e, &sp, ids)
			g.s, g.sl, g.w = sl.s, sl, &sl.w
			sl.logits = make([]float32, 9*e.model.NVocab)
			// The other sequence decodes a token per pass meanwhile.
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
					if other.s.Len() > 1500 {
						other.s.Truncate(0)
					}
				}
			}()
			step := func() {
				next, err := g.step(g.history[len(g.history)-1], g.draftTree(8))
				if err != nil {
					t.Fatal(err)
				}
				if err := g.emit(next); err != nil {
					t.Fatal(err)
				}
			}
			for range 20 {
				step()
			}
			a := steadyAllocs(10, step)
			close(stop)
			<-done
			if a != 0 {
				t.Errorf("%v allocations per batched speculative step", a)
			}
			if g.st.Drafted == 0 {
				t.Error("nothing was drafted")
			}
		})
	}
}
