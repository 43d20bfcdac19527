//go:build amd64 && !purego

package neon

// dequantQ8_0AVX2 dequantizes nb >= 1 Q8_0 blocks (dequant_amd64.s).
//
//go:noescape
func dequantQ8_0AVX2(dst *float32, src *byte, nb int)

var dequantQ8_0avx2 = dequantAsm(dequantQ8_0AVX2)
