package neon

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestElementwiseMatchesGeneric: every set's Add, ScaleMul and ToF16 give
// the generic bits, for lengths around the vector width and values from
// subnormal to infinite and NaN.
func TestElementwiseMatchesGeneric(t *testing.T) {
	r := rand.New(rand.NewPCG(71, 72))
	special := []float32{0, float32(math.Copysign(0, -1)), 1e-40, -1e-40, 6e-8, 65504, 65520, -70000, 1e10,
		float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()), -float32(math.NaN()), math.Float32frombits(0x7f800001)}
	for _, k := range Available() {
		for _, n := range []int{0, 1, 7, 8, 9, 17, 64, 100} {
			x, y, w := make([]float32, n), make([]float32, n), make([]float32, n)
			for i := range x {
				x[i], y[i], w[i] = float32(r.NormFloat64()*100), float32(r.NormFloat64()), float32(r.NormFloat64())
				if i < len(special) && n > 20 {
					x[i] = special[i]
				}
			}
			a, b := append([]float32{}, x...), append([]float32{}, x...)
			add(a, y)
			k.Add(b, y)
			so, go_ := make([]float32, n), make([]float32, n)
			scaleMul(so, x, w, 0.37)
			k.ScaleMul(go_, x, w, 0.37)
			h1, h2 := make([]uint16, n+1), make([]uint16, n+1)
			h2[n] = 0xabcd
			toF16(h1[:n], x)
			k.ToF16(h2[:n], x)
			if h2[n] != 0xabcd {
				t.Fatalf("%s n=%d: ToF16 wrote past dst", k.Name, n)
			}
			for i := 0; i < n; i++ {
				if !sameBits(a[i], b[i]) || !sameBits(so[i], go_[i]) || h1[i] != h2[i] {
					t.Fatalf("%s n=%d: %d (x=%v): Add %v/%v ScaleMul %v/%v ToF16 %#04x/%#04x", k.Name, n, i, x[i], b[i], a[i], go_[i], so[i], h2[i], h1[i])
				}
			}
		}
	}
}
