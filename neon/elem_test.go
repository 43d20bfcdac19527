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
	t.Parallel()
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

// TestDeltaRow: every set's DeltaRow (the gated delta rule's row update)
// is within float rounding of the generic one on unit q and k, leaves the
// same row and returns the same bits whether it reads R from another row
// or updates S in place, and is deterministic (the recurrence's replay
// depends on it).
func TestDeltaRow(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(81, 82))
	for _, k := range Available() {
		for _, n := range []int{16, 64, 128, 20} {
			R, q, kk := make([]float32, n), make([]float32, n), make([]float32, n)
			var nq, nk float64
			for i := range R {
				R[i], q[i], kk[i] = float32(r.NormFloat64()*0.3), float32(r.NormFloat64()), float32(r.NormFloat64())
				nq += float64(q[i]) * float64(q[i])
				nk += float64(kk[i]) * float64(kk[i])
			}
			for i := range q {
				q[i] /= float32(math.Sqrt(nq))
				kk[i] /= float32(math.Sqrt(nk))
			}
			v, beta, decay := float32(0.7), float32(0.6), float32(0.93)
			g := make([]float32, n)
			want := deltaRow(g, R, q, kk, v, beta, decay)
			s1 := make([]float32, n)
			got := k.DeltaRow(s1, R, q, kk, v, beta, decay)
			s2 := append([]float32(nil), R...)
			got2 := k.DeltaRow(s2, s2, q, kk, v, beta, decay)
			if !sameBits(got, got2) || math.Abs(float64(got-want)) > 1e-5 {
				t.Fatalf("%s n=%d: %v in place %v, generic %v", k.Name, n, got, got2, want)
			}
			for i := range s1 {
				if !sameBits(s1[i], s2[i]) || math.Abs(float64(s1[i]-g[i])) > 1e-5 {
					t.Fatalf("%s n=%d: S[%d] %v in place %v, generic %v", k.Name, n, i, s1[i], s2[i], g[i])
				}
			}
		}
	}
}

// TestDeltaRows: every set's DeltaRows gives, row by row, the bits of
// the same set's DeltaRow (the rows and the outputs), in place and out of
// place, for row counts around its interleaving and for widths the SIMD
// loops take and leave to the generic code.
func TestDeltaRows(t *testing.T) {
	r := rand.New(rand.NewPCG(85, 86))
	for _, k := range Available() {
		for _, n := range []int{16, 128, 20} {
			for _, rows := range []int{1, 3, 4, 5, 8, 9, 128} {
				R, q, kk, v := make([]float32, rows*n), make([]float32, n), make([]float32, n), make([]float32, rows)
				for i := range R {
					R[i] = float32(r.NormFloat64() * 0.3)
				}
				for i := range q {
					q[i], kk[i] = float32(r.NormFloat64()*0.1), float32(r.NormFloat64()*0.1)
				}
				for i := range v {
					v[i] = float32(r.NormFloat64())
				}
				beta, decay := float32(0.6), float32(0.93)
				want, wo := make([]float32, rows*n), make([]float32, rows)
				for e := 0; e < rows; e++ {
					wo[e] = k.DeltaRow(want[e*n:(e+1)*n], R[e*n:(e+1)*n], q, kk, v[e], beta, decay)
				}
				got, o := make([]float32, rows*n), make([]float32, rows)
				k.DeltaRows(got, R, q, kk, v, o, beta, decay)
				in, o2 := append([]float32(nil), R...), make([]float32, rows)
				k.DeltaRows(in, in, q, kk, v, o2, beta, decay)
				for e := range wo {
					if !sameBits(o[e], wo[e]) || !sameBits(o2[e], wo[e]) {
						t.Fatalf("%s n=%d rows=%d: o[%d] %v, in place %v, DeltaRow %v", k.Name, n, rows, e, o[e], o2[e], wo[e])
					}
				}
				for i := range want {
					if !sameBits(got[i], want[i]) || !sameBits(in[i], want[i]) {
						t.Fatalf("%s n=%d rows=%d: S[%d] %v, in place %v, DeltaRow %v", k.Name, n, rows, i, got[i], in[i], want[i])
					}
				}
			}
		}
	}
}

// TestSSMStep: every set's SSMStep (a Mamba-2 head's scan step) gives the
// generic bits, the state and the outputs, in place and out of place,
// with and without outputs, for odd and even row counts.
func TestSSMStep(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(83, 84))
	for _, k := range Available() {
		for _, sh := range [][2]int{{64, 128}, {3, 8}, {1, 16}, {2, 64}, {7, 24}} {
			rows, N := sh[0], sh[1]
			src, x, B, C := make([]float32, rows*N), make([]float32, rows), make([]float32, N), make([]float32, N)
			for i := range src {
				src[i] = float32(r.NormFloat64())
			}
			for i := range x {
				x[i] = float32(r.NormFloat64() * 3)
			}
			for i := range B {
				B[i], C[i] = float32(r.NormFloat64()), float32(r.NormFloat64())
			}
			dt, dA := float32(0.0371), float32(0.8813)
			want, wy := make([]float32, rows*N), make([]float32, rows)
			ssmStep(want, src, x, B, C, wy, dt, dA)
			wantD := make([]float32, rows*N)
			ssmStep(wantD, src, x, B, nil, nil, dt, dA)
			got, gy := make([]float32, rows*N), make([]float32, rows)
			k.SSMStep(got, src, x, B, C, gy, dt, dA)
			in, iy := append([]float32(nil), src...), make([]float32, rows)
			k.SSMStep(in, in, x, B, C, iy, dt, dA)
			gotD := make([]float32, rows*N)
			k.SSMStep(gotD, src, x, B, nil, nil, dt, dA)
			for i := range want {
				if !sameBits(got[i], want[i]) || !sameBits(in[i], want[i]) || !sameBits(gotD[i], wantD[i]) || !sameBits(wantD[i], want[i]) {
					t.Fatalf("%s %dx%d: state %d: %v in place %v without y %v/%v, generic %v", k.Name, rows, N, i, got[i], in[i], gotD[i], wantD[i], want[i])
				}
			}
			for p := range wy {
				if !sameBits(gy[p], wy[p]) || !sameBits(iy[p], wy[p]) {
					t.Fatalf("%s %dx%d: y[%d] %v in place %v, generic %v", k.Name, rows, N, p, gy[p], iy[p], wy[p])
				}
			}
		}
	}
}

// BenchmarkSSMStep: one Mamba-2 head's step (Granite 4.0-H's 64 rows of a
// 128-value state) in place, with outputs and without (a replay), per set.
func BenchmarkSSMStep(b *testing.B) {
	const rows, N = 64, 128
	S, x, B, C, y := make([]float32, rows*N), make([]float32, rows), make([]float32, N), make([]float32, N), make([]float32, rows)
	for i := range S {
		S[i] = float32(i%7) * 0.1
	}
	for i := range x {
		x[i] = 0.5 // the state stays away from subnormals
	}
	for i := range B {
		B[i], C[i] = 0.01*float32(i%5+1), 0.02*float32(i%3)
	}
	for _, k := range Available() {
		b.Run(k.Name+"/y", func(b *testing.B) {
			for b.Loop() {
				k.SSMStep(S, S, x, B, C, y, 0.05, 0.97)
			}
		})
		b.Run(k.Name+"/replay", func(b *testing.B) {
			for b.Loop() {
				k.SSMStep(S, S, x, B, nil, nil, 0.05, 0.97)
			}
		})
	}
}
