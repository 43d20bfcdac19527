package neon

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/geisten/geist/neon/ggml"
)

// TestAttnTileMatchesGeneric: every set's tiled attention kernels give the
// reference bits, for the head sizes of the models (and a few more), any
// number of value rows.
func TestAttnTileMatchesGeneric(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(61, 62))
	g := GenericAttnTile()
	for _, k := range Available() {
		a := k.AttnTile
		if a == nil {
			continue
		}
		for _, hd := range []int{8, 64, 72, 128, 256} {
			kc := make([]uint16, AttnBlock*hd)
			for i := range kc {
				kc[i] = ggml.FP32ToFP16(float32(r.NormFloat64()))
			}
			// subnormal halves and signed zeros convert exactly too
			for i, h := range []uint16{0x0001, 0x83ff, 0x8000, 0x0000, 0x0400, 0xfbff} {
				kc[(i*37)%len(kc)] = h
			}
			kt, want := make([]float32, AttnBlock*hd+1), make([]float32, AttnBlock*hd)
			kt[len(kt)-1] = guard
			a.KT(kt[:AttnBlock*hd], kc, hd)
			g.KT(want, kc, hd)
			if kt[len(kt)-1] != guard {
				t.Fatalf("%s hd=%d: KT wrote past its block", k.Name, hd)
			}
			for i := range want {
				if !sameBits(kt[i], want[i]) {
					t.Fatalf("%s hd=%d: kt[%d] %v, generic %v", k.Name, hd, i, kt[i], want[i])
				}
			}
			q := randFloats(r, hd)
			sc, scw := make([]float32, AttnBlock+1), make([]float32, AttnBlock)
			sc[AttnBlock] = guard
			a.Scores(sc[:AttnBlock], q, kt, 0.125)
			g.Scores(scw, q, want, 0.125)
			for i := range scw {
				if !sameBits(sc[i], scw[i]) {
					t.Fatalf("%s hd=%d: score %d %v, generic %v", k.Name, hd, i, sc[i], scw[i])
				}
			}
			if sc[AttnBlock] != guard {
				t.Fatalf("%s hd=%d: Scores wrote past its block", k.Name, hd)
			}
			f := make([]float32, len(kc)+3)
			f[len(kc)+2] = guard
			a.ToF32(f[:len(kc)+2], append(kc, 0x3c00, 0xbc00))
			g.ToF32(want, kc)
			for i := range want {
				if !sameBits(f[i], want[i]) {
					t.Fatalf("%s hd=%d: ToF32 %d %v, generic %v", k.Name, hd, i, f[i], want[i])
				}
			}
			if f[len(kc)] != 1 || f[len(kc)+1] != -1 || f[len(kc)+2] != guard {
				t.Fatalf("%s hd=%d: ToF32 tail %v", k.Name, hd, f[len(kc):])
			}
			for _, n := range []int{1, 7, 8, 9, 17, 64} {
				if m, w := a.Max(scw[:n]), g.Max(scw[:n]); !sameBits(m, w) {
					t.Fatalf("%s: Max of %d %v, generic %v", k.Name, n, m, w)
				}
			}
			if hd%64 != 0 {
				continue
			}
			for _, rows := range []int{0, 1, 5, 64} {
				w := randFloats(r, rows)
				out := randFloats(r, hd+1)
				out[hd] = guard
				ref := append([]float32{}, out[:hd]...)
				a.Sum(out[:hd], w, want[:rows*hd])
				g.Sum(ref, w, want[:rows*hd])
				for i := range ref {
					if !sameBits(out[i], ref[i]) {
						t.Fatalf("%s hd=%d rows=%d: sum %d %v, generic %v", k.Name, hd, rows, i, out[i], ref[i])
					}
				}
				if out[hd] != guard {
					t.Fatalf("%s hd=%d rows=%d: Sum wrote past its output", k.Name, hd, rows)
				}
			}
		}
	}
}

// TestAttnTileRowsMatchGeneric: a set's kernels for several rows at once
// give each row the bits of the reference's one-row kernels, whatever the
// number of rows (so a row's result does not depend on how many rows share
// a tile), and ExpSum the reference's exponentials and sum.
func TestAttnTileRowsMatchGeneric(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(63, 64))
	g := GenericAttnTile()
	sets := []*AttnTileKernels{g}
	names := []string{"reference"}
	for _, k := range Available() {
		if k.AttnTile != nil {
			sets, names = append(sets, k.AttnTile), append(names, k.Name)
		}
	}
	for si, a := range sets {
		name := names[si]
		for _, hd := range []int{64, 72, 128} {
			kt := randFloats(r, AttnBlock*hd)
			for nr := 1; nr <= 9; nr++ {
				q := randFloats(r, nr*hd)
				sc := make([]float32, nr*AttnBlock+1)
				sc[nr*AttnBlock] = guard
				a.ScoresRows(sc[:nr*AttnBlock], q, hd, kt, 0.125)
				want := make([]float32, AttnBlock)
				for row := range nr {
					g.Scores(want, q[row*hd:(row+1)*hd], kt, 0.125)
					for i := range want {
						if !sameBits(sc[row*AttnBlock+i], want[i]) {
							t.Fatalf("%s hd=%d rows=%d: row %d score %d %v, reference %v", name, hd, nr, row, i, sc[row*AttnBlock+i], want[i])
						}
					}
				}
				if sc[nr*AttnBlock] != guard {
					t.Fatalf("%s hd=%d rows=%d: ScoresRows wrote past its rows", name, hd, nr)
				}
				if hd%64 != 0 {
					continue
				}
				for _, n := range []int{0, 1, 5, 64} {
					w := randFloats(r, nr*AttnBlock)
					v := kt[:n*hd]
					sumMatches(t, r, fmt.Sprintf("%s hd=%d rows=%d n=%d: SumRows", name, hd, nr, n), nr, hd, w, v,
						func(out []float32) { a.SumRows(out, hd, w, n, v) })
					if a.SumRowsQ8_0 != nil {
						// Over Q8_0 value rows (a stride past the blocks):
						// the bits of DequantQ8_0 then Sum.
						stride := hd/32*sizeQ8_0 + 6
						vq := make([]byte, n*stride+1)
						for i := range vq {
							vq[i] = byte(r.Uint32())
						}
						vfq := make([]float32, n*hd)
						for t := range n {
							for c := 0; c < hd/32; c++ {
								vq[t*stride+c*sizeQ8_0+1] &= 0x3f // a finite, moderate scale
								dequantQ8_0(vfq[t*hd+c*32:t*hd+c*32+32], vq[t*stride+c*sizeQ8_0:])
							}
						}
						sumMatches(t, r, fmt.Sprintf("%s hd=%d rows=%d n=%d: SumRowsQ8_0", name, hd, nr, n), nr, hd, w, vfq,
							func(out []float32) { a.SumRowsQ8_0(out, hd, w, n, vq, stride) })
					}
					if a.SumRowsF16 == nil {
						continue
					}
					// Over F16 values (any bits but NaN and infinity:
					// subnormals and signed zeros too): the bits of Sum
					// over the converted values.
					v16 := make([]uint16, n*hd)
					for i := range v16 {
						for v16[i] = uint16(r.Uint32()); v16[i]&0x7c00 == 0x7c00; v16[i] = uint16(r.Uint32()) {
						}
					}
					vf := make([]float32, n*hd)
					g.ToF32(vf, v16)
					sumMatches(t, r, fmt.Sprintf("%s hd=%d rows=%d n=%d: SumRowsF16", name, hd, nr, n), nr, hd, w, vf,
						func(out []float32) { a.SumRowsF16(out, hd, w, n, v16) })
				}
			}
		}
		for n := 0; n <= 64; n++ {
			x := randFloats(r, n)
			for i := range x {
				x[i] *= 40 // exponentials that underflow too
			}
			m := float32(0)
			if n > 0 {
				m = g.Max(x)
			}
			want := append([]float32{}, x...)
			ws := expSum(want, m)
			got := a.ExpSum(x, m)
			if got != ws {
				t.Fatalf("%s n=%d: ExpSum %v, reference %v", name, n, got, ws)
			}
			for i := range want {
				if !sameBits(x[i], want[i]) {
					t.Fatalf("%s n=%d: exp %d %v, reference %v", name, n, i, x[i], want[i])
				}
			}
		}
	}
}

// sumMatches runs sum over random outputs of nr rows of hd (a guard value
// past them) and checks that each row has the bits of the reference's Sum
// with its weights from w (AttnBlock apart) over the float32 values v,
// and that nothing past the rows was written.
func sumMatches(t *testing.T, r *rand.Rand, what string, nr, hd int, w, v []float32, sum func(out []float32)) {
	t.Helper()
	n := len(v) / hd
	out := randFloats(r, nr*hd+1)
	out[nr*hd] = guard
	ref := append([]float32{}, out[:nr*hd]...)
	sum(out[:nr*hd])
	for row := range nr {
		GenericAttnTile().Sum(ref[row*hd:(row+1)*hd], w[row*AttnBlock:row*AttnBlock+n], v)
	}
	for i := range ref {
		if !sameBits(out[i], ref[i]) {
			t.Fatalf("%s: output %d %v, reference %v", what, i, out[i], ref[i])
		}
	}
	if out[nr*hd] != guard {
		t.Fatalf("%s wrote past its rows", what)
	}
}

// BenchmarkAttnTileExpSum: one row's online-softmax step over a block of
// 64 scores (the exponentials relative to the block maximum and their
// float64 sum), per set with tile kernels.
func BenchmarkAttnTileExpSum(b *testing.B) {
	r := rand.New(rand.NewPCG(45, 46))
	src := randFloats(r, AttnBlock)
	for i := range src {
		src[i] *= 8
	}
	x := make([]float32, AttnBlock)
	for _, k := range Available() {
		a := k.AttnTile
		if a == nil {
			continue
		}
		m := a.Max(src)
		b.Run(k.Name, func(b *testing.B) {
			for b.Loop() {
				copy(x, src)
				a.ExpSum(x, m)
			}
		})
	}
}
