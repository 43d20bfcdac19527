//go:build amd64 && !purego

package neon

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

func vnniNeed(t testing.TB) (vnni, avx *Kernels) {
	t.Helper()
	vnni, avx = byName("avx512vnni"), byName("avx2")
	if vnni == nil || avx == nil {
		t.Skip("avx512vnni: this CPU lacks AVX-512 VNNI, VL or BW")
	}
	return vnni, avx
}

// vnniVariants are the avx512vnni k-quant kernels, 256- and 512-bit, as
// kernel sets (whichever the set installed), so the tests run both.
func vnniVariants(t testing.TB) []*Kernels {
	t.Helper()
	vnni, _ := vnniNeed(t)
	y, z := *vnni, *vnni
	y.Name, z.Name = "avx512vnni-ymm", "avx512vnni-zmm"
	y.DotQ4_KQ8_K, y.DotQ6_KQ8_K = dotQ4_KQ8_Kvnni, dotQ6_KQ8_Kvnni
	z.DotQ4_KQ8_K, z.DotQ6_KQ8_K = dotQ4_KQ8_Kvnniz, dotQ6_KQ8_Kvnniz
	return []*Kernels{&y, &z}
}

// vnniKQuantKinds are the k-quant entries of avxQuantKinds.
func vnniKQuantKinds() []avxQuantKind {
	var ks []avxQuantKind
	for _, q := range avxQuantKinds {
		if q.name == "Q4_K" || q.name == "Q6_K" {
			ks = append(ks, q)
		}
	}
	return ks
}

// vnniSame checks that the avx512vnni k-quant dot gives the avx2 one's
// bits for every column, with guards around the outputs.
func vnniSame(t *testing.T, q avxQuantKind, vnni, avx *Kernels, w, a []byte, aStride, nb, n int) {
	t.Helper()
	want := make([]float32, n)
	q.dot(avx)(want, w, a, aStride, nb, n)
	got := make([]float32, n+2)
	for i := range got {
		got[i] = guard
	}
	q.dot(vnni)(got[1:n+1], w, a, aStride, nb, n)
	if got[0] != guard || got[n+1] != guard {
		t.Fatalf("%s nb=%d n=%d: wrote outside out", q.name, nb, n)
	}
	for j := 0; j < n; j++ {
		if !sameBits(got[1+j], want[j]) {
			t.Errorf("%s nb=%d n=%d col %d: %s %v (%08x), avx2 %v (%08x)", q.name, nb, n, j, vnni.Name, got[1+j], math.Float32bits(got[1+j]), want[j], math.Float32bits(want[j]))
		}
	}
}

// TestKQuantVNNIMatchesAVX2: the avx512vnni k-quant dots equal the avx2
// ones bit for bit, on quantized activations and on random bytes
// everywhere (both compute the same integer lanes for any bytes).
func TestKQuantVNNIMatchesAVX2(t *testing.T) {
	t.Parallel()
	_, avx := vnniNeed(t)
	for _, vnni := range vnniVariants(t) {
		t.Run(vnni.Name, func(t *testing.T) { vnniMatches(t, vnni, avx) })
	}
}

func vnniMatches(t *testing.T, vnni, avx *Kernels) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, q := range vnniKQuantKinds() {
		for _, nb := range []int{0, 1, 2, 3, 8} {
			for n := 1; n <= 17; n++ {
				if n > 9 && n != 16 && n != 17 {
					continue
				}
				aStride := nb*q.aSize + r.IntN(3)*4
				w := make([]byte, nb*q.wSize)
				for i := 0; i < nb; i++ {
					q.genBlock(r, w[i*q.wSize:(i+1)*q.wSize])
				}
				a := avxActs(r, q, nb, n, aStride)
				vnniSame(t, q, vnni, avx, w, a, aStride, nb, n)

				avxFill(r, w)
				avxFill(r, a)
				vnniSame(t, q, vnni, avx, w, a, aStride, nb, n)
			}
		}
	}
}

// TestKQuantVNNIExtremes: weights and activations at the ends of their
// ranges (constant weight bytes, quants -128 and 127, constant bsums).
func TestKQuantVNNIExtremes(t *testing.T) {
	t.Parallel()
	_, avx := vnniNeed(t)
	for _, vnni := range vnniVariants(t) {
		t.Run(vnni.Name, func(t *testing.T) { vnniExtremes(t, vnni, avx) })
	}
}

func vnniExtremes(t *testing.T, vnni, avx *Kernels) {
	for _, q := range vnniKQuantKinds() {
		for _, wb := range []byte{0x00, 0xff, 0x80, 0x7f, 0x88, 0x3f, 0xc0} {
			for _, ab := range []byte{0x80, 0x7f, 0x00, 0x81} {
				nb, n := 3, 5
				w := make([]byte, nb*q.wSize)
				for i := range w {
					w[i] = wb
				}
				for i := 0; i < nb; i++ {
					b := w[i*q.wSize : (i+1)*q.wSize]
					if q.name == "Q4_K" {
						avxPutF16(b, 0.5)
						avxPutF16(b[2:], 0.25)
					} else {
						avxPutF16(b[208:], 0.5)
					}
				}
				a := make([]byte, n*nb*q.aSize)
				for i := range a {
					a[i] = ab
				}
				for j := 0; j < n*nb; j++ {
					binary.LittleEndian.PutUint32(a[j*q.aSize:], math.Float32bits(0.125))
				}
				t.Run(fmt.Sprintf("%s/%02x/%02x", q.name, wb, ab), func(t *testing.T) {
					vnniSame(t, q, vnni, avx, w, a, nb*q.aSize, nb, n)
				})
			}
		}
	}
}

// BenchmarkKQuantVNNI measures the k-quant dots of the avx2 and
// avx512vnni sets side by side (2048 values, n columns); the bytes are the
// weight bytes read.
func BenchmarkKQuantVNNI(b *testing.B) {
	_, avx := vnniNeed(b)
	sets := append([]*Kernels{avx}, vnniVariants(b)...)
	for _, q := range vnniKQuantKinds() {
		for _, n := range []int{1, 2, 4, 8} {
			nb := 2048 / q.qk
			r := rand.New(rand.NewPCG(8, 9))
			w := make([]byte, nb*q.wSize)
			for i := 0; i < nb; i++ {
				q.genBlock(r, w[i*q.wSize:(i+1)*q.wSize])
			}
			a := avxActs(r, q, nb, n, nb*q.aSize)
			out := make([]float32, n)
			for _, k := range sets {
				dot := q.dot(k)
				b.Run(fmt.Sprintf("%s/%s/n=%d", q.name, k.Name, n), func(b *testing.B) {
					b.SetBytes(int64(len(w)))
					for b.Loop() {
						dot(out, w, a, nb*q.aSize, nb, n)
					}
				})
			}
		}
	}
}

// TestPackedAVX2MatchesVNNI: the avx2 kernels over the packed k-quant
// layouts compute the avx512vnni kernels' integers and float steps, so
// the same bits, for 1..9 columns.
func TestPackedAVX2MatchesVNNI(t *testing.T) {
	t.Parallel()
	avx, vnni := byName("avx2"), byName("avx512vnni")
	if avx == nil || vnni == nil {
		t.Skip("needs both the avx2 and the avx512vnni sets")
	}
	r := rand.New(rand.NewPCG(61, 62))
	for name, pa := range packingsOf(avx) {
		pv := packingsOf(vnni)[name]
		if pa == nil || pv == nil || name[3] != 'K' {
			continue
		}
		dt := dotTypeNamed(name)
		for _, nb := range []int{1, 2, 5} {
			w := randWeights(r, dt, 16*nb, 0)
			g := make([]byte, pv.GroupSize(nb))
			pv.Pack(g, w, nb*dt.wsize, nb)
			for n := 1; n <= 9; n++ {
				a := randActs(r, dt, nb, n, nb*dt.asize, 0)
				oa, ov := make([]float32, 16*n), make([]float32, 16*n)
				pa.Mul(oa, 16, g, a, nb*dt.asize, nb, n)
				pv.Mul(ov, 16, g, a, nb*dt.asize, nb, n)
				for i := range oa {
					if !sameBits(oa[i], ov[i]) {
						t.Fatalf("%s nb=%d n=%d: output %d: avx2 %v, avx512vnni %v", name, nb, n, i, oa[i], ov[i])
					}
				}
			}
		}
	}
}
