// Package ggml defines ggml's formats once, for neon's kernels and quant's
// codecs: the block layouts and their sizes (ggml-common.h), the
// half-precision and bfloat16 conversions, the unpacking of the k-quants'
// packed scales and ggml's rounding helper. It imports only the standard
// library, so that both neon and quant (which imports neon) can use it.
package ggml

import "encoding/binary"

// Block layouts, little-endian, in bytes:
//
//	Q4_0  {d f16; qs[16]}                                   18
//	Q4_1  {d, m f16; qs[16]}                                20
//	Q5_0  {d f16; qh[4]; qs[16]}                            22
//	Q5_1  {d, m f16; qh[4]; qs[16]}                         24
//	Q8_0  {d f16; qs[32] int8}                              34
//	Q8_1  {d, s f16; qs[32] int8}                           36
//	Q2_K  {scales[16]; qs[64]; d, dmin f16}                 84
//	Q3_K  {hmask[32]; qs[64]; scales[12]; d f16}           110
//	Q4_K  {d, dmin f16; scales[12]; qs[128]}               144
//	Q5_K  {d, dmin f16; scales[12]; qh[32]; qs[128]}       176
//	Q6_K  {ql[128]; qh[64]; scales[16] int8; d f16}        210
//	Q8_K  {d f32; qs[256] int8; bsums[16] int16}           292
//
// The legacy types hold QK values per block, the k-quants QK_K.
const (
	QK   = 32
	QK_K = 256

	SizeQ4_0 = 2 + QK/2
	SizeQ4_1 = 2 + 2 + QK/2
	SizeQ5_0 = 2 + 4 + QK/2
	SizeQ5_1 = 2 + 2 + 4 + QK/2
	SizeQ8_0 = 2 + QK
	SizeQ8_1 = 2 + 2 + QK
	SizeQ2_K = QK_K/16 + QK_K/4 + 2 + 2
	SizeQ3_K = QK_K/8 + QK_K/4 + 12 + 2
	SizeQ4_K = 2 + 2 + 12 + QK_K/2
	SizeQ5_K = 2 + 2 + 12 + QK_K/8 + QK_K/2
	SizeQ6_K = QK_K/2 + QK_K/4 + QK_K/16 + 2
	SizeQ8_K = 4 + QK_K + QK_K/16*2
)

// The sizes ggml's static_asserts check (ggml-common.h).
var _ = [1]struct{}{}[SizeQ4_0+SizeQ4_1+SizeQ5_0+SizeQ5_1+SizeQ8_0+SizeQ8_1-(18+20+22+24+34+36)]
var _ = [1]struct{}{}[SizeQ2_K+SizeQ3_K+SizeQ4_K+SizeQ5_K+SizeQ6_K+SizeQ8_K-(84+110+144+176+210+292)]

// ScaleMinK4 returns the j-th (0..7) 6-bit scale and min of a Q4_K or Q5_K
// block from its 12 scale bytes q (ggml's get_scale_min_k4).
func ScaleMinK4(j int, q []byte) (sc, m byte) {
	if j < 4 {
		return q[j] & 63, q[j+4] & 63
	}
	return q[j+4]&0xf | (q[j-4]>>6)<<4, q[j+4]>>4 | (q[j]>>6)<<4
}

// Q3KScales unpacks Q3_K's twelve bytes of 6-bit scales into 16 values,
// already minus 32.
func Q3KScales(s []byte, out *[16]int8) {
	const kmask1, kmask2 = 0x03030303, 0x0f0f0f0f
	a0 := binary.LittleEndian.Uint32(s[0:])
	a1 := binary.LittleEndian.Uint32(s[4:])
	tmp := binary.LittleEndian.Uint32(s[8:])
	var aux [4]uint32
	aux[2] = (a0>>4)&kmask2 | ((tmp>>4)&kmask1)<<4
	aux[3] = (a1>>4)&kmask2 | ((tmp>>6)&kmask1)<<4
	aux[0] = a0&kmask2 | ((tmp>>0)&kmask1)<<4
	aux[1] = a1&kmask2 | ((tmp>>2)&kmask1)<<4
	for i := 0; i < 16; i++ {
		out[i] = int8(aux[i/4]>>(8*uint(i%4))) - 32
	}
}
