package model

import (
	"bytes"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"github.com/geisten/geist/engine/zoo"
	"github.com/geisten/geist/quant"
)

// randomTree returns n parents for a random token tree: mostly chains with
// branches, a few extra roots.
func randomTree(rng *rand.Rand, n int) []int32 {
	p := make([]int32, n)
	for i := range p {
		switch r := rng.IntN(10); {
		case i == 0 || r == 0:
			p[i] = -1
		case r < 6:
			p[i] = int32(i - 1)
		default:
			p[i] = int32(rng.IntN(i))
		}
	}
	return p
}

// pathOf returns the batch indices from node i's root down to i.
func pathOf(parents []int32, i int) []int32 {
	var path []int32
	for j := int32(i); j >= 0; j = parents[j] {
		path = append([]int32{j}, path...)
	}
	return path
}

// TestTreeInvariance: the logits of every node of a token tree, verified in
// one ForwardTree pass, equal bit for bit those of its path computed one
// token at a time after the same cache; and after Compact keeps a path,
// the cache is byte for byte the cache of that path fed alone, so decoding
// goes on exactly. For every zoo model, kernel set and KV type.
func TestTreeInvariance(t *testing.T) {
	files, _ := filepath.Glob(zoo.Path(t, "models", "*.gguf"))
	forEachKernels(t, func(t *testing.T) {
		for _, kv := range []quant.Type{quant.F16, quant.Q8_0} {
			treeInvariance(t, files, kv)
		}
	})
}

// treeInvariance checks trees of 3, 9 and 16 nodes (or of sizes, when
// given).
func treeInvariance(t *testing.T, files []string, kv quant.Type, sizes ...int) {
	// The last start puts the trees across the boundary of the second and
	// third key blocks of the attention (a node's block mixes cache keys and
	// ancestors).
	starts, trees := []int{0, 37, 123}, 1
	if sizes == nil {
		sizes = []int{3, 9, 16}
		if testing.Short() || isGeneric(t) {
			// The generic set computes each row by the same loop whatever
			// the tree (as for batch invariance); the SIMD sets' tiles get
			// every size.
			sizes = []int{9}
		}
	}
	if testing.Short() || isGeneric(t) { // isGeneric: see batchInvarianceKV
		starts = []int{123}
	}
	for _, path := range files {
		name := strings.TrimSuffix(filepath.Base(path), ".gguf")
		if kv == quant.Q8_0 && !(strings.HasPrefix(name, "tiny-") && strings.HasSuffix(name, "Q4_0")) {
			continue // Q8_0 caches need head sizes of 32s; the quantized tiny models stand for the rest
		}
		if testing.Short() && !strings.Contains(name, "Q4_0") && !strings.Contains(name, "F32") {
			continue
		}
		if genericSpare(t, name) {
			continue
		}
		starts := starts
		if sweptElsewhere(name) {
			starts = []int{123}
		}
		t.Run(name+"/"+kv.String(), func(t *testing.T) {
			m := openModel(t, path)
			rng := rand.New(rand.NewPCG(3, uint64(len(name))))
			n := starts[len(starts)-1] + 2*sizes[len(sizes)-1]
			rows := max(16, sizes[len(sizes)-1])
			tree, err := m.NewState(StateOptions{Ctx: n, Batch: rows, LogitRows: rows, Threads: 2, KVType: kv})
			if err != nil {
				t.Fatal(err)
			}
			defer tree.Close()
			one, err := m.NewState(StateOptions{Ctx: n, Batch: 1, Threads: 2, KVType: kv})
			if err != nil {
				t.Fatal(err)
			}
			defer one.Close()
			ctx := make([]int32, starts[len(starts)-1])
			for i := range ctx {
				ctx[i] = int32(rng.IntN(m.NVocab))
			}
			forward := func(s *State, toks []int32) []float32 {
				t.Helper()
				var lg []float32
				for _, tok := range toks {
					var err error
					if lg, err = s.Forward([]int32{tok}, true); err != nil {
						t.Fatal(err)
					}
				}
				return lg
			}
			for _, start := range starts {
				for _, size := range sizes {
					for range trees {
						toks := make([]int32, size)
						for i := range toks {
							toks[i] = int32(rng.IntN(m.NVocab))
						}
						parents := randomTree(rng, size)
						tree.Truncate(0)
						for i := 0; i < start; i += 5 {
							if _, err := tree.Forward(ctx[i:min(i+5, start)], false); err != nil {
								t.Fatal(err)
							}
						}
						if err := tree.ForwardTree(toks, parents, nil); err != nil {
							t.Fatal(err)
						}
						got, err := tree.Logits(0, size)
						if err != nil {
							t.Fatal(err)
						}
						got = append([]float32(nil), got...)
						one.Truncate(0)
						forward(one, ctx[:start])
						for i := range toks {
							rewind(one, ctx, start)
							var pt []int32
							for _, j := range pathOf(parents, i) {
								pt = append(pt, toks[j])
							}
							want := forward(one, pt)
							sameRows(t, "tree node", got[i*m.NVocab:], want, i, i+1, m.NVocab, start, size)
						}
						// Keep the path to the last node; the cache must
						// equal that of the path alone.
						keep := pathOf(parents, size-1)
						if parents[keep[0]] != -1 {
							t.Fatal("path does not start at a root")
						}
						if err := tree.Compact(start, keep); err != nil {
							t.Fatal(err)
						}
						rewind(one, ctx, start)
						for _, j := range keep {
							forward(one, toks[j:j+1])
						}
						if tree.Len() != one.Len() {
							t.Fatalf("compacted cache holds %d positions, the path alone %d", tree.Len(), one.Len())
						}
						a, _ := tree.Snapshot(tree.Len(), nil)
						b, _ := one.Snapshot(one.Len(), nil)
						if !bytes.Equal(a, b) {
							t.Fatalf("start %d, tree %v: the compacted cache differs from the path's own", start, parents)
						}
					}
				}
			}
		})
	}
}

// rewind truncates s to the first n tokens of ctx; a model with recurrent
// layers returns exactly only to its checkpoints, so the tokens from there
// are run again.
func rewind(s *State, ctx []int32, n int) {
	s.Truncate(n)
	for s.Len() < n {
		if _, err := s.Forward(ctx[s.Len():n], false); err != nil {
			panic(err)
		}
	}
}

// TestProbe: row j of a probe is bit for bit what a one-token step after
// cache position from+j computes, with and without skipped blocks, and the
// probe leaves the cache as it was.
func TestProbe(t *testing.T) {
	for _, name := range []string{"stories260K-F32", "tiny-qwen3-Q4_0", "tiny-qwen2-F16"} {
		t.Run(name, func(t *testing.T) {
			m := openModel(t, zoo.Path(t, "models", name+".gguf"))
			rng := rand.New(rand.NewPCG(5, 6))
			seq := make([]int32, 24)
			for i := range seq {
				seq[i] = int32(rng.IntN(m.NVocab))
			}
			s, err := m.NewState(StateOptions{Ctx: 64, Batch: 8, LogitRows: 8, Threads: 2})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			ref, err := m.NewState(StateOptions{Ctx: 64, Batch: 8, Threads: 2})
			if err != nil {
				t.Fatal(err)
			}
			defer ref.Close()
			skip := &Skip{Attn: make([]bool, m.NLayer), MLP: make([]bool, m.NLayer)}
			skip.Attn[m.NLayer-1] = true
			skip.MLP[0] = true
			for _, k := range []*Skip{nil, skip} {
				if _, err := s.Forward(seq, false); err != nil {
					t.Fatal(err)
				}
				before, _ := s.Snapshot(s.Len(), nil)
				from := 10
				if err := s.Probe(seq[from:from+8], from, k); err != nil {
					t.Fatal(err)
				}
				got, err := s.Logits(0, 8)
				if err != nil {
					t.Fatal(err)
				}
				after, _ := s.Snapshot(s.Len(), nil)
				if s.Len() != len(seq) || !bytes.Equal(before, after) {
					t.Fatal("the probe changed the cache")
				}
				for j := 0; j < 8; j++ {
					ref.Truncate(0)
					if _, err := ref.Forward(seq[:from+j], false); err != nil {
						t.Fatal(err)
					}
					if err := ref.ForwardTree(seq[from+j:from+j+1], nil, k); err != nil {
						t.Fatal(err)
					}
					want, _ := ref.Logits(0, 1)
					sameRows(t, "probe", got[j*m.NVocab:], want, j, j+1, m.NVocab, from, 8)
				}
				s.Truncate(0)
			}
		})
	}
}

// TestSkipAll: a pass that skips every block is the output head over the
// token embedding, whatever the position and the cache; a pass that skips
// nothing is a plain pass.
func TestSkipAll(t *testing.T) {
	m := openModel(t, zoo.Path(t, "models", "stories260K-F32.gguf"))
	s, err := m.NewState(StateOptions{Ctx: 32, Batch: 4, Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	all := &Skip{Attn: make([]bool, m.NLayer), MLP: make([]bool, m.NLayer)}
	for l := range all.Attn {
		all.Attn[l], all.MLP[l] = true, true
	}
	none := &Skip{Attn: make([]bool, m.NLayer)}
	if err := s.ForwardTree([]int32{7}, nil, all); err != nil {
		t.Fatal(err)
	}
	a, _ := s.Logits(0, 1)
	a = append([]float32(nil), a...)
	if _, err := s.Forward([]int32{3, 4, 5}, false); err != nil {
		t.Fatal(err)
	}
	if err := s.ForwardTree([]int32{7}, nil, all); err != nil {
		t.Fatal(err)
	}
	b, _ := s.Logits(0, 1)
	sameRows(t, "skip all", b, a, 0, 1, m.NVocab, 4, 1)
	s.Truncate(0)
	if err := s.ForwardTree([]int32{1, 7}, nil, none); err != nil {
		t.Fatal(err)
	}
	c, _ := s.Logits(1, 2)
	c = append([]float32(nil), c...)
	s.Truncate(0)
	d, _ := s.Forward([]int32{1, 7}, false)
	sameRows(t, "skip none", c, d, 1, 2, m.NVocab, 0, 2)
	if _, err := s.Forward([]int32{1, 7}, false); err != nil {
		t.Fatal(err)
	}
	if err := s.ForwardTree([]int32{1}, nil, &Skip{Attn: make([]bool, 2)}); err == nil {
		t.Error("a skip mask of the wrong length was accepted")
	}
}

// TestTreeErrors: malformed trees, probes and compactions are refused.
func TestTreeErrors(t *testing.T) {
	m := openModel(t, zoo.Path(t, "models", "stories260K-F32.gguf"))
	s, err := m.NewState(StateOptions{Ctx: 16, Batch: 8, LogitRows: 8, Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, p := range [][]int32{{0, 0}, {-1, 1}, {-2, 0}, {-1}, {-1, 0, 1}} {
		if err := s.ForwardTree([]int32{1, 2}, p, nil); err == nil {
			t.Errorf("parents %v of two tokens accepted", p)
		}
	}
	if err := s.ForwardTree([]int32{1, 2, 3}, []int32{-1, 0, 0}, nil); err != nil {
		t.Fatal(err)
	}
	for _, nodes := range [][]int32{{0, 0}, {1, 0}, {0, 3}, {0, 1, 2, 3}} {
		if err := s.Compact(0, nodes); err == nil {
			t.Errorf("Compact(0, %v) accepted", nodes)
		}
	}
	if err := s.Compact(0, []int32{0, 2}); err != nil || s.Len() != 2 {
		t.Fatalf("Compact(0, [0 2]): %v, Len %d", err, s.Len())
	}
	if err := s.Probe([]int32{1, 2}, 1, nil); err == nil {
		t.Error("a probe past the cache was accepted")
	}
	if err := s.Probe([]int32{1, 2}, 0, nil); err != nil {
		t.Error(err)
	}
}
