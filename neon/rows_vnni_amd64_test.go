//go:build amd64 && !purego

package neon

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

func rowsVNNINeed(t testing.TB) *Kernels {
	t.Helper()
	needRows(t)
	k := byName("avx512vnni")
	if k == nil {
		t.Skip("avx512vnni: this CPU lacks AVX-512 VNNI, VL or BW (or AVX2)")
	}
	return k
}

// TestRowsVNNIInstalled checks that the avx512vnni set has its own
// row-group kernels, not the avx2 ones.
func TestRowsVNNIInstalled(t *testing.T) {
	t.Parallel()
	k := rowsVNNINeed(t)
	for _, rt := range rowsTypes {
		f := rt.pick(k)
		if f == nil || fmt.Sprintf("%p", f) == fmt.Sprintf("%p", rt.pick(avxNeed(t))) {
			t.Errorf("%s: avx512vnni row-group kernel missing or the avx2 one", rt.dt.name)
		}
	}
}

// TestRowsVNNIExtremes runs the vnni row-group and tile kernels on
// constant quant bytes at the edges of the ranges, one to nine columns
// (see checkRowsExtremes).
func TestRowsVNNIExtremes(t *testing.T) {
	t.Parallel()
	k := rowsVNNINeed(t)
	for ti, rt := range rowsTypes {
		names, fs := rowsKernels(t, k, ti)
		for fi, f := range fs {
			checkRowsExtremes(t, names[fi], rt.dt, f, []int{1, 2, 3, 8, 9})
		}
	}
}

// TestRowsVNNIShort checks the vnni row-group and tile wrappers' length
// checks (checkRowsShort; a tile's Pack checks the activations).
func TestRowsVNNIShort(t *testing.T) {
	t.Parallel()
	k := rowsVNNINeed(t)
	for ti, rt := range rowsTypes {
		names, fs := rowsKernels(t, k, ti)
		for fi, f := range fs {
			checkRowsShort(t, names[fi], rt.dt, f, []int{1, 2, 4, 9})
		}
	}
}

// BenchmarkRowsVNNI measures the row-group kernels of the avx2 and the
// avx512vnni sets side by side: RowGroup rows × n columns per call, 64
// blocks (2048 values) per row, from the cache; the bytes are the weight
// bytes read.
func BenchmarkRowsVNNI(b *testing.B) {
	sets := []*Kernels{avxNeed(b), rowsVNNINeed(b)}
	const nb = 64
	for _, rt := range rowsTypes {
		dt := rt.dt
		r := rand.New(rand.NewPCG(12, 13))
		wStride := nb * dt.wsize
		w := make([]byte, 0, RowGroup*wStride)
		for row := 0; row < RowGroup; row++ {
			w = append(w, randWeights(r, dt, nb, 0)...)
		}
		for _, n := range []int{1, 2, 4, 8, 16, 64} {
			aStride := nb * dt.asize
			a := randActs(r, dt, nb, n, aStride, 0)
			out := make([]float32, n*RowGroup)
			for _, k := range sets {
				rows := rt.pick(k)
				b.Run(fmt.Sprintf("%s/n=%d/%s", dt.name, n, k.Name), func(b *testing.B) {
					b.SetBytes(int64(len(w)))
					for b.Loop() {
						rows(out, RowGroup, w, wStride, a, aStride, nb, n)
					}
				})
			}
			// The tile kernel, its activations packed once (as per matrix
			// product, for every row group).
			tl := rt.tile(sets[1])
			pack := make([]byte, TilePackSize*nb*n)
			tl.Pack(pack, a, aStride, nb, n)
			b.Run(fmt.Sprintf("%s/n=%d/avx512vnni-tile", dt.name, n), func(b *testing.B) {
				b.SetBytes(int64(len(w)))
				for b.Loop() {
					tl.Mul(out, RowGroup, w, wStride, pack, nb, n)
				}
			})
		}
	}
}

// BenchmarkRowsVNNIDRAM runs the Q4_0 row-group kernels over a matrix far
// larger than the caches (65536 rows × 2048 values, 72 MiB), row group by
// row group as MulRows does, n columns (compact outputs, ldo = RowGroup).
func BenchmarkRowsVNNIDRAM(b *testing.B) {
	sets := []*Kernels{avxNeed(b), rowsVNNINeed(b)}
	const nb, nrows = 64, 65536
	dt := rowsTypes[0].dt
	r := rand.New(rand.NewPCG(14, 15))
	rs := nb * dt.wsize
	w := make([]byte, 0, nrows*rs)
	for row := 0; row < 64; row++ {
		w = append(w, randWeights(r, dt, nb, 0)...)
	}
	for len(w) < nrows*rs {
		w = append(w, w[:min(len(w), nrows*rs-len(w))]...)
	}
	for _, n := range []int{1, 4, 8} {
		as := nb * dt.asize
		a := randActs(r, dt, nb, n, as, 0)
		out := make([]float32, n*RowGroup)
		for _, k := range sets {
			rows := rowsTypes[0].pick(k)
			b.Run(fmt.Sprintf("Q4_0/n=%d/%s", n, k.Name), func(b *testing.B) {
				b.SetBytes(int64(len(w)))
				for b.Loop() {
					for g := 0; g < nrows; g += RowGroup {
						rows(out, RowGroup, w[g*rs:], rs, a, as, nb, n)
					}
				}
			})
		}
	}
}
