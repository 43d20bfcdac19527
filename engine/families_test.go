package engine

import (
	"maps"
	"slices"
	"testing"

	"github.com/geisten/geist/engine/zoo"
)

// The families of issues 23 and 27 (granite, smollm3, phi3, gemma3,
// qwen3moe, lfm2, gemma4) under speculation: greedy output identical with
// --spec off, lookup, auto (trees and chains), self and draft (the
// family's Q4_0 file drafting for its Q4_K_M file: the same vocabulary);
// a prefix restored from the prompt cache continues as a cold run (the
// convolution state of lfm2, the window rings of gemma3 and gemma4); and
// decoding allocates nothing (the convolution rows, checkpoints and
// rewinds, the rings, norms and GELU table use buffers sized once).

var familyDraft = map[string]string{
	"tiny-granite":  "tiny-granite-Q4_0.gguf",
	"tiny-smollm3":  "tiny-smollm3-Q4_0.gguf",
	"tiny-phi3":     "tiny-phi3-Q4_0.gguf",
	"tiny-gemma3":   "tiny-gemma3-Q4_0.gguf",
	"tiny-qwen3moe": "tiny-qwen3moe-Q4_0.gguf",
	"tiny-lfm2":     "tiny-lfm2-Q4_0.gguf",
	"tiny-gemma4":   "tiny-gemma4-Q4_0.gguf",
}

func TestSpeculativeGreedyExactFamilies(t *testing.T) {
	for fam := range familyDraft {
		t.Run(fam, func(t *testing.T) {
			gf := zoo.Path(t, "new", "golden", "gen-"+fam+"-Q4_K_M.json")
			if testing.Short() {
				gf = zoo.Path(t, "new", "golden", "gen-"+fam+"-Q4_0.json")
			}
			speculativeGreedyExact(t, []string{gf})
		})
	}
}

// TestPromptCacheRestoreFamilies: the families whose state is more than
// keys and values of every position. For lfm2 the restored prefix also
// continues under speculation, a tree and a chain of the skipped-layer
// draft (which always drafts and is often rejected) and lookup's trees:
// the first verification passes after a restore read the convolution rows
// the snapshot brought and rewind over them, and the output is still the
// cold run's.
func TestPromptCacheRestoreFamilies(t *testing.T) {
	for _, fam := range []string{"tiny-lfm2", "tiny-gemma3", "tiny-gemma4"} {
		t.Run(fam, func(t *testing.T) {
			var specs []SpecOptions
			if fam == "tiny-lfm2" {
				specs = []SpecOptions{{Mode: SpecOff}, {Mode: SpecSelf, Fixed: true}, {Mode: SpecSelf, Fixed: true, Chains: true}, {Mode: SpecAuto}}
			}
			promptCacheRestore(t, []string{zoo.Path(t, "new", "models", fam+"-Q4_0.gguf"), zoo.Path(t, "new", "models", fam+"-Q4_K_M.gguf")}, specs...)
		})
	}
}

// TestSpeculativeGreedyExactLFM2: every zoo file of lfm2 (F16 and Q8_0
// beside the Q4_0 and Q4_K_M of the families' test), greedy output
// identical with --spec off, lookup, auto and self, with trees and with
// chains (speculativeGreedyExact adds the chains of lookup and self for
// lfm2). Natively only: under emulation the families' test covers Q4_0.
func TestSpeculativeGreedyExactLFM2(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: TestSpeculativeGreedyExactFamilies covers tiny-lfm2-Q4_0 under emulation")
	}
	speculativeGreedyExact(t, []string{zoo.Path(t, "new", "golden", "gen-tiny-lfm2-F16.json"), zoo.Path(t, "new", "golden", "gen-tiny-lfm2-Q8_0.json")})
}

func TestAllocationsFamilies(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are not meaningful under the race detector")
	}
	fams := slices.Sorted(maps.Keys(familyDraft))
	if testing.Short() {
		// Under emulation one family: the counts come from the same Go
		// code on every CPU (the kernels allocate nothing), and each
		// family took 40-50 s under qemu.
		fams = fams[:1]
	}
	for _, fam := range fams {
		t.Run(fam, func(t *testing.T) { newFamilyAllocations(t, fam+"-Q4_K_M") })
	}
}

// newFamilyAllocations: decoding a token of one zoo file of new/, plain
// and speculative (trees by lookup and n-grams, the skipped-layer draft),
// allocates nothing.
func newFamilyAllocations(t *testing.T, name string) {
	fileAllocations(t, zoo.Path(t, "new", "models", name+".gguf"), installLastMLPSkip)
}

// fileAllocations is newFamilyAllocations of a file, with the given
// skipped-layer draft.
func fileAllocations(t *testing.T, path string, installSkip func(*Engine)) {
	e := loadFile(t, path, Options{Ctx: 2048, Batch: 16})
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
	installSkip(e)
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
