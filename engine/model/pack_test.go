package model

import (
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/geisten/geist/engine/zoo"
	"github.com/geisten/geist/neon"
)

// TestPackedModel: with the generic set given the reference packed layouts
// (groups of 16 rows, activations prepared for the k-quants and as they
// are for the rest), every zoo model of those types loads packed and
// computes, for a batch and token by token, bit for bit the logits of the
// same model in ggml layout; a tied output matrix packed for the head
// still serves the embedding lookups.
func TestPackedModel(t *testing.T) {
	files, _ := filepath.Glob(zoo.Path(t, "models", "*.gguf"))
	restore, err := neon.Use("generic")
	if err != nil {
		t.Fatal(err)
	}
	defer restore()
	seq := []int32{1, 17, 300, 5, 42, 99, 7, 250}
	for _, path := range files {
		name := strings.TrimSuffix(filepath.Base(path), ".gguf")
		if testing.Short() && name != "tiny-qwen2-Q4_K_M" && name != "tiny-llama-Q4_0" {
			continue // under emulation: a tied K-quant head and a legacy type
		}
		t.Run(name, func(t *testing.T) {
			plain := openModel(t, path)
			want := logitsOf(t, plain, seq)
			g := neon.Generic()
			saved := *g
			g.PackQ4_0 = neon.GenericPacking("Q4_0", 16, false)
			g.PackQ5_0 = neon.GenericPacking("Q5_0", 16, false)
			g.PackQ8_0 = neon.GenericPacking("Q8_0", 16, false)
			g.PackQ4_K = neon.GenericPacking("Q4_K", 16, true)
			g.PackQ5_K = neon.GenericPacking("Q5_K", 16, true)
			g.PackQ6_K = neon.GenericPacking("Q6_K", 16, true)
			m := openModel(t, path)
			*g = saved
			restore2, _ := neon.Use("generic") // the same set, packings gone from it but kept by m
			defer restore2()
			packed := 0
			for _, w := range m.matrices() {
				if w.Packed() != "" {
					packed++
				}
			}
			got := logitsOf(t, m, seq)
			for i := range got {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
					t.Fatalf("%d packed matrices: logit %d: %v, ggml layout %v", packed, i, got[i], want[i])
				}
			}
			t.Logf("%d matrices packed", packed)
		})
	}
}

// logitsOf returns the logits of every token of seq, computed in one pass
// and then one token at a time (each half of the result).
func logitsOf(t *testing.T, m *Model, seq []int32) []float32 {
	st, err := m.NewState(StateOptions{Ctx: 2 * len(seq), Batch: len(seq), Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	lg, err := st.Forward(seq, true)
	if err != nil {
		t.Fatal(err)
	}
	out := append([]float32{}, lg...)
	st.Truncate(0)
	for _, tok := range seq {
		lg, err := st.Forward([]int32{tok}, true)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, lg...)
	}
	return out
}
