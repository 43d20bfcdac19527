package model

import (
	"math/rand/v2"
	"testing"

	"github.com/geisten/geist/quant"
)

// benchHead builds the output head of a Gemma-4-E2B-shaped assistant
// (width 256, 262,144 tokens in Q8_0, 2,048 centroids of 128 tokens, the
// top 32 scored: the real files' shape) from random rows.
func benchHead(b *testing.B) *AssistState {
	const E, V, C = 256, 262144, 2048
	rng := rand.New(rand.NewPCG(1, 2))
	row := make([]float32, E)
	mat := func(rows int) *quant.Matrix {
		rs, _ := quant.RowSize(quant.Q8_0, E)
		data := make([]byte, rows*rs)
		for r := 0; r < rows; r++ {
			for i := range row {
				row[i] = float32(rng.NormFloat64())
			}
			if err := quant.QuantizeRow(quant.Q8_0, row, data[r*rs:(r+1)*rs]); err != nil {
				b.Fatal(err)
			}
		}
		m, err := quant.NewMatrix(quant.Q8_0, rows, E, data)
		if err != nil {
			b.Fatal(err)
		}
		return m
	}
	a := &Assistant{NEmbd: E, NVocab: V, Embd: mat(V), Centroids: mat(C), Ordering: make([]int32, V), SparseTop: 32}
	for i := range a.Ordering {
		a.Ordering[i] = int32(i)
	}
	rng.Shuffle(V, func(i, j int) { a.Ordering[i], a.Ordering[j] = a.Ordering[j], a.Ordering[i] })
	a.Clustered = a.Embd // the rows' order does not change the cost
	st := &AssistState{a: a, Sparse: true, Top: 32, xn: make([]float32, E), logits: make([]float32, V), sl: make([]float32, V),
		csc: make([]float32, C), clusters: make([]int, 0, C), cand: make([]int32, 0, V), acts: make([]byte, a.Embd.ActBytes(1))}
	for i := range st.xn {
		st.xn[i] = float32(rng.NormFloat64())
	}
	return st
}

// BenchmarkAssistantHead: one draft step's output head of an E2B-shaped
// assistant, dense (every row of the 262,144-token embedding) against
// sparse (2,048 centroids, then the 32 best clusters' 4,096 tokens).
func BenchmarkAssistantHead(b *testing.B) {
	if testing.Short() {
		b.Skip("-short")
	}
	st := benchHead(b)
	b.Run("dense", func(b *testing.B) {
		for b.Loop() {
			dense(st.a.Embd, st.logits, st.xn, st.acts)
		}
	})
	b.Run("sparse", func(b *testing.B) {
		for b.Loop() {
			st.sparseHead()
		}
	})
}
