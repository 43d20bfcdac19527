//go:build amd64 && !purego

package neon

import "math"

// The AVX2 row-group kernels (rows_amd64.s): RowGroup weight rows × n
// activation columns per call, bit-identical to the generic one-row dots.
// The wrappers check every length, so the assembly never reads or writes
// outside the slices.

//go:noescape
func rowsQ4_0Q8_0AVX2(out *float32, ldo int, w *byte, wStride int, a *byte, aStride, nb, n int)

//go:noescape
func rowsQ5_0Q8_0AVX2(out *float32, ldo int, w *byte, wStride int, a *byte, aStride, nb, n int)

//go:noescape
func rowsQ8_0Q8_0AVX2(out *float32, ldo int, w *byte, wStride int, a *byte, aStride, nb, n int)

//go:noescape
func rowsQ8_0Q8_0x1AVX2(out *float32, ldo int, w *byte, wStride int, a *byte, aStride, nb, n int)

type asmRows func(out *float32, ldo int, w *byte, wStride int, a *byte, aStride, nb, n int)

// spans reports whether buf holds cnt items of size bytes, stride bytes
// apart (the last one only size bytes), without overflow.
func spans(buf, cnt, stride, size int) bool {
	if cnt == 1 {
		return buf >= size
	}
	return stride >= 0 && buf >= size && (buf-size)/(cnt-1) >= stride
}

// rowsDot checks the arguments of a RowsFunc and runs the kernel k. It
// panics with errShort (a caller bug, like an index out of range) unless
// out holds n groups of RowGroup floats ldo apart, w RowGroup rows of nb
// blocks of wSize bytes wStride apart and a n columns of nb Q8_0 blocks
// aStride apart; the last row and column need only their nb blocks. Rows
// and columns may overlap; output groups may not (ldo >= RowGroup when
// n > 1). nb == 0 zeroes the outputs.
func rowsDot(k asmRows, out []float32, ldo int, w []byte, wStride int, a []byte, aStride, nb, n, wSize int) {
	if n < 1 || nb < 0 || nb > math.MaxInt/sizeQ8_0 || (n > 1 && ldo < RowGroup) ||
		!spans(len(out), n, ldo, RowGroup) || !spans(len(w), RowGroup, wStride, nb*wSize) ||
		!spans(len(a), n, aStride, nb*sizeQ8_0) {
		panic(errShort)
	}
	if nb == 0 {
		for j := 0; j < n; j++ {
			clear(out[j*ldo : j*ldo+RowGroup])
		}
		return
	}
	k(&out[0], ldo, &w[0], wStride, &a[0], aStride, nb, n)
}

func rowsQ4_0Q8_0avx2(out []float32, ldo int, w []byte, wStride int, a []byte, aStride, nb, n int) {
	rowsDot(rowsQ4_0Q8_0AVX2, out, ldo, w, wStride, a, aStride, nb, n, sizeQ4_0)
}

func rowsQ5_0Q8_0avx2(out []float32, ldo int, w []byte, wStride int, a []byte, aStride, nb, n int) {
	rowsDot(rowsQ5_0Q8_0AVX2, out, ldo, w, wStride, a, aStride, nb, n, sizeQ5_0)
}

func rowsQ8_0Q8_0avx2(out []float32, ldo int, w []byte, wStride int, a []byte, aStride, nb, n int) {
	k := rowsQ8_0Q8_0AVX2
	if n == 1 {
		k = rowsQ8_0Q8_0x1AVX2
	}
	rowsDot(k, out, ldo, w, wStride, a, aStride, nb, n, sizeQ8_0)
}
