//go:build amd64 && !purego

package neon

import "golang.org/x/sys/cpu"

// The avx512vnni k-quant kernels (kquant_vnni_amd64.s) compute the same
// int32 lanes and float steps as the avx2 ones, so their results are
// bit-identical to the avx2 set's (kquant_vnni_amd64_test.go checks it).
// They keep the unpacked super-block in registers (Y16..Y31) and fuse the
// scale multiply with the accumulation (VPDPWSSD). The ...Z variants run
// the integer work on 512-bit registers, two sub-blocks per instruction;
// they are used where 512-bit multiplies do not lower the clock much
// (taken as: AVX-512 VBMI2 present, i.e. Ice Lake and later, Zen 4 and
// later; not Cascade Lake). The wrappers are the avx2 ones' (blockDot
// checks every length and splits n into groups of maxCols).

//go:noescape
func dotQ4_KQ8_KVNNI(out *float32, w, a *byte, aStride, nb, n int)

//go:noescape
func dotQ6_KQ8_KVNNI(out *float32, w, a *byte, aStride, nb, n int)

//go:noescape
func dotQ4_KQ8_KVNNIZ(out *float32, w, a *byte, aStride, nb, n int)

//go:noescape
func dotQ6_KQ8_KVNNIZ(out *float32, w, a *byte, aStride, nb, n int)

func dotQ4_KQ8_Kvnni(out []float32, w, a []byte, aStride, nb, n int) {
	blockDot(dotQ4_KQ8_KVNNI, dotQ4_KQ8_KVNNI, out, w, a, aStride, nb, n, sizeQ4_K, sizeQ8_K)
}

func dotQ6_KQ8_Kvnni(out []float32, w, a []byte, aStride, nb, n int) {
	blockDot(dotQ6_KQ8_KVNNI, dotQ6_KQ8_KVNNI, out, w, a, aStride, nb, n, sizeQ6_K, sizeQ8_K)
}

func dotQ4_KQ8_Kvnniz(out []float32, w, a []byte, aStride, nb, n int) {
	blockDot(dotQ4_KQ8_KVNNIZ, dotQ4_KQ8_KVNNIZ, out, w, a, aStride, nb, n, sizeQ4_K, sizeQ8_K)
}

func dotQ6_KQ8_Kvnniz(out []float32, w, a []byte, aStride, nb, n int) {
	blockDot(dotQ6_KQ8_KVNNIZ, dotQ6_KQ8_KVNNIZ, out, w, a, aStride, nb, n, sizeQ6_K, sizeQ8_K)
}

// vnniZMM reports whether the 512-bit variants run here.
var vnniZMM = cpu.X86.HasAVX512VBMI2

// vnniKQuants installs the avx512vnni set's k-quant kernels.
func vnniKQuants(k *Kernels) {
	k.DotQ4_KQ8_K, k.DotQ6_KQ8_K = dotQ4_KQ8_Kvnni, dotQ6_KQ8_Kvnni
	if vnniZMM {
		k.DotQ4_KQ8_K, k.DotQ6_KQ8_K = dotQ4_KQ8_Kvnniz, dotQ6_KQ8_Kvnniz
	}
}
