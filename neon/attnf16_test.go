package neon

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/geisten/geist/neon/ggml"
)

// TestRoundH: the reference's half rounding agrees with FP32ToFP16 on
// float32 values (normal, subnormal, ties, overflow).
func TestRoundH(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(81, 82))
	xs := []float32{0, 1, -1, 65504, 65519.99, 65520, -65520, 1e-8, 2.98e-8, 2.9802322e-8, 5.96e-8, 6.1e-5, 1 + 1.0/2048, 1 + 3.0/2048}
	for range 100000 {
		xs = append(xs, float32(r.NormFloat64()*math.Pow(2, float64(r.IntN(44)-28))))
	}
	for _, x := range xs {
		want := halfF64(ggml.FP32ToFP16(x))
		if got := roundH(float64(x)); got != want && !(math.IsInf(got, 0) && math.IsInf(want, 0) && math.Signbit(got) == math.Signbit(want)) {
			t.Fatalf("roundH(%g) = %g, FP32ToFP16 %g", x, got, want)
		}
	}
	// a product exactly halfway between two halves, and a sum pushed off
	// the halfway point by a term far below float64's step of it
	h := 1 + 1.0/1024
	if got := fmaH(h, 1+1.0/2048, 0); got != roundH(h*(1+1.0/2048)) {
		t.Fatalf("fmaH tie: %v", got)
	}
	mid := 1 + 1.0/2048 // halfway between 1 and 1+2^-10
	if got := fmaH(mid, 1, 0x1p-24); got != 1+1.0/1024 {
		t.Fatalf("fmaH(mid, 1, 2^-24) = %v, want the upper half", got)
	}
	if got := fmaH(mid, 1, -0x1p-24); got != 1 {
		t.Fatalf("fmaH(mid, 1, -2^-24) = %v, want 1", got)
	}
}

// randHalves returns n halves of normal values times s, with subnormals,
// signed zeros and large values here and there.
func randHalves(r *rand.Rand, n int, s float64) []uint16 {
	h := make([]uint16, n)
	for i := range h {
		h[i] = ggml.FP32ToFP16(float32(r.NormFloat64() * s))
	}
	for i, x := range []uint16{0x0001, 0x83ff, 0x8000, 0x0000, 0x0400, 0x5bff, 0xd800} {
		if n > 0 {
			h[(i*37+5)%n] = x
		}
	}
	return h
}

// TestAttnHMatchesGeneric: the sets with half-precision attention kernels
// give the reference's bits (under qemu as a Cortex-A76 on amd64 hosts).
func TestAttnHMatchesGeneric(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(83, 84))
	g := GenericAttnTile()
	tested := false
	for _, k := range Available() {
		a := k.AttnTile
		if a == nil || a.KTH == nil {
			continue
		}
		tested = true
		for _, hd := range []int{8, 24, 64, 72, 128, 256} {
			kc := randHalves(r, AttnBlock*hd, 1)
			kt, want := make([]uint16, AttnBlock*hd+1), make([]uint16, AttnBlock*hd)
			kt[len(kt)-1] = 0x7777
			a.KTH(kt[:AttnBlock*hd], kc, hd)
			g.KTH(want, kc, hd)
			if kt[len(kt)-1] != 0x7777 {
				t.Fatalf("%s hd=%d: KTH wrote past its block", k.Name, hd)
			}
			for i := range want {
				if kt[i] != want[i] {
					t.Fatalf("%s hd=%d: KTH %d %#x, generic %#x", k.Name, hd, i, kt[i], want[i])
				}
			}
			for _, rows := range []int{1, 3} {
				q := make([]uint16, rows*hd)
				QH(q, randFloats(r, rows*hd), 0.7)
				sc, scw := make([]float32, rows*AttnBlock+1), make([]float32, rows*AttnBlock)
				sc[rows*AttnBlock] = guard
				a.ScoresRowsH(sc[:rows*AttnBlock], q, hd, want)
				g.ScoresRowsH(scw, q, hd, want)
				if sc[rows*AttnBlock] != guard {
					t.Fatalf("%s hd=%d: ScoresRowsH wrote past its rows", k.Name, hd)
				}
				for i := range scw {
					if !sameBits(sc[i], scw[i]) {
						t.Fatalf("%s hd=%d rows=%d: score %d %v, generic %v", k.Name, hd, rows, i, sc[i], scw[i])
					}
				}
			}
			if hd%64 != 0 {
				continue
			}
			for _, n := range []int{1, 5, 16, 17, 33, 64} {
				for _, rows := range []int{1, 4} {
					v := randHalves(r, n*hd, 3)
					w := make([]float32, rows*AttnBlock)
					for i := range w {
						w[i] = float32(r.Float64())
					}
					w[0] = 1e-9 // below the smallest half
					out := randFloats(r, rows*hd+1)
					out[rows*hd] = guard
					ref := append([]float32(nil), out[:rows*hd]...)
					a.SumRowsH(out[:rows*hd], hd, w, n, v)
					g.SumRowsH(ref, hd, w, n, v)
					if out[rows*hd] != guard {
						t.Fatalf("%s hd=%d: SumRowsH wrote past its rows", k.Name, hd)
					}
					for i := range ref {
						if !sameBits(out[i], ref[i]) {
							t.Fatalf("%s hd=%d n=%d rows=%d: out %d %v, generic %v", k.Name, hd, n, rows, i, out[i], ref[i])
						}
					}
				}
			}
		}
	}
	if !tested {
		t.Skip("no kernel set with half-precision attention on this CPU")
	}
}
