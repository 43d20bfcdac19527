package neon

import (
	"math/rand/v2"
	"testing"

	"github.com/geisten/geist/neon/ggml"
)

// TestDequantQ8_0MatchesGeneric: every set's DequantQ8_0 gives the
// reference bits for any block bytes (every kind of scale: normal,
// subnormal, zero, infinite, NaN) and writes nothing past its values.
func TestDequantQ8_0MatchesGeneric(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(71, 72))
	for _, k := range Available() {
		for _, nb := range []int{0, 1, 2, 3, 4, 8, 9, 64} {
			src := make([]byte, nb*sizeQ8_0)
			for i := range src {
				src[i] = byte(r.Uint32())
			}
			for b := range nb {
				h := ggml.FP32ToFP16(float32(r.NormFloat64() / 64))
				switch b % 5 {
				case 1:
					h = []uint16{0x0001, 0x83ff, 0x8000, 0x0000, 0x7c00, 0xfc00, 0x7c01, 0xfe00}[r.IntN(8)]
				case 2:
					h = uint16(r.Uint32())
				}
				src[b*sizeQ8_0], src[b*sizeQ8_0+1] = byte(h), byte(h>>8)
			}
			got, want := make([]float32, nb*32+1), make([]float32, nb*32)
			got[nb*32] = guard
			k.DequantQ8_0(got[:nb*32], src)
			dequantQ8_0(want, src)
			for i := range want {
				if !sameBits(got[i], want[i]) {
					t.Fatalf("%s nb=%d: value %d %v, generic %v", k.Name, nb, i, got[i], want[i])
				}
			}
			if got[nb*32] != guard {
				t.Fatalf("%s nb=%d: DequantQ8_0 wrote past its values", k.Name, nb)
			}
		}
	}
}

// q8Blocks returns n Q8_0 rows of nb blocks, stride bytes apart: random
// quants over the whole int8 range, scales mostly small normal halves and
// now and then any half at all.
func q8Blocks(r *rand.Rand, n, nb, stride int) []byte {
	b := make([]byte, max(0, (n-1)*stride+nb*sizeQ8_0))
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	for t := range n {
		for j := range nb {
			o := t*stride + j*sizeQ8_0
			h := ggml.FP32ToFP16(float32(r.NormFloat64() / 100))
			if r.IntN(16) == 0 {
				h = uint16(r.Uint32())
			}
			b[o], b[o+1] = byte(h), byte(h>>8)
		}
	}
	return b
}

// TestScoresQ8_0MatchesGeneric: every set's ScoresQ8_0 gives the generic
// one-key dots' bits for any number of keys and rows (so a score does not
// depend on the others of its call) and writes only the scores it owns.
func TestScoresQ8_0MatchesGeneric(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(73, 74))
	for _, k := range Available() {
		for _, nb := range []int{1, 2, 4, 8, 17} {
			for _, nk := range []int{0, 1, 3, 4, 7, 8, 9, 31, 63, 64} {
				for _, nq := range []int{1, 2, 4, 5, 32} {
					kStride, qStride := nb*sizeQ8_0, nb*sizeQ8_0
					if nk%2 == 1 {
						kStride += 3
					}
					if nq%2 == 1 {
						qStride += 34
					}
					keys := q8Blocks(r, nk, nb, kStride)
					qs := q8Blocks(r, nq, nb, qStride)
					got := make([]float32, nq*AttnBlock)
					for i := range got {
						got[i] = guard
					}
					k.ScoresQ8_0(got, keys, kStride, qs, qStride, nb, nk, nq, 0.125)
					for row := range nq {
						for key := range AttnBlock {
							g := got[row*AttnBlock+key]
							if key >= nk {
								if g != guard {
									t.Fatalf("%s nb=%d nk=%d nq=%d: wrote score %d of row %d", k.Name, nb, nk, nq, key, row)
								}
								continue
							}
							want := dotQ8_0Q8_0(keys[key*kStride:], qs[row*qStride:], nb) * 0.125
							if !sameBits(g, want) {
								t.Fatalf("%s nb=%d nk=%d nq=%d: score %d of row %d %v, generic %v", k.Name, nb, nk, nq, key, row, g, want)
							}
						}
					}
				}
			}
		}
	}
}

// TestAttnQ8NoAllocs: the Q8_0 cache's attention kernels allocate nothing
// (they run per key block of every decoded token).
func TestAttnQ8NoAllocs(t *testing.T) {
	r := rand.New(rand.NewPCG(75, 76))
	const nb, nk, nq = 4, AttnBlock, 8
	keys, qs := q8Blocks(r, nk, nb, nb*sizeQ8_0), q8Blocks(r, nq, nb, nb*sizeQ8_0)
	sc, v := make([]float32, nq*AttnBlock), make([]float32, nk*nb*32)
	for _, k := range Available() {
		if a := testing.AllocsPerRun(10, func() {
			k.ScoresQ8_0(sc, keys, nb*sizeQ8_0, qs, nb*sizeQ8_0, nb, nk-3, nq, 0.125)
			k.DequantQ8_0(v, keys)
		}); a != 0 {
			t.Errorf("%s: %v allocations per block", k.Name, a)
		}
	}
}
