package engine

import (
	"testing"

	"github.com/geisten/geist/engine/model"
	"github.com/geisten/geist/engine/spec"
	"github.com/geisten/geist/engine/zoo"
)

// qwen35 (zoo new2/: gated DeltaNet layers with a matrix state, one gated
// full-attention layer) under speculation: greedy output identical with
// --spec off, lookup, auto, self and draft, trees and chains (a rejected
// draft and Compact replay the recurrent state from the verification
// pass's start); a prefix restored from the prompt cache continues as a
// cold run; decoding allocates nothing.

// installRecSkip installs a skipped-layer draft that leaves out the first
// DeltaNet layer's mixer and the last feed-forward block: the draft's
// steps pass that layer's state through unchanged and are dropped as a
// whole. (The skipped-layer search needs probes, which a recurrent state
// refuses.)
func installRecSkip(e *Engine) {
	L := e.model.NLayer
	set := &spec.SkipSet{Skip: model.Skip{Attn: make([]bool, L), MLP: make([]bool, L)}, Agreement: 0.5, Cost: 0.8}
	set.Skip.Attn[1] = true
	set.Skip.MLP[L-1] = true
	e.installSelf(set)
}

func TestSpeculativeGreedyExactQwen35(t *testing.T) {
	n := 128
	files := []string{"tiny-qwen35-Q4_K_M", "tiny-qwen35-F16"}
	if testing.Short() {
		n, files = 48, []string{"tiny-qwen35-Q4_0"}
	}
	for _, name := range files {
		t.Run(name, func(t *testing.T) {
			opt := Options{Ctx: 512, Batch: 32, SelfSpec: SelfSpecOff, DraftModel: zoo.Path(t, "new2", "models", "tiny-qwen35-mtp-Q4_0.gguf")}
			e := loadFile(t, zoo.Path(t, "new2", "models", name+".gguf"), opt)
			installRecSkip(e)
			g := readGoldenFile(t, zoo.Path(t, "new2", "golden", "gen-"+name+".json"))
			prompts := copyHeavy[:]
			for _, c := range g.Cases {
				prompts = append(prompts, c.Prompt)
			}
			if testing.Short() {
				prompts = prompts[:2]
			}
			modes := []SpecOptions{
				{Mode: SpecLookup}, {Mode: SpecAuto}, {Mode: SpecAuto, Fixed: true, DraftMax: 5},
				{Mode: SpecAuto, Fixed: true, Chains: true}, {Mode: SpecSelf, Fixed: true},
				{Mode: SpecLookup, Fixed: true, Chains: true}, {Mode: SpecSelf, Fixed: true, Chains: true},
				{Mode: SpecDraft}, {Mode: SpecDraft, Fixed: true, DraftMax: 4},
			}
			for pi, prompt := range prompts {
				want, _ := generateIDs(t, e, prompt, n, SpecOptions{Mode: SpecOff}, greedy())
				for _, m := range modes {
					got, st := generateIDs(t, e, prompt, n, m, greedy())
					if !equal(got, want) {
						t.Fatalf("prompt %d, %+v: speculative output differs from plain decoding\n got %v\nwant %v", pi, m, got, want)
					}
					if m.Fixed && (pi < len(copyHeavy) || m.Mode == SpecSelf) && st.Drafted == 0 {
						t.Errorf("prompt %d, %+v: nothing drafted on a copy-heavy prompt", pi, m)
					}
				}
			}
		})
	}
}

// TestPromptCacheRestoreQwen35: a prefix restored from the prompt cache
// (attention KV and the DeltaNet layers' states and conv rows) continues
// as a cold run, also under speculation right after the restore.
func TestPromptCacheRestoreQwen35(t *testing.T) {
	specs := []SpecOptions{{Mode: SpecOff}, {Mode: SpecAuto}, {Mode: SpecLookup, Fixed: true, Chains: true}}
	promptCacheRestore(t, []string{zoo.Path(t, "new2", "models", "tiny-qwen35-Q4_0.gguf"), zoo.Path(t, "new2", "models", "tiny-qwen35-Q4_K_M.gguf")}, specs...)
}

func TestAllocationsQwen35(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are not meaningful under the race detector")
	}
	fileAllocations(t, zoo.Path(t, "new2", "models", "tiny-qwen35-Q4_K_M.gguf"), installRecSkip)
}
