package model

import (
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"github.com/geisten/geist/engine/zoo"
)

// TestForwardBatchTrees: sequences whose rows in a batched pass are
// speculative steps (the fed token and a drafted tree, every row's logits
// into the sequence's own buffer, more rows in all than one head call
// takes) beside others' decoding rows and prompt chunks get, at every
// pass, the logits ForwardTree gives each alone, bit for bit, and after
// Compact keeps a path in each, the same cache: the next passes agree too.
func TestForwardBatchTrees(t *testing.T) {
	for _, path := range batchTreeFiles(t) {
		t.Run(strings.TrimSuffix(filepath.Base(path), ".gguf"), func(t *testing.T) { forwardBatchTrees(t, path) })
	}
}

// batchTreeFiles: dense families and the recurrent ones (lfm2's short
// convolutions, qwen35's gated DeltaNet, granitehybrid's Mamba-2).
func batchTreeFiles(t *testing.T) []string {
	fs := []string{zoo.Path(t, "models", "tiny-llama-Q4_0.gguf"), zoo.Path(t, "new", "models", "tiny-gemma3-Q4_0.gguf"),
		zoo.Path(t, "new", "models", "tiny-lfm2-Q4_0.gguf"), new2Model(t, "tiny-qwen35-Q4_0"), new2Model(t, "tiny-granitehybrid-Q4_0")}
	if !testing.Short() {
		fs = append(fs, zoo.Path(t, "models", "tiny-qwen3-Q4_K_M.gguf"), new2Model(t, "tiny-qwen35-Q4_K_M"), new2Model(t, "tiny-granitehybrid-Q8_0"), zoo.Path(t, "new", "models", "tiny-lfm2-Q8_0.gguf"))
	}
	return fs
}

func forwardBatchTrees(t *testing.T, path string) {
	m := openModel(t, path)
	const ctx, nseq, rounds = 256, 3, 10
	rng := rand.New(rand.NewPCG(5, 6))
	nv := m.NVocab
	opt := StateOptions{Ctx: ctx, Batch: 32, Threads: 2, LogitRows: 12}
	w, err := m.NewState(opt)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	seqs, refs := []*State{w}, []*State{}
	for i := range nseq {
		if i > 0 {
			sl, err := w.NewSlot(StateOptions{Ctx: ctx})
			if err != nil {
				t.Fatal(err)
			}
			defer sl.Close()
			seqs = append(seqs, sl)
		}
		ref, err := m.NewState(StateOptions{Ctx: ctx, Batch: 32, Threads: 1, LogitRows: 12})
		if err != nil {
			t.Fatal(err)
		}
		defer ref.Close()
		refs = append(refs, ref)
	}
	outs := make([][]float32, nseq)
	for i := range outs {
		outs[i] = make([]float32, 12*nv)
	}
	tok := func() int32 { return int32(rng.IntN(nv)) }
	batch := make([]Seq, nseq)
	for round := range rounds {
		type plan struct {
			toks, par []int32
			all       bool
		}
		plans := make([]plan, nseq)
		for i := range nseq {
			var p plan
			switch {
			case round == 0 || (i == 2 && round == 5): // a prompt chunk (the third sequence starts over)
				if round == 5 {
					seqs[i].Truncate(0)
					refs[i].Truncate(0)
				}
				p.toks = make([]int32, 5+rng.IntN(12))
				for j := range p.toks {
					p.toks[j] = tok()
				}
			case rng.IntN(4) == 0: // a plain decoding row
				p.toks = []int32{tok()}
			default: // a step with a drafted tree of up to 11 nodes
				n := 1 + rng.IntN(11)
				p.toks, p.par, p.all = make([]int32, n), make([]int32, n), true
				p.par[0] = -1
				for j := 1; j < n; j++ {
					p.toks[j], p.par[j] = tok(), int32(rng.IntN(j))
				}
				p.toks[0] = tok()
			}
			plans[i] = p
			batch[i] = Seq{S: seqs[i], Tokens: p.toks, Parents: p.par, Out: outs[i], All: p.all, Logits: true}
		}
		bases := make([]int, nseq)
		for i := range nseq {
			bases[i] = seqs[i].Len()
		}
		if _, err := w.ForwardBatch(batch); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		for i, p := range plans {
			ref := refs[i]
			var want []float32
			if p.par != nil {
				if err := ref.ForwardTree(p.toks, p.par, nil); err != nil {
					t.Fatal(err)
				}
				if want, err = ref.Logits(0, len(p.toks)); err != nil {
					t.Fatal(err)
				}
			} else if want, err = ref.Forward(p.toks, false); err != nil {
				t.Fatal(err)
			}
			for j := range want {
				if math.Float32bits(outs[i][j]) != math.Float32bits(want[j]) {
					t.Fatalf("round %d sequence %d (%d rows, tree %v): logit %d of row %d is %v batched, %v alone", round, i, len(p.toks), p.par != nil, j%nv, j/nv, outs[i][j], want[j])
				}
			}
			if p.par == nil {
				continue
			}
			// Keep a random path from the root.
			path := []int32{0}
			for {
				var kids []int32
				for j := int(path[len(path)-1]) + 1; j < len(p.par); j++ {
					if p.par[j] == path[len(path)-1] {
						kids = append(kids, int32(j))
					}
				}
				if len(kids) == 0 || rng.IntN(4) == 0 {
					break
				}
				path = append(path, kids[rng.IntN(len(kids))])
			}
			if err := seqs[i].Compact(bases[i], path); err != nil {
				t.Fatal(err)
			}
			if err := ref.Compact(bases[i], path); err != nil {
				t.Fatal(err)
			}
		}
		for i := range nseq {
			if fmt.Sprint(seqs[i].Tokens()) != fmt.Sprint(refs[i].Tokens()) {
				t.Fatalf("round %d sequence %d holds %v, alone %v", round, i, seqs[i].Tokens(), refs[i].Tokens())
			}
		}
	}
}
