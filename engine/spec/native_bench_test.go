package spec

import (
	"math"
	"math/rand/v2"
	"testing"
)

// sparseRow is a 262,144-token logit row of a sparse head: 4,096 finite
// logits (32 clusters of 128), −∞ elsewhere, and the finite ones' ids.
func sparseRow() ([]float32, []int32) {
	l := make([]float32, 262144)
	for i := range l {
		l[i] = float32(math.Inf(-1))
	}
	rng := rand.New(rand.NewPCG(1, 2))
	var cand []int32
	for _, i := range rng.Perm(len(l))[:4096] {
		l[i] = float32(rng.NormFloat64())
		cand = append(cand, int32(i))
	}
	return l, cand
}

// BenchmarkTopKSparse: a draft step's top 3 and their probabilities over a
// sparse head's row, scanning the whole row (topK) or its candidates
// (topKIn).
func BenchmarkTopKSparse(b *testing.B) {
	l, cand := sparseRow()
	var top [3]int32
	var p [3]float64
	b.Run("row", func(b *testing.B) {
		for b.Loop() {
			topK(l, top[:], p[:])
		}
	})
	b.Run("candidates", func(b *testing.B) {
		for b.Loop() {
			topKIn(l, cand, top[:], p[:])
		}
	})
}
