//go:build amd64 && !purego

#include "textflag.h"

// AVX2 activation quantization. Both kernels compute exactly what the
// generic code does (ggml's reference quantizers), bit for bit: the same
// float32 divisions and products, roundf as trunc(v + copysign(0.49999997, v))
// (exact for |v| < 2^24) and nearest_int as VCVTPS2DQ (round half to even
// in the default MXCSR mode the Go runtime keeps).

DATA absMask<>+0(SB)/8, $0x7fffffff7fffffff
DATA absMask<>+8(SB)/8, $0x7fffffff7fffffff
DATA absMask<>+16(SB)/8, $0x7fffffff7fffffff
DATA absMask<>+24(SB)/8, $0x7fffffff7fffffff
GLOBL absMask<>(SB), RODATA|NOPTR, $32

// _mm256_packs order fix: dwords 0,4,1,5,2,6,3,7.
DATA packPerm<>+0(SB)/8, $0x0000000400000000
DATA packPerm<>+8(SB)/8, $0x0000000500000001
DATA packPerm<>+16(SB)/8, $0x0000000600000002
DATA packPerm<>+24(SB)/8, $0x0000000700000003
GLOBL packPerm<>(SB), RODATA|NOPTR, $32

DATA f127<>+0(SB)/4, $127.0
GLOBL f127<>(SB), RODATA|NOPTR, $4

DATA fm127<>+0(SB)/4, $-127.0
GLOBL fm127<>(SB), RODATA|NOPTR, $4

DATA f1<>+0(SB)/4, $1.0
GLOBL f1<>(SB), RODATA|NOPTR, $4

DATA halfDown<>+0(SB)/4, $0x3effffff
GLOBL halfDown<>(SB), RODATA|NOPTR, $4

DATA i127<>+0(SB)/4, $127
GLOBL i127<>(SB), RODATA|NOPTR, $4

DATA onesU8<>+0(SB)/8, $0x0101010101010101
DATA onesU8<>+8(SB)/8, $0x0101010101010101
DATA onesU8<>+16(SB)/8, $0x0101010101010101
DATA onesU8<>+24(SB)/8, $0x0101010101010101
GLOBL onesU8<>(SB), RODATA|NOPTR, $32

DATA ones16q<>+0(SB)/8, $0x0001000100010001
DATA ones16q<>+8(SB)/8, $0x0001000100010001
DATA ones16q<>+16(SB)/8, $0x0001000100010001
DATA ones16q<>+24(SB)/8, $0x0001000100010001
GLOBL ones16q<>(SB), RODATA|NOPTR, $32

// ROUNDF rounds the float32 lanes of v half away from zero and converts
// them to int32 (Y7 abs mask, Y4 0.49999997; clobbers Y9).
#define ROUNDF(v) \
	VANDNPS v, Y7, Y9; \
	VORPS   Y4, Y9, Y9; \
	VADDPS  Y9, v, v;   \
	VCVTTPS2DQ v, v

// func quantizeQ8_0AVX2(dst *byte, x *float32, nb int)
TEXT ·quantizeQ8_0AVX2(SB), NOSPLIT, $0-24
	MOVQ         dst+0(FP), DI
	MOVQ         x+8(FP), SI
	MOVQ         nb+16(FP), CX
	VMOVDQU      absMask<>(SB), Y7
	VBROADCASTSS f127<>(SB), Y6
	VBROADCASTSS f1<>(SB), Y5
	VBROADCASTSS halfDown<>(SB), Y4
	VMOVDQU      packPerm<>(SB), Y13
	VXORPS       Y11, Y11, Y11
	TESTQ        CX, CX
	JZ           q80done

	PCALIGN $16
q80loop:
	VMOVUPS 0(SI), Y0
	VMOVUPS 32(SI), Y1
	VMOVUPS 64(SI), Y2
	VMOVUPS 96(SI), Y3

	// amax over the block, then in every lane.
	VANDPS       Y7, Y0, Y8
	VANDPS       Y7, Y1, Y9
	VMAXPS       Y9, Y8, Y8
	VANDPS       Y7, Y2, Y9
	VMAXPS       Y9, Y8, Y8
	VANDPS       Y7, Y3, Y9
	VMAXPS       Y9, Y8, Y8
	VEXTRACTF128 $1, Y8, X9
	VMAXPS       X9, X8, X8
	VMOVHLPS     X8, X8, X9
	VMAXPS       X9, X8, X8
	VMOVSHDUP    X8, X9
	VMAXPS       X9, X8, X8
	VBROADCASTSS X8, Y8

	// d = amax/127, id = d != 0 ? 1/d : 0.
	VDIVPS    Y6, Y8, Y10
	VDIVPS    Y10, Y5, Y12
	VCMPPS    $4, Y11, Y10, Y8
	VANDPS    Y8, Y12, Y12
	VCVTPS2PH $0, X10, X10
	VPEXTRW   $0, X10, AX
	MOVW      AX, (DI)

	VMULPS Y12, Y0, Y0
	VMULPS Y12, Y1, Y1
	VMULPS Y12, Y2, Y2
	VMULPS Y12, Y3, Y3
	ROUNDF(Y0)
	ROUNDF(Y1)
	ROUNDF(Y2)
	ROUNDF(Y3)
	VPACKSSDW Y1, Y0, Y0
	VPACKSSDW Y3, Y2, Y2
	VPACKSSWB Y2, Y0, Y0
	VPERMD    Y0, Y13, Y0
	VMOVDQU   Y0, 2(DI)

	ADDQ $128, SI
	ADDQ $34, DI
	DECQ CX
	JNZ  q80loop

q80done:
	VZEROUPPER
	RET

// Q8KQ quantizes 32 floats at off(SI) (iscale in Y10) into 32 bytes at
// 4+off/4(DI).
#define Q8KQ(off) \
	VMULPS     (off)(SI), Y10, Y0;    \
	VMULPS     (off+32)(SI), Y10, Y1; \
	VMULPS     (off+64)(SI), Y10, Y2; \
	VMULPS     (off+96)(SI), Y10, Y3; \
	VCVTPS2DQ  Y0, Y0;               \
	VCVTPS2DQ  Y1, Y1;               \
	VCVTPS2DQ  Y2, Y2;               \
	VCVTPS2DQ  Y3, Y3;               \
	VPMINSD    Y6, Y0, Y0;           \
	VPMINSD    Y6, Y1, Y1;           \
	VPMINSD    Y6, Y2, Y2;           \
	VPMINSD    Y6, Y3, Y3;           \
	VPACKSSDW  Y1, Y0, Y0;           \
	VPACKSSDW  Y3, Y2, Y2;           \
	VPACKSSWB  Y2, Y0, Y0;           \
	VPERMD     Y0, Y13, Y0;          \
	VMOVDQU    Y0, (4+off/4)(DI)

// Q8KSUM leaves in Y(dst) the int32 sums of each 4 bytes of the 32 quants
// at 4+k*32(DI): lanes 0..3 cover bytes 0..15, lanes 4..7 bytes 16..31.
#define Q8KSUM(k, dst) \
	VMOVDQU    (4+(k)*32)(DI), dst; \
	VPMADDUBSW dst, Y5, dst;     \
	VPMADDWD   Y4, dst, dst

// Q8KBSUMS makes the 8 bsums of quant vectors k..k+3 (128 bytes) in order
// in the int32 lanes of Y(out).
#define Q8KBSUMS(k, out) \
	Q8KSUM(k, Y0);            \
	Q8KSUM(k+1, Y1);          \
	Q8KSUM(k+2, Y2);          \
	Q8KSUM(k+3, Y3);          \
	VPHADDD Y1, Y0, Y0;       \
	VPHADDD Y3, Y2, Y2;       \
	VPHADDD Y2, Y0, out;      \
	VPERMD  out, Y13, out

// func quantizeQ8_KAVX2(dst *byte, x *float32, nb int)
TEXT ·quantizeQ8_KAVX2(SB), NOSPLIT, $0-24
	MOVQ         dst+0(FP), DI
	MOVQ         x+8(FP), SI
	MOVQ         nb+16(FP), CX
	VMOVDQU      absMask<>(SB), Y7
	VPBROADCASTD i127<>(SB), Y6
	VMOVDQU      packPerm<>(SB), Y13
	TESTQ        CX, CX
	JZ           q8kdone

	PCALIGN $16
q8kloop:
	// amax over the 256 values.
	VANDPS (SI), Y7, Y8
	MOVQ   $8, AX

q8kmax:
	VANDPS (SI)(AX*4), Y7, Y9
	VMAXPS Y9, Y8, Y8
	ADDQ   $8, AX
	CMPQ   AX, $256
	JLT    q8kmax

	VEXTRACTF128 $1, Y8, X9
	VMAXPS       X9, X8, X8
	VMOVHLPS     X8, X8, X9
	VMAXPS       X9, X8, X8
	VMOVSHDUP    X8, X9
	VMAXPS       X9, X8, X8
	VXORPS       X9, X9, X9
	VUCOMISS     X9, X8
	JEQ          q8kzero
	VBROADCASTSS X8, Y8

	// max: the first value whose magnitude is amax.
	XORQ AX, AX

q8kfind:
	VANDPS    (SI)(AX*4), Y7, Y9
	VCMPPS    $0, Y8, Y9, Y9
	VMOVMSKPS Y9, DX
	TESTL     DX, DX
	JNZ       q8kfound
	ADDQ      $8, AX
	CMPQ      AX, $256
	JLT       q8kfind
	JMP       q8kzero // unreachable unless NaN

q8kfound:
	BSFL  DX, DX
	ADDQ  DX, AX
	VMOVSS (SI)(AX*4), X9

	// iscale = -127/max, d = 1/iscale.
	VMOVSS       fm127<>(SB), X10
	VDIVSS       X9, X10, X10
	VMOVSS       f1<>(SB), X11
	VDIVSS       X10, X11, X11
	VMOVSS       X11, (DI)
	VBROADCASTSS X10, Y10

	Q8KQ(0)
	Q8KQ(128)
	Q8KQ(256)
	Q8KQ(384)
	Q8KQ(512)
	Q8KQ(640)
	Q8KQ(768)
	Q8KQ(896)

	// bsums: 16 sums of 16 quants as int16.
	VMOVDQU onesU8<>(SB), Y5
	VMOVDQU ones16q<>(SB), Y4
	Q8KBSUMS(0, Y14)
	Q8KBSUMS(4, Y15)
	VPACKSSDW Y15, Y14, Y14
	VPERMQ    $0xd8, Y14, Y14
	VMOVDQU   Y14, 260(DI)
	JMP       q8knext

q8kzero:
	VPXOR   Y0, Y0, Y0
	VMOVDQU Y0, 0(DI)
	VMOVDQU Y0, 32(DI)
	VMOVDQU Y0, 64(DI)
	VMOVDQU Y0, 96(DI)
	VMOVDQU Y0, 128(DI)
	VMOVDQU Y0, 160(DI)
	VMOVDQU Y0, 192(DI)
	VMOVDQU Y0, 224(DI)
	VMOVDQU Y0, 256(DI)
	VMOVDQU Y0, 260(DI)

q8knext:
	ADDQ $1024, SI
	ADDQ $292, DI
	DECQ CX
	JNZ  q8kloop

q8kdone:
	VZEROUPPER
	RET
