package neon

import (
	"math/rand/v2"
	"testing"

	"github.com/geisten/geist/neon/ggml"
)

// TestAttnMatchesRows: every set's AttnScores and AttnSum give, bit for
// bit, the set's one-row kernels (DotF32F16, AxpyF16) applied row after
// row, for head sizes around the vector widths and 0..70 rows.
func TestAttnMatchesRows(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(41, 42))
	for _, k := range Available() {
		for _, hd := range []int{8, 12, 16, 24, 36, 64, 80, 128} {
			for _, rows := range []int{0, 1, 2, 3, 7, 70} {
				q := randFloats(r, hd)
				kc := make([]uint16, rows*hd)
				for i := range kc {
					kc[i] = ggml.FP32ToFP16(float32(r.NormFloat64()))
				}
				sc := make([]float32, rows+1)
				sc[rows] = guard
				k.AttnScores(sc[:rows], q, kc, 0.125)
				if sc[rows] != guard {
					t.Fatalf("%s hd=%d rows=%d: AttnScores wrote past its scores", k.Name, hd, rows)
				}
				for i := 0; i < rows; i++ {
					if want := k.DotF32F16(q, kc[i*hd:(i+1)*hd]) * 0.125; !sameBits(sc[i], want) {
						t.Fatalf("%s hd=%d rows=%d: score %d %v, one-row kernel %v", k.Name, hd, rows, i, sc[i], want)
					}
				}
				w := randFloats(r, rows)
				out, want := randFloats(r, hd+1), make([]float32, hd)
				copy(want, out)
				out[hd] = guard
				k.AttnSum(out[:hd], w, kc)
				for i := 0; i < rows; i++ {
					k.AxpyF16(want, w[i], kc[i*hd:(i+1)*hd])
				}
				if out[hd] != guard {
					t.Fatalf("%s hd=%d rows=%d: AttnSum wrote past its output", k.Name, hd, rows)
				}
				for i := range want {
					if !sameBits(out[i], want[i]) {
						t.Fatalf("%s hd=%d rows=%d: output %d %v, row by row %v", k.Name, hd, rows, i, out[i], want[i])
					}
				}
			}
		}
	}
}

// BenchmarkAttn: one 64-value head over 512 cached positions (scores,
// then the weighted sum), per set and against the one-row loop.
func BenchmarkAttn(b *testing.B) {
	r := rand.New(rand.NewPCG(43, 44))
	const hd, rows = 64, 512
	q, w, out := randFloats(r, hd), randFloats(r, rows), make([]float32, hd)
	kc := make([]uint16, rows*hd)
	for i := range kc {
		kc[i] = ggml.FP32ToFP16(float32(r.NormFloat64()))
	}
	sc := make([]float32, rows)
	for _, k := range Available() {
		b.Run(k.Name, func(b *testing.B) {
			b.SetBytes(2 * int64(len(kc)) * 2)
			for b.Loop() {
				k.AttnScores(sc, q, kc, 0.125)
				k.AttnSum(out, w, kc)
			}
		})
		b.Run(k.Name+"/rows", func(b *testing.B) {
			b.SetBytes(2 * int64(len(kc)) * 2)
			for b.Loop() {
				for t := range sc {
					sc[t] = k.DotF32F16(q, kc[t*hd:(t+1)*hd]) * 0.125
				}
				for t, a := range w {
					k.AxpyF16(out, a, kc[t*hd:(t+1)*hd])
				}
			}
		})
	}
}
