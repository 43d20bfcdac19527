//go:build amd64 && !purego

package neon

// The AVX-512 VNNI row-group kernels (rows_vnni_amd64.s): the AVX2 scheme
// with VPDPBUSD doing the integer work, bit-identical to the generic
// one-row dots. The wrappers check every length (rowsDot), so the assembly
// never reads or writes outside the slices.

//go:noescape
func rowsQ4_0Q8_0VNNI(out *float32, ldo int, w *byte, wStride int, a *byte, aStride, nb, n int)

//go:noescape
func rowsQ5_0Q8_0VNNI(out *float32, ldo int, w *byte, wStride int, a *byte, aStride, nb, n int)

//go:noescape
func rowsQ8_0Q8_0VNNI(out *float32, ldo int, w *byte, wStride int, a *byte, aStride, nb, n int)

func rowsQ4_0Q8_0vnni(out []float32, ldo int, w []byte, wStride int, a []byte, aStride, nb, n int) {
	rowsDot(rowsQ4_0Q8_0VNNI, out, ldo, w, wStride, a, aStride, nb, n, sizeQ4_0)
}

func rowsQ5_0Q8_0vnni(out []float32, ldo int, w []byte, wStride int, a []byte, aStride, nb, n int) {
	rowsDot(rowsQ5_0Q8_0VNNI, out, ldo, w, wStride, a, aStride, nb, n, sizeQ5_0)
}

func rowsQ8_0Q8_0vnni(out []float32, ldo int, w []byte, wStride int, a []byte, aStride, nb, n int) {
	rowsDot(rowsQ8_0Q8_0VNNI, out, ldo, w, wStride, a, aStride, nb, n, sizeQ8_0)
}

// vnniRows installs the avx512vnni set's row-group kernels.
func vnniRows(k *Kernels) {
	k.RowsQ4_0Q8_0 = rowsQ4_0Q8_0vnni
	k.RowsQ5_0Q8_0 = rowsQ5_0Q8_0vnni
	k.RowsQ8_0Q8_0 = rowsQ8_0Q8_0vnni
}
