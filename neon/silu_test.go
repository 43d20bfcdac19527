package neon

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestExpfAccuracy: expf is within 2 ulp of the exact exponential over
// its range (and clamps outside it).
func TestExpfAccuracy(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(51, 52))
	worst := 0.0
	for i := 0; i < 200000; i++ {
		x := float32(r.Float64()*175 - 87)
		got, want := float64(expf(x)), math.Exp(float64(x))
		ulp := float64(math.Nextafter32(float32(want), float32(math.Inf(1)))) - float64(float32(want))
		if d := math.Abs(got-want) / ulp; d > worst {
			worst = d
		}
	}
	if worst > 2 {
		t.Errorf("expf: worst error %.2f ulp", worst)
	}
	if expf(-87.5) != 0 || expf(float32(math.Inf(-1))) != 0 || expf(1000) != expf(88) || math.IsInf(float64(expf(88)), 0) {
		t.Error("expf does not clamp its argument")
	}
	t.Logf("worst error %.2f ulp", worst)
}

// TestSiLUMulMatchesGeneric: every set's SiLUMul gives the generic bits,
// for lengths around the vector width and values from tiny to huge,
// infinities included.
func TestSiLUMulMatchesGeneric(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(53, 54))
	special := []float32{0, float32(math.Copysign(0, -1)), 1e-30, -1e-30, 87, -87, 88, -88, 89, -89, 200, -200,
		float32(math.Inf(1)), float32(math.Inf(-1)), 3.4e38, -3.4e38}
	for _, k := range Available() {
		for _, n := range []int{0, 1, 7, 8, 9, 16, 31, 100, 1000} {
			g, u := make([]float32, n+1), make([]float32, n)
			for i := 0; i < n; i++ {
				g[i] = float32(r.NormFloat64() * math.Pow(10, r.Float64()*4-2))
				if i < len(special) && n > 20 {
					g[i] = special[i]
				}
				u[i] = float32(r.NormFloat64())
			}
			g[n] = guard
			want := append([]float32{}, g[:n]...)
			siluMul(want, u)
			k.SiLUMul(g[:n], u)
			if g[n] != guard {
				t.Fatalf("%s n=%d: wrote past gate", k.Name, n)
			}
			for i := range want {
				if !sameBits(g[i], want[i]) {
					t.Fatalf("%s n=%d: %d: %v, generic %v", k.Name, n, i, g[i], want[i])
				}
			}
		}
	}
}

// TestSoftmaxMatchesGeneric: every set's Softmax gives the generic bits.
func TestSoftmaxMatchesGeneric(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(57, 58))
	for _, k := range Available() {
		for _, n := range []int{1, 2, 7, 8, 9, 33, 300} {
			x := make([]float32, n)
			for i := range x {
				x[i] = float32(r.NormFloat64() * 10)
			}
			if n > 2 {
				x[1] = float32(math.Inf(-1)) // a masked score weighs nothing
			}
			want := append([]float32{}, x...)
			softmaxGeneric(want)
			k.Softmax(x)
			var sum float64
			for i := range x {
				if !sameBits(x[i], want[i]) {
					t.Fatalf("%s n=%d: %d: %v, generic %v", k.Name, n, i, x[i], want[i])
				}
				sum += float64(x[i])
			}
			if n > 2 && x[1] != 0 {
				t.Fatalf("%s n=%d: a -Inf score weighs %v", k.Name, n, x[1])
			}
			if math.Abs(sum-1) > 1e-5 {
				t.Fatalf("%s n=%d: sums to %v", k.Name, n, sum)
			}
		}
	}
}

// TestExpSubMatchesGeneric: every set's ExpSub gives the generic bits
// (the online softmax of the attention mixes them with Exp).
func TestExpSubMatchesGeneric(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(59, 60))
	for _, k := range Available() {
		for _, n := range []int{1, 7, 8, 9, 64, 65} {
			x := make([]float32, n)
			for i := range x {
				x[i] = float32(r.NormFloat64() * 10)
			}
			m := float32(r.NormFloat64())
			want := append([]float32{}, x...)
			for i := range want {
				want[i] = Exp(want[i] - m)
			}
			k.ExpSub(x, m)
			for i := range x {
				if !sameBits(x[i], want[i]) {
					t.Fatalf("%s n=%d: %d: %v, Exp %v", k.Name, n, i, x[i], want[i])
				}
			}
		}
	}
}

func BenchmarkSiLUMul(b *testing.B) {
	r := rand.New(rand.NewPCG(55, 56))
	g0, u := randFloats(r, 8192), randFloats(r, 8192)
	g := make([]float32, len(g0))
	for _, k := range Available() {
		b.Run(k.Name, func(b *testing.B) {
			b.SetBytes(8 * 8192)
			for b.Loop() {
				copy(g, g0) // fresh inputs: repeated SiLU would drift into subnormals
				k.SiLUMul(g, u)
			}
		})
	}
}
