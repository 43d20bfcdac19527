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
