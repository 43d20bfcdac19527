package engine

import (
	"bytes"
	"context"
	"testing"

	"github.com/geisten/geist/engine/model"
	"github.com/geisten/geist/engine/spec"
)

// selfCalibration is the model's own greedy continuation of a story
// prompt, prompt included.
func selfCalibration(t testing.TB, e *Engine, n int) []int32 {
	t.Helper()
	prompt := "Once upon a time, there was a little dog named Max. Max liked to"
	ids, _ := generateIDs(t, e, prompt, n, SpecOptions{Mode: SpecOff}, greedy())
	p, _ := e.Tokens(&Request{Prompt: prompt})
	return append(p, ids...)
}

// TestSkipSearch: the search picks a set of blocks whose measured
// agreement and modelled cost promise a gain, and the set survives
// persistence; malformed sets are refused.
func TestSkipSearch(t *testing.T) {
	names := []string{"stories260K-F32", "tiny-llama-Q4_0", "tiny-qwen2-Q4_0", "tiny-qwen3-Q4_0"}
	if testing.Short() {
		names = names[:1]
	}
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			e := load(t, name, Options{Ctx: 512, Batch: 32})
			n := 160
			if testing.Short() {
				n = 64 // under emulation (83 s with 160)
			}
			toks := selfCalibration(t, e, n)
			st, err := e.model.NewState(model.StateOptions{Ctx: len(toks) + 33, Batch: 32, LogitRows: 32, Threads: 2})
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			ss, err := spec.NewSkipSearch(context.Background(), e.model, st, toks, nil)
			if err != nil {
				t.Fatal(err)
			}
			none, err := ss.Agreement(context.Background(), nil)
			if err != nil || none != 1 {
				t.Fatalf("nothing skipped: agreement %v (%v), want 1", none, err)
			}
			cost := func(k int) float64 { return 1 + 0.05*float64(k-1) }
			set, err := spec.SearchSkip(context.Background(), ss, cost, 200)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: agreement %.3f, cost %.3f, modelled gain %.3f, %d evaluations over %d tokens", set, set.Agreement, set.Cost, set.Gain, set.Evals, set.Tokens)
		})
	}
}

// TestSelfDraft: a self-speculative draft that skips nothing drafts the
// target's own greedy continuation (its first choices), and drafting
// leaves the target's cache as it was.
func TestSelfDraft(t *testing.T) {
	e := load(t, "stories260K-F32", Options{Ctx: 256, Batch: 32})
	toks := selfCalibration(t, e, 40)
	L := e.model.NLayer
	d := spec.NewSelfDraft(e.state, &spec.SkipSet{Skip: model.Skip{Attn: make([]bool, L), MLP: make([]bool, L)}})
	for _, at := range []int{len(toks) - 30, len(toks) - 15} { // inside the generated part
		e.Reset()
		if _, err := e.state.Forward(toks[:at-1], false); err != nil {
			t.Fatal(err)
		}
		before, _ := e.state.Snapshot(e.state.Len(), nil)
		tr := spec.NewTree(2)
		d.DraftTree(toks[:at], 8, tr, 4)
		after, _ := e.state.Snapshot(e.state.Len(), nil)
		if e.state.Len() != at-1 || !bytes.Equal(before, after) {
			t.Fatalf("drafting changed the cache")
		}
		var chain []int32
		for i, n := range tr.Nodes {
			if n.Rank == 0 && (n.Parent == -1 || int(n.Parent) == i-1) && len(chain) == i {
				chain = append(chain, n.Tok)
			}
			if n.Drafter != 4 {
				t.Errorf("node %d has drafter %d", i, n.Drafter)
			}
		}
		if len(chain) == 0 || !equal(chain, toks[at:at+len(chain)]) {
			t.Errorf("at %d: drafted %v, the target continues %v", at, chain, toks[at:min(at+8, len(toks))])
		}
	}
}
