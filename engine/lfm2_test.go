package engine

import (
	"path/filepath"
	"testing"

	"github.com/geisten/geist/engine/zoo"
)

// The lfm2 models (short convolutions with a recurrent state between
// attention layers) under speculation and the prompt cache: a rejected
// draft, a tree's dropped branches and a restored prefix must leave the
// convolution state exactly as plain decoding has it.

// TestSpeculativeGreedyExactLFM2: greedy output identical with lookup and
// n-gram trees, chains, the skipped-layer draft and auto mode.
func TestSpeculativeGreedyExactLFM2(t *testing.T) {
	files, _ := filepath.Glob(zoo.Path(t, "new", "golden", "gen-tiny-lfm2-*.json"))
	if len(files) == 0 {
		t.Fatal("no gen-tiny-lfm2 goldens")
	}
	speculativeGreedyExact(t, files)
}

// TestPromptCacheRestoreLFM2: a prefix restored from the prompt cache
// (keys, values and the convolution state at its end) continues exactly
// as a cold run.
func TestPromptCacheRestoreLFM2(t *testing.T) {
	files, _ := filepath.Glob(zoo.Path(t, "new", "models", "tiny-lfm2-*.gguf"))
	if len(files) == 0 {
		t.Fatal("no tiny-lfm2 models")
	}
	promptCacheRestore(t, files)
}

// TestAllocationsLFM2: decoding a token, plain and speculative (trees by
// lookup and n-grams, the skipped-layer draft), allocates nothing: the
// convolution rows, checkpoints and rewinds use buffers sized once (and
// Gemma 4's windows, norms and GELU table).
func TestAllocationsLFM2(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are not meaningful under the race detector")
	}
	for _, name := range []string{"tiny-lfm2-Q4_K_M", "tiny-gemma4-Q4_0"} {
		t.Run(name, func(t *testing.T) { newFamilyAllocations(t, name) })
	}
}

// newFamilyAllocations is TestAllocationsLFM2 for one zoo file of new/.
func newFamilyAllocations(t *testing.T, name string) {
	e := loadFile(t, zoo.Path(t, "new", "models", name+".gguf"), Options{Ctx: 2048, Batch: 16})
	s := e.state
	tok := []int32{1}
	if _, err := s.Forward(tok, false); err != nil {
		t.Fatal(err)
	}
	runs := 100
	if testing.Short() {
		runs = 10
	}
	if a := steadyAllocs(runs, func() {
		if _, err := s.Forward(tok, false); err != nil {
			t.Fatal(err)
		}
	}); a != 0 {
		t.Errorf("%v allocations per decoded token", a)
	}
	installLastMLPSkip(e)
	ids, _ := e.Tokens(&Request{Prompt: copyHeavy[0]})
	for _, sp := range []SpecOptions{{Mode: SpecAuto}, {Mode: SpecSelf}} {
		sp.DraftMax, sp.Fixed = 8, true
		t.Run(string(sp.Mode), func(t *testing.T) {
			g := newTestGeneration(e, &sp, ids)
			e.Reset()
			if _, _, err := e.prefill(t.Context(), ids[:len(ids)-1]); err != nil {
				t.Fatal(err)
			}
			step := func() {
				next, err := g.step(g.history[len(g.history)-1], g.draftTree(8))
				if err != nil {
					t.Fatal(err)
				}
				if err := g.emit(next); err != nil {
					t.Fatal(err)
				}
			}
			for range 20 { // the tree, the n-gram tables and the controller's plans reach their sizes
				step()
			}
			if a := steadyAllocs(runs/3, step); a != 0 {
				t.Errorf("%v allocations per speculative step", a)
			}
			if g.st.Drafted == 0 {
				t.Error("nothing drafted")
			}
		})
	}
}
