//go:build (amd64 || arm64) && !purego

package neon

import "github.com/geisten/geist/neon/ggml"

// fp16Table is the conversion table, read by the assembly (integer loads
// convert the scales there: the same bits as ggml.FP16ToFP32 for every
// half, NaNs too, and qemu emulates arm64's FCVT slowly).
var fp16Table = ggml.FP16Table()

// dequantAsm wraps an assembly DequantQ8_0 kernel of nb >= 1 blocks with
// the length checks (a short buffer panics like an index out of range).
func dequantAsm(k func(dst *float32, src *byte, nb int)) func(dst []float32, src []byte) {
	return func(dst []float32, src []byte) {
		if len(dst)%32 != 0 {
			panic("neon: DequantQ8_0 needs a multiple of 32 values")
		}
		nb := len(dst) / 32
		if nb == 0 {
			return
		}
		_ = src[nb*sizeQ8_0-1]
		k(&dst[0], &src[0], nb)
	}
}
