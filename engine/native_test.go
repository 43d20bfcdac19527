package engine

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/geisten/geist/engine/sample"
	"github.com/geisten/geist/engine/spec"
	"github.com/geisten/geist/engine/zoo"
)

// specGolden is a drafters/golden/spec-*.json file: llama.cpp's own
// speculative decoding with a model-native drafter.
type specGolden struct {
	Target, Drafter, Flags string
	Cases                  []struct {
		Prompt       string  `json:"prompt"`
		PromptTokens []int32 `json:"prompt_tokens"`
		Tokens       []int32 `json:"tokens"`
		Drafted      int     `json:"drafted"`
		Accepted     int     `json:"accepted"`
		TokensPlain  []int32 `json:"tokens_plain"`
	} `json:"cases"`
}

func readSpecGolden(t testing.TB, path string) *specGolden {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var g specGolden
	if err := json.Unmarshal(b, &g); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return &g
}

// TestNativeDraftersMatchLlamaCpp: for every target/drafter pair of the
// zoo's drafters/ (a Gemma 4 target with its assistant, a llama target
// with an EAGLE-3 head), geist's greedy output with the drafter equals
// plain decoding's and llama.cpp's, and with llama.cpp's schedule (a
// fixed draft of 3, chains, no gate) the drafted and accepted counts are
// llama.cpp's.
func TestNativeDraftersMatchLlamaCpp(t *testing.T) {
	// nearTie names the case of a golden whose counts may move by one
	// acceptance (see below).
	nearTie := map[string]int{"tiny-gemma4e-Q4_0": 2}
	files, _ := filepath.Glob(zoo.Path(t, "drafters", "golden", "spec-*.json"))
	if len(files) == 0 {
		t.Skip("no drafters/ goldens in the zoo")
	}
	for _, gf := range files {
		name := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(gf), "spec-"), ".json")
		if testing.Short() && !strings.HasSuffix(name, "Q4_0") {
			continue // under emulation: the Q4_0 pairs
		}
		t.Run(name, func(t *testing.T) {
			g := readSpecGolden(t, gf)
			if testing.Short() {
				g.Cases = g.Cases[:3]
			}
			mode := SpecAssistant
			if strings.Contains(name, "eagle3") {
				mode = SpecEagle3
			}
			dir := zoo.Path(t, "drafters", "models")
			e := loadFile(t, filepath.Join(dir, g.Target), Options{Ctx: 512, Batch: 64, DraftModel: filepath.Join(dir, g.Drafter), SelfSpec: SelfSpecOff})
			for ci, c := range g.Cases {
				req := Request{Prompt: c.Prompt}
				pt, err := e.Tokens(&req)
				if err != nil {
					t.Fatal(err)
				}
				if !equal(pt, c.PromptTokens) {
					t.Fatalf("case %d: prompt tokens %v, llama.cpp's %v", ci, pt, c.PromptTokens)
				}
				n := len(c.Tokens)
				plain, _ := generateIDs(t, e, c.Prompt, n, SpecOptions{Mode: SpecOff}, greedy())
				same := equal(plain, c.TokensPlain)
				if !same {
					// A near-tie of the target itself (geist's and
					// llama.cpp's logits differ within the gen goldens'
					// tolerance): the continuations part there, and the
					// counts of different texts are not comparable.
					d := spec.CommonPrefix(plain, c.TokensPlain)
					t.Logf("case %d: plain decoding parts from llama.cpp's at token %d (%d, llama.cpp %d): a near-tie of the target; counts not compared", ci, d, plain[d], c.TokensPlain[d])
				}
				// Sampling: the same tokens as plain decoding for a seed
				// (every token is the target's own draw).
				sampled := sample.Params{Temperature: 0.8, TopK: 40, TopP: 0.95, RepeatPenalty: 1, Seed: uint64(7 + ci)}
				want, _ := generateIDs(t, e, c.Prompt, n, SpecOptions{Mode: SpecOff}, sampled)
				for _, sp := range []SpecOptions{{Mode: mode, Fixed: true, DraftMax: 4}, {Mode: mode}} {
					if got, _ := generateIDs(t, e, c.Prompt, n, sp, sampled); !equal(got, want) {
						t.Fatalf("case %d, %+v, sampling: %v, plain decoding %v", ci, sp, got, want)
					}
				}
				for _, sp := range []SpecOptions{
					{Mode: mode, Fixed: true, Chains: true, DraftMax: 3}, {Mode: mode, Fixed: true, DraftMax: 5}, {Mode: mode},
				} {
					got, st := generateIDs(t, e, c.Prompt, n, sp, greedy())
					if !equal(got, plain) {
						t.Fatalf("case %d, %+v: with the drafter %v, plain decoding %v", ci, sp, got, plain)
					}
					if !sp.Chains {
						continue
					}
					ds := st.Drafters[string(mode)]
					t.Logf("case %d: drafted %d accepted %d (llama.cpp %d %d)", ci, ds.Drafted, ds.Accepted, c.Drafted, c.Accepted)
					if !same {
						continue
					}
					if k, ok := nearTie[name]; ok && k == ci {
						// The drafter's two best tokens are within 0.01 of
						// each other at several third draft steps of this
						// case (3999 against 3044: 10.1857 / 10.1786): one
						// draft llama.cpp's arithmetic accepts may go the
						// other way, moving the accepted count by one and
						// the drafted count by at most a step's draft.
						if abs(ds.Accepted-c.Accepted) > 1 || abs(ds.Drafted-c.Drafted) > sp.DraftMax {
							t.Errorf("case %d: drafted %d, accepted %d; llama.cpp %d, %d (a near-tie allows 1 acceptance)", ci, ds.Drafted, ds.Accepted, c.Drafted, c.Accepted)
						}
						continue
					}
					if ds.Drafted != c.Drafted || ds.Accepted != c.Accepted {
						t.Errorf("case %d: drafted %d, accepted %d; llama.cpp %d, %d", ci, ds.Drafted, ds.Accepted, c.Drafted, c.Accepted)
					}
				}
			}
		})
	}
}

func abs(x int) int { return max(x, -x) }

// TestAssistantSparseHead: the sparse centroid head scoring every
// cluster drafts exactly what the dense head drafts (the same logits for
// every token: each row's product is the same whatever rows are computed);
// with the default clusters the output stays plain decoding's, over an
// F16 and a Q8_0 target cache and a small batch (the local layers'
// caches are rings).
func TestAssistantSparseHead(t *testing.T) {
	dir := zoo.Path(t, "drafters", "models")
	target := filepath.Join(dir, "tiny-gemma4e-Q4_0.gguf")
	drafter := filepath.Join(dir, "tiny-gemma4e-assistant-centroids-Q4_0.gguf")
	g := readSpecGolden(t, zoo.Path(t, "drafters", "golden", "spec-tiny-gemma4e-Q4_0.json"))
	fixed := SpecOptions{Mode: SpecAssistant, Fixed: true, Chains: true, DraftMax: 3}
	counts := func(e *Engine, prompt string) (DrafterStats, []int32) {
		ids, st := generateIDs(t, e, prompt, 48, fixed, greedy())
		return st.Drafters["assistant"], ids
	}
	dense := loadFile(t, target, Options{Ctx: 512, Batch: 64, DraftModel: drafter, DenseHead: true, SelfSpec: SelfSpecOff})
	all := loadFile(t, target, Options{Ctx: 512, Batch: 64, DraftModel: drafter, SelfSpec: SelfSpecOff})
	st := all.spec.native.(*spec.AssistDraft).State()
	if !st.Sparse || st.Top <= 0 {
		t.Fatalf("the centroid file's assistant does not use its sparse head (top %d)", st.Top)
	}
	st.Top = 1 << 20 // every cluster
	for ci, c := range g.Cases[:min(len(g.Cases), 2)] {
		want, wantIDs := counts(dense, c.Prompt)
		got, ids := counts(all, c.Prompt)
		if got.Drafted != want.Drafted || got.Accepted != want.Accepted || !equal(ids, wantIDs) {
			t.Errorf("case %d: the sparse head over every cluster drafted %+v, the dense head %+v", ci, got, want)
		}
	}
	cases := g.Cases
	if testing.Short() {
		cases = cases[:1] // under emulation
	}
	for _, kv := range []string{"f16", "q8_0"} {
		for _, batch := range []int{64, 4} {
			e := loadFile(t, target, Options{Ctx: 512, Batch: batch, KVType: kv, DraftModel: drafter, SelfSpec: SelfSpecOff})
			for ci, c := range cases {
				plain, _ := generateIDs(t, e, c.Prompt, 48, SpecOptions{Mode: SpecOff}, greedy())
				for _, sp := range []SpecOptions{fixed, {Mode: SpecAssistant, Fixed: true, DraftMax: 4}, {Mode: SpecAuto}} {
					sp.DraftMax = min(max(sp.DraftMax, 1), batch-1)
					ids, st := generateIDs(t, e, c.Prompt, 48, sp, greedy())
					if !equal(ids, plain) {
						t.Fatalf("%s cache, batch %d, case %d, %+v: sparse-head drafts changed the output\n got %v\nwant %v", kv, batch, ci, sp, ids, plain)
					}
					if sp.Fixed && sp.Chains {
						ds := st.Drafters["assistant"]
						t.Logf("%s cache, batch %d, case %d: sparse head drafted %d, accepted %d", kv, batch, ci, ds.Drafted, ds.Accepted)
					}
				}
			}
		}
	}
}

// TestAllocationsNativeDrafters: a speculative step with the assistant
// (sparse and dense head), the EAGLE-3 head or Qwen3.5's MTP block, drafting, verifying and
// keeping the target's rows, allocates nothing.
func TestAllocationsNativeDrafters(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are not meaningful under the race detector")
	}
	dir := zoo.Path(t, "drafters", "models")
	for _, c := range []struct {
		name, target, drafter string
		mode                  SpecMode
		dense                 bool
	}{
		{"assistant-sparse", "tiny-gemma4e-Q4_0", "tiny-gemma4e-assistant-centroids-Q4_0", SpecAssistant, false},
		{"assistant-dense", "tiny-gemma4e-Q4_0", "tiny-gemma4e-assistant-Q4_0", SpecAssistant, true},
		{"eagle3", "tiny-eagle3-target-Q4_0", "tiny-eagle3-Q4_0", SpecEagle3, false},
		{"mtp", "tiny-qwen35-mtp-Q4_0", "", SpecMTP, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			var e *Engine
			if c.drafter == "" { // the target file's own block
				e = loadFile(t, zoo.Path(t, "new2", "models", c.target+".gguf"), Options{Ctx: 1024, Batch: 16, SelfSpec: SelfSpecOff})
			} else {
				e = loadFile(t, filepath.Join(dir, c.target+".gguf"), Options{Ctx: 1024, Batch: 16, DraftModel: filepath.Join(dir, c.drafter+".gguf"), DenseHead: c.dense, SelfSpec: SelfSpecOff})
			}
			ids, _ := e.Tokens(&Request{Prompt: copyHeavy[0]})
			for _, sp := range []SpecOptions{{Mode: c.mode, Fixed: true, Chains: true, DraftMax: 3}, {Mode: c.mode, DraftMax: 8}} {
				g := newTestGeneration(e, &sp, ids)
				e.Reset()
				if _, _, err := e.prefill(t.Context(), ids[:len(ids)-1]); err != nil {
					t.Fatal(err)
				}
				step := func() {
					next, err := g.step(g.history[len(g.history)-1], g.draftTree(sp.DraftMax))
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
				if a := steadyAllocs(10, step); a != 0 {
					t.Errorf("%+v: %v allocations per speculative step", sp, a)
				}
				if sp.Fixed && g.dstats[idxNative].Drafted == 0 {
					t.Errorf("%+v: nothing drafted", sp)
				}
			}
		})
	}
}
