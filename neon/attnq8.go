package neon

import "github.com/geisten/geist/neon/ggml"

// dequantQ8_0 is the reference of Kernels.DequantQ8_0: dst[32*b+j] =
// d*float32(int8(q[j])) for block b of src, d its scale converted from
// half precision (ggml.FP16ToFP32), one rounded product per value.
func dequantQ8_0(dst []float32, src []byte) {
	if len(dst)%32 != 0 {
		panic("neon: DequantQ8_0 needs a multiple of 32 values")
	}
	nb := len(dst) / 32
	src = src[:nb*sizeQ8_0]
	for b := range nb {
		blk := src[b*sizeQ8_0 : (b+1)*sizeQ8_0]
		d := ggml.FP16ToFP32(uint16(blk[0]) | uint16(blk[1])<<8)
		o := dst[b*32 : b*32+32]
		for j, q := range blk[2:sizeQ8_0] {
			o[j] = d * float32(int8(q))
		}
	}
}

// scoresQ8_0 is the reference of Kernels.ScoresQ8_0: the generic one-key
// dot of every key with every query row, times scale.
func scoresQ8_0(sc []float32, k []byte, kStride int, q []byte, qStride, nb, nk, nq int, scale float32) {
	if nk < 0 || nk > AttnBlock || nq < 0 {
		panic("neon: ScoresQ8_0 takes 0..AttnBlock keys and no negative row count")
	}
	for r := range nq {
		qr := q[r*qStride:]
		s := sc[r*AttnBlock : r*AttnBlock+nk]
		for t := range s {
			s[t] = dotQ8_0Q8_0(k[t*kStride:], qr, nb) * scale
		}
	}
}
