package neon

import "math"

// SiLU and its exponential, defined once so that every implementation
// computes the same bits: Cephes' expf (Cody-Waite reduction by ln 2,
// a degree-5 polynomial), each product rounded to float32 before its
// addition (no fused multiply-add), the argument clamped to [-87, 88]
// so that 2^n stays a normal float. Its error is about 1 ulp; ggml's
// vector SiLU uses an approximation of its own too. Below the range (and
// for NaN) the result is exactly 0, so that a masked score (-Inf) weighs
// nothing in a softmax.
const (
	expLo  = -87
	expHi  = 88
	log2e  = 1.44269504088896341
	expC1  = 0.693359375 // ln 2 = expC1 + expC2, expC1 exact in 9 bits
	expC2  = -2.12194440e-4
	expP0  = 1.9875691500e-4
	expP1  = 1.3981999507e-3
	expP2  = 8.3334519073e-3
	expP3  = 4.1665795894e-2
	expP4  = 1.6666665459e-1
	expP5  = 5.0000001201e-1
	expOne = 1
)

// expf is e^x by the algorithm above (the reference the vector kernels
// reproduce).
func expf(x float32) float32 {
	if !(x >= expLo) {
		return 0
	}
	x = min(x, expHi)
	n := float32(math.RoundToEven(float64(float32(x * log2e))))
	r := x - float32(n*expC1)
	r = r - float32(n*expC2)
	z := float32(r * r)
	y := float32(expP0)
	y = float32(y*r) + expP1
	y = float32(y*r) + expP2
	y = float32(y*r) + expP3
	y = float32(y*r) + expP4
	y = float32(y*r) + expP5
	y = float32(float32(y*z)+r) + expOne
	return y * math.Float32frombits(uint32(int32(n)+127)<<23)
}

// siluMul sets gate[i] = silu(gate[i]) * up[i], silu(g) = g / (1 + e^-g).
func siluMul(gate, up []float32) {
	up = up[:len(gate)]
	for i, g := range gate {
		gate[i] = g / (1 + expf(-g)) * up[i]
	}
}

// softmax normalizes x in place: the exponentials of x - max(x) (expf),
// their sum in float64 in index order, each exponential times the float32
// reciprocal of the sum. ex computes x[i] = expf(x[i] - m) for a set.
func softmax(x []float32, ex func(x []float32, m float32)) {
	if len(x) == 0 {
		return
	}
	mx := x[0]
	for _, v := range x[1:] {
		mx = max(mx, v)
	}
	ex(x, mx)
	var sum float64
	for _, e := range x {
		sum += float64(e)
	}
	inv := float32(1 / sum)
	for i := range x {
		x[i] *= inv
	}
}

func expSub(x []float32, m float32) {
	for i, v := range x {
		x[i] = expf(v - m)
	}
}

func softmaxGeneric(x []float32) { softmax(x, expSub) }
