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

// maxScoreBlocks is the most blocks per key the ScoresQ8_0 kernels take
// (head sizes up to 512; larger ones go through the one-key dots).
const maxScoreBlocks = 16

// scoresGroups checks ScoresQ8_0's arguments (a bad count or a short
// buffer panics like an index out of range) and returns how many groups
// of group keys an assembly kernel scores: none when there is nothing to
// do or nb is not in 1..maxScoreBlocks.
func scoresGroups(sc []float32, k []byte, kStride int, q []byte, qStride, nb, nk, nq, group int) int {
	if nk < 0 || nk > AttnBlock || nq < 0 || nb < 0 || kStride < 0 || qStride < 0 {
		panic("neon: ScoresQ8_0 takes 0..AttnBlock keys and no negative counts or strides")
	}
	if nk == 0 || nq == 0 {
		return 0
	}
	_, _, _ = sc[(nq-1)*AttnBlock+nk-1], k[(nk-1)*kStride+nb*sizeQ8_0-1], q[(nq-1)*qStride+nb*sizeQ8_0-1]
	if nb < 1 || nb > maxScoreBlocks {
		return 0
	}
	return nk / group
}

// scoresTail scores keys [from, nk) with the set's one-key dot (the keys
// past an assembly kernel's last whole group).
func scoresTail(dot DotFunc, sc []float32, k []byte, kStride int, q []byte, qStride, nb, from, nk, nq int, scale float32) {
	for t := from; t < nk; t++ {
		for r := range nq {
			o := sc[r*AttnBlock+t : r*AttnBlock+t+1]
			dot(o, k[t*kStride:], q[r*qStride:], 0, nb, 1)
			o[0] *= scale
		}
	}
}
