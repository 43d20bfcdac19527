//go:build amd64 && !purego

#include "textflag.h"

// The integer value sum over a Q8_0 cache (attnv8.go): the transposition
// of a block of value rows into quads of four positions, and one row's
// quantized weights dotted with them (VPMADDUBSW/VPMADDWD on avx2,
// VPDPBUSD on avx512vnni). The weights' quants are in [0, 127], the
// unsigned operand of both; the integer sums are exact, so both give the
// reference's bits.

// QUANT leaves in 0(SP) the row's quantized weights of the group and block
// at SI (weights) and R8 (scales), in dword order 0 2 4 6 1 3 5 7 of the
// quads, and d = amax*float32(1/127) in Y6; it jumps to next when amax is not
// positive (or NaN).
#define QUANT \
	VMOVUPS      (SI), Y0;        \
	VMOVUPS      32(SI), Y1;      \
	VMOVUPS      64(SI), Y2;      \
	VMOVUPS      96(SI), Y3;      \
	VMULPS       (R8), Y0, Y0;    \
	VMULPS       32(R8), Y1, Y1;  \
	VMULPS       64(R8), Y2, Y2;  \
	VMULPS       96(R8), Y3, Y3;  \
	VMAXPS       Y1, Y0, Y4;      \
	VMAXPS       Y3, Y2, Y5;      \
	VMAXPS       Y5, Y4, Y4;      \
	VEXTRACTF128 $1, Y4, X5;      \
	VMAXPS       X5, X4, X4;      \
	VPERMILPS    $0x4e, X4, X5;   \
	VMAXPS       X5, X4, X4;      \
	VPERMILPS    $0xb1, X4, X5;   \
	VMAXPS       X5, X4, X4;      \
	VXORPS       X5, X5, X5;      \
	VUCOMISS     X5, X4;          \
	JBE          next;            \
	VMULSS       X13, X4, X6;     \
	VDIVSS       X4, X14, X7;     \
	VBROADCASTSS X6, Y6;          \
	VBROADCASTSS X7, Y7;          \
	VMULPS       Y7, Y0, Y0;      \
	VMULPS       Y7, Y1, Y1;      \
	VMULPS       Y7, Y2, Y2;      \
	VMULPS       Y7, Y3, Y3;      \
	VCVTPS2DQ    Y0, Y0;          \
	VCVTPS2DQ    Y1, Y1;          \
	VCVTPS2DQ    Y2, Y2;          \
	VCVTPS2DQ    Y3, Y3;          \
	VPACKSSDW    Y1, Y0, Y0;      \
	VPACKSSDW    Y3, Y2, Y2;      \
	VPACKUSWB    Y2, Y0, Y0;      \
	VMOVDQU      Y0, (SP)

// OUT adds d (Y6) times the int32 sums Y8..Y11 to the 32 floats at R11.
#define OUT \
	VCVTDQ2PS Y8, Y8;         \
	VCVTDQ2PS Y9, Y9;         \
	VCVTDQ2PS Y10, Y10;       \
	VCVTDQ2PS Y11, Y11;       \
	VMULPS    Y6, Y8, Y8;     \
	VMULPS    Y6, Y9, Y9;     \
	VMULPS    Y6, Y10, Y10;   \
	VMULPS    Y6, Y11, Y11;   \
	VADDPS    (R11), Y8, Y8;  \
	VADDPS    32(R11), Y9, Y9; \
	VADDPS    64(R11), Y10, Y10; \
	VADDPS    96(R11), Y11, Y11; \
	VMOVUPS   Y8, (R11);      \
	VMOVUPS   Y9, 32(R11);    \
	VMOVUPS   Y10, 64(R11);   \
	VMOVUPS   Y11, 96(R11)

// SUMARGS loads the arguments of sumV8: DI out, SI the first group's
// weights, DX vt and R8 dv at its first block, CX ng, R9 nbv; X14 127,
// X13 float32(1/127).
#define SUMARGS \
	MOVQ  out+0(FP), DI;    \
	MOVQ  w+8(FP), SI;      \
	MOVQ  vt+16(FP), DX;    \
	MOVQ  dv+24(FP), R8;    \
	MOVQ  g0+32(FP), AX;    \
	MOVQ  ng+40(FP), CX;    \
	MOVQ  nbv+48(FP), R9;   \
	MOVQ  AX, R12;          \
	SHLQ  $7, R12;          \
	ADDQ  R12, SI;          \
	IMULQ R9, AX;           \
	MOVQ  AX, R12;          \
	SHLQ  $10, R12;         \
	ADDQ  R12, DX;          \
	SHLQ  $7, AX;           \
	ADDQ  AX, R8;           \
	MOVL  $0x42fe0000, AX;  \
	VMOVD AX, X14;          \
	MOVL  $0x3c010204, AX;  \
	VMOVD AX, X13

#define QUAD2(q, o) \
	VPBROADCASTD o(SP), Y12;                  \
	VPMADDUBSW   (q*128)(DX), Y12, Y4;        \
	VPMADDUBSW   (q*128+32)(DX), Y12, Y5;     \
	VPMADDWD     Y15, Y4, Y4;                 \
	VPMADDWD     Y15, Y5, Y5;                 \
	VPADDD       Y4, Y8, Y8;                  \
	VPADDD       Y5, Y9, Y9;                  \
	VPMADDUBSW   (q*128+64)(DX), Y12, Y4;     \
	VPMADDUBSW   (q*128+96)(DX), Y12, Y5;     \
	VPMADDWD     Y15, Y4, Y4;                 \
	VPMADDWD     Y15, Y5, Y5;                 \
	VPADDD       Y4, Y10, Y10;                \
	VPADDD       Y5, Y11, Y11

#define QUADV(q, o) \
	VPBROADCASTD o(SP), Y12;             \
	VPDPBUSD     (q*128)(DX), Y12, Y8;   \
	VPDPBUSD     (q*128+32)(DX), Y12, Y9; \
	VPDPBUSD     (q*128+64)(DX), Y12, Y10; \
	VPDPBUSD     (q*128+96)(DX), Y12, Y11

// func transposeV8AVX2(vt *byte, dv *float32, v *byte, vStride, nq, nbv int, tab *float32)
//
// For nq >= 1 quads of four value rows (vStride bytes apart) and each of
// the nbv >= 1 blocks c: the four rows' 32 quants interleaved by byte into
// vt[((q/8*nbv+c)*8+q%8)*128:] and their scales (tab) into
// dv[(q/8*nbv+c)*32+4*(q%8)+j].
TEXT ·transposeV8AVX2(SB), NOSPLIT, $0-56
	MOVQ vt+0(FP), DI
	MOVQ dv+8(FP), SI
	MOVQ vStride+24(FP), DX
	MOVQ nbv+40(FP), R9
	MOVQ tab+48(FP), BX
	XORQ CX, CX // q

quad:
	// R10 the quad's vt, R11 its dv: (q/8)*nbv blocks on, plus q%8 quads
	MOVQ CX, AX
	SHRQ $3, AX
	IMULQ R9, AX
	MOVQ CX, R12
	ANDQ $7, R12
	MOVQ AX, R10
	SHLQ $10, R10
	MOVQ R12, R13
	SHLQ $7, R13
	ADDQ R13, R10
	ADDQ DI, R10
	MOVQ AX, R11
	SHLQ $7, R11
	SHLQ $4, R12
	ADDQ R12, R11
	ADDQ SI, R11
	// R12..R15 the four rows
	MOVQ CX, R12
	SHLQ $2, R12
	IMULQ DX, R12
	ADDQ v+16(FP), R12
	LEAQ (R12)(DX*1), R13
	LEAQ (R13)(DX*1), R14
	LEAQ (R14)(DX*1), R15
	MOVQ R9, R8

block:
	MOVWLZX (R12), AX
	MOVL    (BX)(AX*4), AX
	MOVL    AX, (R11)
	MOVWLZX (R13), AX
	MOVL    (BX)(AX*4), AX
	MOVL    AX, 4(R11)
	MOVWLZX (R14), AX
	MOVL    (BX)(AX*4), AX
	MOVL    AX, 8(R11)
	MOVWLZX (R15), AX
	MOVL    (BX)(AX*4), AX
	MOVL    AX, 12(R11)

#define HALF(off, dst) \
	VMOVDQU    off(R12), X0;  \
	VMOVDQU    off(R13), X1;  \
	VMOVDQU    off(R14), X2;  \
	VMOVDQU    off(R15), X3;  \
	VPUNPCKLBW X1, X0, X4;    \
	VPUNPCKHBW X1, X0, X5;    \
	VPUNPCKLBW X3, X2, X6;    \
	VPUNPCKHBW X3, X2, X7;    \
	VPUNPCKLWD X6, X4, X8;    \
	VPUNPCKHWD X6, X4, X9;    \
	VPUNPCKLWD X7, X5, X10;   \
	VPUNPCKHWD X7, X5, X11;   \
	VMOVDQU    X8, dst(R10);      \
	VMOVDQU    X9, (dst+16)(R10); \
	VMOVDQU    X10, (dst+32)(R10); \
	VMOVDQU    X11, (dst+48)(R10)

	HALF(2, 0)
	HALF(18, 64)
	ADDQ $1024, R10
	ADDQ $128, R11
	ADDQ $34, R12
	ADDQ $34, R13
	ADDQ $34, R14
	ADDQ $34, R15
	DECQ R8
	JNZ  block
	INCQ CX
	CMPQ CX, nq+32(FP)
	JLT  quad
	RET

// func sumV8AVX2(out, w *float32, vt *byte, dv *float32, g0, ng, nbv int)
//
// out[32c+i] += d*sum_t q[t]*v[t][32c+i] for the groups g0..g0+ng-1 (ng >=
// 1) and blocks c < nbv: VPMADDUBSW pairs (at most 2*127*128, exact in 16
// bits), VPMADDWD by ones to int32.
TEXT ·sumV8AVX2(SB), NOSPLIT, $32-56
	SUMARGS
	VPCMPEQW Y15, Y15, Y15
	VPSRLW   $15, Y15, Y15 // int16 ones

group:
	MOVQ DI, R11
	MOVQ R9, R10

block:
	QUANT
	VPXOR Y8, Y8, Y8
	VPXOR Y9, Y9, Y9
	VPXOR Y10, Y10, Y10
	VPXOR Y11, Y11, Y11

	QUAD2(0, 0)
	QUAD2(1, 16)
	QUAD2(2, 4)
	QUAD2(3, 20)
	QUAD2(4, 8)
	QUAD2(5, 24)
	QUAD2(6, 12)
	QUAD2(7, 28)
	OUT

next:
	ADDQ $1024, DX
	ADDQ $128, R8
	ADDQ $128, R11
	DECQ R10
	JNZ  block
	ADDQ $128, SI
	DECQ CX
	JNZ  group
	VZEROUPPER
	RET

// func sumV8VNNI(out, w *float32, vt *byte, dv *float32, g0, ng, nbv int)
//
// sumV8AVX2 with VPDPBUSD.
TEXT ·sumV8VNNI(SB), NOSPLIT, $32-56
	SUMARGS

group:
	MOVQ DI, R11
	MOVQ R9, R10

block:
	QUANT
	VPXOR Y8, Y8, Y8
	VPXOR Y9, Y9, Y9
	VPXOR Y10, Y10, Y10
	VPXOR Y11, Y11, Y11

	QUADV(0, 0)
	QUADV(1, 16)
	QUADV(2, 4)
	QUADV(3, 20)
	QUADV(4, 8)
	QUADV(5, 24)
	QUADV(6, 12)
	QUADV(7, 28)
	OUT

next:
	ADDQ $1024, DX
	ADDQ $128, R8
	ADDQ $128, R11
	DECQ R10
	JNZ  block
	ADDQ $128, SI
	DECQ CX
	JNZ  group
	VZEROUPPER
	RET
