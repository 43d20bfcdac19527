package neon

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/geisten/geist/neon/ggml"
)

// v8Values returns n Q8_0 value rows of nb blocks, stride bytes apart, as a
// cache holds them: quants in [-127, 127], scales nonnegative halves (some
// zero, some tiny, one block now and then far larger, as an attention
// sink's).
func v8Values(r *rand.Rand, n, nb, stride int) []byte {
	b := make([]byte, max(0, (n-1)*stride+nb*sizeQ8_0))
	for i := range b {
		b[i] = byte(int8(r.IntN(255) - 127))
	}
	for t := range n {
		for j := range nb {
			o := t*stride + j*sizeQ8_0
			d := float32(math.Abs(r.NormFloat64()) / 100)
			switch r.IntN(16) {
			case 0:
				d = 0
			case 1:
				d *= 1e-4
			case 2:
				d *= 50
			}
			h := ggml.FP32ToFP16(d)
			b[o], b[o+1] = byte(h), byte(h>>8)
		}
	}
	return b
}

// v8Weights returns AttnBlock softmax-like weights in [0, 1] (some zero).
func v8Weights(r *rand.Rand) []float32 {
	w := make([]float32, AttnBlock)
	for i := range w {
		w[i] = float32(math.Exp(-8 * r.Float64() * r.Float64()))
		if r.IntN(10) == 0 {
			w[i] = 0
		}
	}
	return w
}

// TestSumV8MatchesGeneric: every set's TransposeV8 and SumV8 give the
// reference bits for every head size, block length and key range (a row's
// result does not depend on the keys outside its range), and SumV8 is
// close to the float sum of the dequantized values.
func TestSumV8MatchesGeneric(t *testing.T) {
	r := rand.New(rand.NewPCG(81, 82))
	for _, k := range Available() {
		for _, hd := range []int{32, 64, 96, 128, 256} {
			nb := hd / 32
			for _, n := range []int{1, 3, 4, 31, 32, 33, 40, 63, 64} {
				stride := nb * sizeQ8_0
				if n%2 == 1 {
					stride += 34
				}
				v := v8Values(r, n, nb, stride)
				nvt, nd := V8Size(n, hd)
				vt, dv := make([]byte, nvt+1), make([]float32, nd+1)
				vt[nvt], dv[nd] = 0x5a, guard
				k.TransposeV8(vt[:nvt], dv[:nd], v, stride, n, hd)
				rvt, rdv := make([]byte, nvt), make([]float32, nd)
				transposeV8(rvt, rdv, v, stride, n, hd)
				if vt[nvt] != 0x5a || dv[nd] != guard {
					t.Fatalf("%s hd=%d n=%d: TransposeV8 wrote past its lengths", k.Name, hd, n)
				}
				for i := range rvt {
					if vt[i] != rvt[i] {
						t.Fatalf("%s hd=%d n=%d: TransposeV8 byte %d %#x, generic %#x", k.Name, hd, n, i, vt[i], rvt[i])
					}
				}
				for i := range rdv {
					if !sameBits(dv[i], rdv[i]) {
						t.Fatalf("%s hd=%d n=%d: TransposeV8 scale %d %v, generic %v", k.Name, hd, n, i, dv[i], rdv[i])
					}
				}
				for _, rng := range [][2]int{{0, n}, {0, 1}, {n / 2, n}, {n / 3, n - n/4}, {min(33, n-1), n}} {
					lo, hi := rng[0], rng[1]
					w := v8Weights(r)
					out0 := make([]float32, hd)
					for i := range out0 {
						out0[i] = float32(r.NormFloat64())
					}
					got, want := append([]float32{}, out0...), append([]float32{}, out0...)
					wg := append([]float32{}, w...)
					k.SumV8(got, wg, lo, hi, vt[:nvt], dv[:nd])
					sumV8(want, w, lo, hi, rvt, rdv)
					for i := range want {
						if !sameBits(got[i], want[i]) {
							t.Fatalf("%s hd=%d n=%d keys [%d,%d): out %d %v, generic %v", k.Name, hd, n, lo, hi, i, got[i], want[i])
						}
					}
					// The float sum of the dequantized values, and the bound of
					// attnv8.go: half a step per term, relative to its group.
					f, bound := make([]float64, hd), make([]float64, hd)
					for g := lo / 32; g <= (hi-1)/32; g++ {
						for c := range nb {
							amax := 0.0
							for j := max(lo, g*32); j < min(hi, g*32+32); j++ {
								blk := v[j*stride+c*sizeQ8_0:]
								amax = max(amax, float64(w[j]*ggml.FP16ToFP32(uint16(blk[0])|uint16(blk[1])<<8)))
							}
							for j := max(lo, g*32); j < min(hi, g*32+32); j++ {
								blk := v[j*stride+c*sizeQ8_0:]
								d := float64(ggml.FP16ToFP32(uint16(blk[0]) | uint16(blk[1])<<8))
								for i := range 32 {
									x := float64(int8(blk[2+i]))
									f[c*32+i] += float64(w[j]) * d * x
									bound[c*32+i] += (amax/254 + 1e-6*float64(w[j])*d) * math.Abs(x)
								}
							}
						}
					}
					for i := range f {
						if e := math.Abs(float64(want[i]-out0[i]) - f[i]); e > bound[i]+1e-6*math.Abs(float64(out0[i])) {
							t.Fatalf("hd=%d n=%d keys [%d,%d): out %d adds %v, float %v (bound %v)", hd, n, lo, hi, i, want[i]-out0[i], f[i], bound[i])
						}
					}
				}
			}
		}
	}
}

// TestSumV8TinyWeights: a group whose weights times scales are all at
// most v8Tiny (where 127/amax would overflow) adds nothing in every set,
// and one just above it adds the reference's bits: the sets once parted
// there (the reference quantized to 127, FCVTNU to the byte -1).
func TestSumV8TinyWeights(t *testing.T) {
	r := rand.New(rand.NewPCG(83, 84))
	const hd, n = 64, 64
	nb := hd / 32
	stride := nb * sizeQ8_0
	v := v8Values(r, n, nb, stride)
	nvt, nd := V8Size(n, hd)
	rvt, rdv := make([]byte, nvt), make([]float32, nd)
	transposeV8(rvt, rdv, v, stride, n, hd)
	for _, scale := range []float32{0x1p-140, 0x1p-128, 0x1p-118, 0x1p-100} {
		w := v8Weights(r)
		for i := range w { // the row's every weight (the sums start at 0, so a group's bits show)
			w[i] *= scale
		}
		want := make([]float32, hd)
		sumV8(want, w, 0, n, rvt, rdv)
		for _, k := range Available() {
			vt, dv := make([]byte, nvt), make([]float32, nd)
			k.TransposeV8(vt, dv, v, stride, n, hd)
			got := make([]float32, hd)
			k.SumV8(got, append([]float32{}, w...), 0, n, vt, dv)
			for i := range want {
				if !sameBits(got[i], want[i]) {
					t.Fatalf("%s, weights scaled by %g: out %d %v, generic %v", k.Name, scale, i, got[i], want[i])
				}
			}
		}
	}
}

// TestAttnV8NoAllocs: the integer value sum allocates nothing.
func TestAttnV8NoAllocs(t *testing.T) {
	r := rand.New(rand.NewPCG(83, 84))
	const hd = 128
	v := v8Values(r, AttnBlock, hd/32, hd/32*sizeQ8_0)
	nvt, nd := V8Size(AttnBlock, hd)
	vt, dv, out, w := make([]byte, nvt), make([]float32, nd), make([]float32, hd), v8Weights(r)
	for _, k := range Available() {
		if a := testing.AllocsPerRun(10, func() {
			k.TransposeV8(vt, dv, v, hd/32*sizeQ8_0, AttnBlock, hd)
			k.SumV8(out, w, 3, AttnBlock, vt, dv)
		}); a != 0 {
			t.Errorf("%s: %v allocations per block", k.Name, a)
		}
	}
}
