//go:build amd64 && !purego

#include "textflag.h"

// func dequantQ8_0AVX2(dst *float32, src *byte, nb int)
//
// dst[32*b+j] = d*float32(int8(q[j])) for the nb >= 1 blocks of src: the
// scale d from fp16Table (ggml.FP16ToFP32's bits for every half), the
// quants sign-extended and converted exactly, one rounded product each.
TEXT ·dequantQ8_0AVX2(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ nb+16(FP), CX
	MOVQ ·fp16Table(SB), R8

	PCALIGN $16
loop:
	MOVWLZX      (SI), AX
	VBROADCASTSS (R8)(AX*4), Y0
	VPMOVSXBD    2(SI), Y1
	VPMOVSXBD    10(SI), Y2
	VPMOVSXBD    18(SI), Y3
	VPMOVSXBD    26(SI), Y4
	VCVTDQ2PS    Y1, Y1
	VCVTDQ2PS    Y2, Y2
	VCVTDQ2PS    Y3, Y3
	VCVTDQ2PS    Y4, Y4
	VMULPS       Y0, Y1, Y1
	VMULPS       Y0, Y2, Y2
	VMULPS       Y0, Y3, Y3
	VMULPS       Y0, Y4, Y4
	VMOVUPS      Y1, (DI)
	VMOVUPS      Y2, 32(DI)
	VMOVUPS      Y3, 64(DI)
	VMOVUPS      Y4, 96(DI)
	ADDQ         $34, SI
	ADDQ         $128, DI
	DECQ         CX
	JNZ          loop
	VZEROUPPER
	RET
