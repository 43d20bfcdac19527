//go:build amd64 && !purego

package neon

// The avx512vnni k-quant kernels (kquant_vnni_amd64.s) compute the same
// int32 lanes and float steps as the avx2 ones, so their results are
// bit-identical to the avx2 set's (kquant_vnni_amd64_test.go checks it);
// they keep the super-block unpacked in Y16..Y31 and fuse the scale
// multiply with the accumulation (VPDPWSSD). The wrappers are the avx2
// ones' (blockDot checks every length and splits n into groups of maxCols).

//go:noescape
func dotQ4_KQ8_KVNNI(out *float32, w, a *byte, aStride, nb, n int)

//go:noescape
func dotQ6_KQ8_KVNNI(out *float32, w, a *byte, aStride, nb, n int)

func dotQ4_KQ8_Kvnni(out []float32, w, a []byte, aStride, nb, n int) {
	blockDot(dotQ4_KQ8_KVNNI, dotQ4_KQ8_KVNNI, out, w, a, aStride, nb, n, sizeQ4_K, sizeQ8_K)
}

func dotQ6_KQ8_Kvnni(out []float32, w, a []byte, aStride, nb, n int) {
	blockDot(dotQ6_KQ8_KVNNI, dotQ6_KQ8_KVNNI, out, w, a, aStride, nb, n, sizeQ6_K, sizeQ8_K)
}

// vnniKQuants installs the avx512vnni set's k-quant kernels.
func vnniKQuants(k *Kernels) {
	k.DotQ4_KQ8_K = dotQ4_KQ8_Kvnni
	k.DotQ6_KQ8_K = dotQ6_KQ8_Kvnni
}
