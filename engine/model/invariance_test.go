package model

import (
	"math"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"github.com/geisten/geist/engine/zoo"
	"github.com/geisten/geist/neon"
	"github.com/geisten/geist/quant"
)

// TestBatchInvariance: the logits of every position computed inside a
// K-token pass equal, bit for bit, the logits computed one token at a time,
// for K = 1..16 and prefill-sized batches, at several context lengths, for
// every zoo model. Speculative verification and prompt-cache restores
// promise output identical to plain decoding because of this.
func TestBatchInvariance(t *testing.T) {
	files, _ := filepath.Glob(zoo.Path(t, "models", "*.gguf"))
	forEachKernels(t, func(t *testing.T) { batchInvariance(t, files) })
}

// TestBatchInvarianceQ8KV: the same with a Q8_0 KV cache (tiny-gemma3's
// four query heads per KV head of 64 take the decoding tile's fused
// four-row value sums where the set has them).
func TestBatchInvarianceQ8KV(t *testing.T) {
	files, _ := filepath.Glob(zoo.Path(t, "models", "tiny-*Q4_0.gguf"))
	files = append(files, zoo.Path(t, "new", "models", "tiny-gemma3-Q4_0.gguf"))
	forEachKernels(t, func(t *testing.T) { batchInvarianceKV(t, files, quant.Q8_0) })
}

func batchInvariance(t *testing.T, files []string) { batchInvarianceKV(t, files, quant.F16) }

func batchInvarianceKV(t *testing.T, files []string, kv quant.Type) {
	ks := []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 64, 256}
	starts := []int{0, 1, 37, 100}
	// The generic set's kernels compute every column by the same loop
	// whatever the batch (no token tiles, so no remainders to sweep); the
	// engine's own tiles (attention, threads' row splits) are the same
	// under every set and swept in full under the SIMD sets. The generic
	// set runs the short sweep on every file: at the full sweep it took
	// 80% of this package's time in CI.
	short := testing.Short() || isGeneric(t)
	for _, path := range files {
		name := strings.TrimSuffix(filepath.Base(path), ".gguf")
		if testing.Short() && !strings.Contains(name, "Q4_0") && !strings.Contains(name, "Q4_K") && !strings.Contains(name, "F32") {
			continue
		}
		if genericSpare(t, name) {
			continue
		}
		ks, starts := ks, starts
		if short || sweptElsewhere(name) { // see sweptElsewhere
			ks = []int{1, 3, 8, 16, 64}
			starts = []int{0, 100} // past two key blocks of the attention
		}
		t.Run(name, func(t *testing.T) {
			m := openModel(t, path)
			maxK := ks[len(ks)-1]
			n := starts[len(starts)-1] + maxK
			rng := rand.New(rand.NewPCG(1, 2))
			seq := make([]int32, n)
			for i := range seq {
				seq[i] = int32(rng.IntN(m.NVocab))
			}
			// Reference: one token at a time.
			one, err := m.NewState(StateOptions{Ctx: n, Batch: 1, Threads: 2, KVType: kv})
			if err != nil {
				t.Fatal(err)
			}
			defer one.Close()
			ref := make([]float32, n*m.NVocab)
			for i, tok := range seq {
				lg, err := one.Forward([]int32{tok}, true)
				if err != nil {
					t.Fatal(err)
				}
				copy(ref[i*m.NVocab:], lg)
			}
			st, err := m.NewState(StateOptions{Ctx: n, Batch: maxK, Threads: 2, LogitRows: maxK, KVType: kv})
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			for _, start := range starts {
				// Fill the cache up to start with a different batching
				// (chunks of 7), then run K tokens in one pass.
				st.Truncate(0)
				for i := 0; i < start; i += 7 {
					if _, err := st.Forward(seq[i:min(i+7, start)], false); err != nil {
						t.Fatal(err)
					}
				}
				for _, k := range ks {
					if k > 16 && start != starts[len(starts)-1] {
						continue // prefill-sized batches at one context length
					}
					st.Truncate(start)
					lg, err := st.Forward(seq[start:start+k], true)
					if err != nil {
						t.Fatal(err)
					}
					sameRows(t, "batched", lg, ref[start*m.NVocab:], 0, k, m.NVocab, start, k)
					if k > 16 {
						continue
					}
					// The same batch through ForwardRows, its logits asked
					// in pieces (as a verifier does) and once more whole.
					st.Truncate(start)
					if err := st.ForwardRows(seq[start : start+k]); err != nil {
						t.Fatal(err)
					}
					for _, r := range [][2]int{{0, min(2, k)}, {min(2, k), k}, {k - 1, k}, {0, k}} {
						if r[0] >= r[1] {
							continue
						}
						lg, err := st.Logits(r[0], r[1])
						if err != nil {
							t.Fatal(err)
						}
						sameRows(t, "ForwardRows+Logits", lg, ref[(start+r[0])*m.NVocab:], r[0], r[1], m.NVocab, start, k)
					}
				}
			}
		})
	}
}

// isGeneric reports whether t runs under forEachKernels' generic set.
func isGeneric(t *testing.T) bool { return strings.Contains(t.Name(), "/generic") }

// genericSpare reports whether the file called name is left out of an
// invariance sweep under the generic set: the generic kernels are chosen
// by weight type alone and compute every row by the same loop whatever
// the batch, and tiny-llama has a file of every type the zoo's models/
// holds, so the qwen2, qwen3 and stories260K files there (the same types,
// the same Go around the kernels) add nothing under it. They took half of
// the generic set's invariance time natively (138 s of TestBatchInvariance
// and TestTreeInvariance in make test); the SIMD sets sweep them.
func genericSpare(t *testing.T, name string) bool {
	return isGeneric(t) && (strings.HasPrefix(name, "tiny-qwen2-") || strings.HasPrefix(name, "tiny-qwen3-") || strings.HasPrefix(name, "stories260K-"))
}

// sameRows compares rows [lo, hi) of a pass (got holds them from lo on,
// want from row lo of the reference on) bit for bit.
func sameRows(t *testing.T, what string, got, want []float32, lo, hi, nv, start, k int) {
	t.Helper()
	for j := 0; j < hi-lo; j++ {
		for v := 0; v < nv; v++ {
			if a, b := got[j*nv+v], want[j*nv+v]; math.Float32bits(a) != math.Float32bits(b) {
				t.Fatalf("start %d, K=%d, row %d, token %d: %s %v, alone %v", start, k, lo+j, v, what, a, b)
			}
		}
	}
}

// TestLogitsErrors: Logits refuses rows outside the last ForwardRows batch,
// and any rows after a Truncate or a Forward; ForwardRows refuses batches
// larger than its logits buffer.
func TestLogitsErrors(t *testing.T) {
	m := openModel(t, zoo.Path(t, "models", "stories260K-F32.gguf"))
	st, err := m.NewState(StateOptions{Ctx: 64, Batch: 8, LogitRows: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.Logits(0, 1); err == nil {
		t.Error("Logits before any ForwardRows succeeded")
	}
	if err := st.ForwardRows([]int32{1, 2, 3, 4, 5}); err == nil {
		t.Error("ForwardRows of 5 tokens with 4 logit rows succeeded")
	}
	if err := st.ForwardRows([]int32{1, 2, 3}); err != nil {
		t.Fatal(err)
	}
	for _, r := range [][2]int{{-1, 1}, {0, 4}, {2, 2}, {3, 4}} {
		if _, err := st.Logits(r[0], r[1]); err == nil {
			t.Errorf("Logits(%d, %d) of a 3-token batch succeeded", r[0], r[1])
		}
	}
	if _, err := st.Logits(1, 3); err != nil {
		t.Errorf("Logits(1, 3): %v", err)
	}
	st.Truncate(2)
	if _, err := st.Logits(0, 1); err == nil {
		t.Error("Logits after Truncate succeeded")
	}
	if err := st.ForwardRows([]int32{1}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Forward([]int32{2}, false); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Logits(0, 1); err == nil {
		t.Error("Logits after Forward succeeded")
	}
}

// TestAttnV8OtherPath: the Q8_0 cache's value sum that the kernel set does
// not prefer (neon.AttnV8: integer or float) is batch and tree invariant
// too, on a plain and a sliding-window model (the default path is swept
// by TestBatchInvarianceQ8KV and TestTreeInvariance).
func TestAttnV8OtherPath(t *testing.T) {
	files := []string{zoo.Path(t, "models", "tiny-llama-Q4_0.gguf"), zoo.Path(t, "new", "models", "tiny-gemma3-Q4_0.gguf")}
	forEachKernels(t, func(t *testing.T) {
		defer neon.SetAttnV8(!neon.AttnV8())()
		t.Logf("integer value sums: %v", neon.AttnV8())
		batchInvarianceKV(t, files, quant.Q8_0)
		treeInvariance(t, files[:1], quant.Q8_0, 9)
	})
}

// TestAttnF16OtherPath: attention over the F16 cache in the arithmetic the
// kernel set does not use by default (neon.AttnF16: half-precision value
// sums or float32), and with half-precision scores too
// (neon.AttnF16Scores, selectable only), is batch and tree invariant, on a
// plain and a sliding-window model, and stays within llama.cpp's tolerance
// on them (the default path is swept by TestBatchInvariance,
// TestTreeInvariance and TestConformance*). Only sets with half-precision
// kernels (a CPU with FEAT_FP16 arithmetic) have other paths, and only
// head sizes that are multiples of 64 take the tiled kernels (tiny-llama's
// 32 does not: tiny-qwen3's 128).
func TestAttnF16OtherPath(t *testing.T) {
	files := []string{zoo.Path(t, "models", "tiny-qwen3-Q4_0.gguf"), zoo.Path(t, "new", "models", "tiny-gemma3-Q4_0.gguf")}
	goldens := []string{zoo.Path(t, "golden", "gen-tiny-qwen3-Q4_0.json"), zoo.Path(t, "new", "golden", "gen-tiny-gemma3-Q4_0.json")}
	forEachKernels(t, func(t *testing.T) {
		if tk := neon.Active().AttnTile; tk == nil || tk.SumRowsH == nil {
			t.Skipf("%s has no half-precision attention on this CPU", neon.Active().Name)
		}
		for _, all := range []bool{false, true} {
			if !all && testing.Short() && neon.AttnF16() {
				// Under emulation: the other path is float32, the same
				// kernels the Cortex-A72 run sweeps as its default.
				continue
			}
			restore := neon.SetAttnF16(!neon.AttnF16())
			if all {
				restore()
				restore = neon.SetAttnF16All()
			}
			t.Logf("half-precision value sums: %v, scores: %v", neon.AttnF16(), neon.AttnF16Scores())
			batchInvarianceKV(t, files, quant.F16)
			treeInvariance(t, files[:1], quant.F16, 9)
			conformance(t, goldens, quant.F16)
			restore()
		}
	})
}
