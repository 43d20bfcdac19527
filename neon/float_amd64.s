//go:build amd64 && !purego

#include "textflag.h"
#include "dot_amd64.h"

// AVX2+FMA+F16C float kernels: F32/F16 row dots with up to two columns,
// and the per-token vector work. Lengths are in 8-element chunks; the Go
// wrappers in dot_amd64.go do the tails.

// The row dots take at most two columns per call (the wrappers loop), each
// with four accumulators: 8-element chunk i goes to accumulator i%4 and the
// four are combined as (acc0+acc1)+(acc2+acc3) before the horizontal sum,
// the same for every column whatever n is. Column 0 (DX) uses Y8..Y11,
// column 1 (R9) Y12..Y15; with n == 1, R9 aliases column 0 and its sums
// are not stored.
#define FARGS \
	MOVQ    out+0(FP), DI;      \
	MOVQ    w+8(FP), SI;        \
	MOVQ    a+16(FP), DX;       \
	MOVQ    aStride+24(FP), R8; \
	MOVQ    n8+32(FP), CX;      \
	MOVQ    n+40(FP), BX;       \
	LEAQ    (DX)(R8*1), R9;     \
	CMPQ    BX, $1;             \
	CMOVQEQ DX, R9

// FSUM4 stores (a0+a1)+(a2+a3), reduced in hsum_float_8 order, at off(DI).
#define FSUM4(a0, a1, a2, a3, a0x, off) \
	VADDPS       a1, a0, a0; \
	VADDPS       a3, a2, a2; \
	VADDPS       a2, a0, a0; \
	HSUM(a0, a0x, off)

#define FSTORE(done) \
	FSUM4(Y8, Y9, Y10, Y11, X8, 0);    \
	CMPQ BX, $1;                       \
	JEQ  done;                         \
	FSUM4(Y12, Y13, Y14, Y15, X12, 4)

// Chunk k of the current step into accumulators c0 (column 0) and c1.
#define F32CHUNK(k, c0, c1) \
	VMOVUPS     (32*(k))(SI), Y0;       \
	VFMADD231PS (32*(k))(DX), Y0, c0;   \
	VFMADD231PS (32*(k))(R9), Y0, c1

#define F16CHUNK(k, c0, c1) \
	VCVTPH2PS   (16*(k))(SI), Y0;  \
	VCVTPH2PS   (16*(k))(DX), Y1;  \
	VFMADD231PS Y1, Y0, c0;        \
	VCVTPH2PS   (16*(k))(R9), Y2;  \
	VFMADD231PS Y2, Y0, c1

// FLOATDOT is the body: CHUNK, the bytes per chunk and a label prefix.
#define FLOATDOT(CHUNK, size, loop, tail, t1, t2, done, ret) \
	FARGS;                     \
	ZERO8;                     \
	CMPQ CX, $4;               \
	JLT  tail;                 \
loop:                          \
	CHUNK(0, Y8, Y12);         \
	CHUNK(1, Y9, Y13);         \
	CHUNK(2, Y10, Y14);        \
	CHUNK(3, Y11, Y15);        \
	ADDQ $(4*size), SI;        \
	ADDQ $(4*size), DX;        \
	ADDQ $(4*size), R9;        \
	SUBQ $4, CX;               \
	CMPQ CX, $4;               \
	JGE  loop;                 \
tail:                          \
	TESTQ CX, CX;              \
	JZ   done;                 \
	CHUNK(0, Y8, Y12);         \
	CMPQ CX, $1;               \
	JEQ  done;                 \
	CHUNK(1, Y9, Y13);         \
	CMPQ CX, $2;               \
	JEQ  done;                 \
	CHUNK(2, Y10, Y14);        \
done:                          \
	FSTORE(ret);               \
ret:                           \
	VZEROUPPER;                \
	RET

// func dotF32AVX2(out *float32, w, a *byte, aStride, n8, n int)
TEXT ·dotF32AVX2(SB), NOSPLIT, $0-48
	FLOATDOT(F32CHUNK, 32, f32loop, f32tail, f32t1, f32t2, f32done, f32ret)

// func dotF16AVX2(out *float32, w, a *byte, aStride, n8, n int)
TEXT ·dotF16AVX2(SB), NOSPLIT, $0-48
	FLOATDOT(F16CHUNK, 16, f16loop, f16tail, f16t1, f16t2, f16done, f16ret)

// func dotF32F16AVX2(a *float32, b *uint16, n8 int) float32
// Two accumulators: chunk i goes to Y(i%2); their sum is reduced in
// hsum_float_8 order.
TEXT ·dotF32F16AVX2(SB), NOSPLIT, $0-28
	MOVQ   a+0(FP), SI
	MOVQ   b+8(FP), DX
	MOVQ   n8+16(FP), CX
	VXORPS Y8, Y8, Y8
	VXORPS Y9, Y9, Y9
	CMPQ   CX, $2
	JLT    dfhtail

	PCALIGN $16
dfhloop:
	VCVTPH2PS   (DX), Y0
	VCVTPH2PS   16(DX), Y1
	VFMADD231PS (SI), Y0, Y8
	VFMADD231PS 32(SI), Y1, Y9
	ADDQ        $64, SI
	ADDQ        $32, DX
	SUBQ        $2, CX
	CMPQ        CX, $2
	JGE         dfhloop

dfhtail:
	TESTQ       CX, CX
	JZ          dfhsum
	VCVTPH2PS   (DX), Y0
	VFMADD231PS (SI), Y0, Y8

dfhsum:
	VADDPS       Y9, Y8, Y8
	VEXTRACTF128 $1, Y8, X0
	VADDPS       X8, X0, X0
	VMOVHLPS     X0, X0, X1
	VADDPS       X1, X0, X0
	VMOVSHDUP    X0, X1
	VADDSS       X1, X0, X0
	VMOVSS       X0, ret+24(FP)
	VZEROUPPER
	RET

// func axpyF16AVX2(out *float32, alpha float32, b *uint16, n8 int)
// out[i] += alpha*b[i], the product rounded before the addition (no FMA),
// so the result equals the generic code bit for bit.
TEXT ·axpyF16AVX2(SB), NOSPLIT, $0-32
	MOVQ         out+0(FP), DI
	VBROADCASTSS alpha+8(FP), Y7
	MOVQ         b+16(FP), DX
	MOVQ         n8+24(FP), CX
	TESTQ        CX, CX
	JZ           axdone

	PCALIGN $16
axloop:
	VCVTPH2PS (DX), Y0
	VMULPS    Y7, Y0, Y0
	VADDPS    (DI), Y0, Y0
	VMOVUPS   Y0, (DI)
	ADDQ      $32, DI
	ADDQ      $16, DX
	DECQ      CX
	JNZ       axloop

axdone:
	VZEROUPPER
	RET

// func sumSquaresAVX2(x *float32, n8 int) float64
// Each square rounded to float32 (as the generic code), widened to float64
// and summed in four 4-lane float64 accumulators (the low and high halves
// of even and odd chunks), reduced in a fixed order.
TEXT ·sumSquaresAVX2(SB), NOSPLIT, $0-24
	MOVQ   x+0(FP), SI
	MOVQ   n8+8(FP), CX
	VXORPD Y8, Y8, Y8
	VXORPD Y9, Y9, Y9
	VXORPD Y10, Y10, Y10
	VXORPD Y11, Y11, Y11
	CMPQ   CX, $2
	JLT    sstail

	PCALIGN $16
ssloop:
	VMOVUPS      (SI), Y0
	VMOVUPS      32(SI), Y3
	VMULPS       Y0, Y0, Y0
	VMULPS       Y3, Y3, Y3
	VCVTPS2PD    X0, Y1
	VEXTRACTF128 $1, Y0, X2
	VCVTPS2PD    X2, Y2
	VCVTPS2PD    X3, Y4
	VEXTRACTF128 $1, Y3, X5
	VCVTPS2PD    X5, Y5
	VADDPD       Y1, Y8, Y8
	VADDPD       Y2, Y9, Y9
	VADDPD       Y4, Y10, Y10
	VADDPD       Y5, Y11, Y11
	ADDQ         $64, SI
	SUBQ         $2, CX
	CMPQ         CX, $2
	JGE          ssloop

sstail:
	TESTQ        CX, CX
	JZ           ssdone
	VMOVUPS      (SI), Y0
	VMULPS       Y0, Y0, Y0
	VCVTPS2PD    X0, Y1
	VEXTRACTF128 $1, Y0, X2
	VCVTPS2PD    X2, Y2
	VADDPD       Y1, Y8, Y8
	VADDPD       Y2, Y9, Y9

ssdone:
	VADDPD       Y10, Y8, Y8
	VADDPD       Y11, Y9, Y9
	VADDPD       Y9, Y8, Y8
	VEXTRACTF128 $1, Y8, X0
	VADDPD       X8, X0, X0
	VUNPCKHPD    X0, X0, X1
	VADDSD       X1, X0, X0
	VMOVSD       X0, ret+16(FP)
	VZEROUPPER
	RET

// func attnScoresAVX2(sc *float32, q *float32, k *uint16, n8, rows int, scale float32)
// sc[t] = dot(q, k row t) * scale for t < rows (rows n8*8 values apart):
// each dot exactly as dotF32F16AVX2 computes it (even chunks into Y8, odd
// into Y9, FMA, the same horizontal sum), so the scores equal the one-row
// kernel's bit for bit.
TEXT ·attnScoresAVX2(SB), NOSPLIT, $0-44
	MOVQ         sc+0(FP), DI
	MOVQ         k+16(FP), DX
	MOVQ         rows+32(FP), BX
	VBROADCASTSS scale+40(FP), Y7
	TESTQ        BX, BX
	JZ           asdone

asrow:
	MOVQ   q+8(FP), SI
	MOVQ   n8+24(FP), CX
	VXORPS Y8, Y8, Y8
	VXORPS Y9, Y9, Y9
	CMPQ   CX, $2
	JLT    astail

	PCALIGN $16
asloop:
	VCVTPH2PS   (DX), Y0
	VCVTPH2PS   16(DX), Y1
	VFMADD231PS (SI), Y0, Y8
	VFMADD231PS 32(SI), Y1, Y9
	ADDQ        $64, SI
	ADDQ        $32, DX
	SUBQ        $2, CX
	CMPQ        CX, $2
	JGE         asloop

astail:
	TESTQ       CX, CX
	JZ          assum
	VCVTPH2PS   (DX), Y0
	VFMADD231PS (SI), Y0, Y8
	ADDQ        $16, DX

assum:
	VADDPS       Y9, Y8, Y8
	VEXTRACTF128 $1, Y8, X0
	VADDPS       X8, X0, X0
	VMOVHLPS     X0, X0, X1
	VADDPS       X1, X0, X0
	VMOVSHDUP    X0, X1
	VADDSS       X1, X0, X0
	VMULSS       X7, X0, X0
	VMOVSS       X0, (DI)
	ADDQ         $4, DI
	DECQ         BX
	JNZ          asrow

asdone:
	VZEROUPPER
	RET

// func attnSumAVX2(out *float32, w *float32, v *uint16, n8, rows int)
// out[i] += w[t]*v[t][i] for t = 0..rows-1 in order, each product rounded
// before its addition (as axpyF16AVX2, once per row): four chunks of out
// in Y8..Y11 through all rows, then the next four.
TEXT ·attnSumAVX2(SB), NOSPLIT, $0-40
	MOVQ out+0(FP), DI
	MOVQ v+16(FP), DX
	MOVQ n8+24(FP), CX
	MOVQ n8+24(FP), R10
	SHLQ $4, R10 // bytes per v row
	TESTQ CX, CX
	JZ    sudone

suchunks:
	MOVQ    $4, R11
	CMPQ    CX, R11
	CMOVQLT CX, R11
	VMOVUPS (DI), Y8
	CMPQ    R11, $2
	JLT     su1
	VMOVUPS 32(DI), Y9
	JEQ     su2
	VMOVUPS 64(DI), Y10
	CMPQ    R11, $3
	JEQ     su3
	VMOVUPS 96(DI), Y11
	MOVQ    w+8(FP), SI
	MOVQ    rows+32(FP), BX
	MOVQ    DX, R9

	PCALIGN $16
su4loop:
	VBROADCASTSS (SI), Y7
	VCVTPH2PS    (R9), Y0
	VCVTPH2PS    16(R9), Y1
	VCVTPH2PS    32(R9), Y2
	VCVTPH2PS    48(R9), Y3
	VMULPS       Y7, Y0, Y0
	VMULPS       Y7, Y1, Y1
	VMULPS       Y7, Y2, Y2
	VMULPS       Y7, Y3, Y3
	VADDPS       Y0, Y8, Y8
	VADDPS       Y1, Y9, Y9
	VADDPS       Y2, Y10, Y10
	VADDPS       Y3, Y11, Y11
	ADDQ         $4, SI
	ADDQ         R10, R9
	DECQ         BX
	JNZ          su4loop
	VMOVUPS      Y8, (DI)
	VMOVUPS      Y9, 32(DI)
	VMOVUPS      Y10, 64(DI)
	VMOVUPS      Y11, 96(DI)
	JMP          sunext

su3:
	MOVQ w+8(FP), SI
	MOVQ rows+32(FP), BX
	MOVQ DX, R9

su3loop:
	VBROADCASTSS (SI), Y7
	VCVTPH2PS    (R9), Y0
	VCVTPH2PS    16(R9), Y1
	VCVTPH2PS    32(R9), Y2
	VMULPS       Y7, Y0, Y0
	VMULPS       Y7, Y1, Y1
	VMULPS       Y7, Y2, Y2
	VADDPS       Y0, Y8, Y8
	VADDPS       Y1, Y9, Y9
	VADDPS       Y2, Y10, Y10
	ADDQ         $4, SI
	ADDQ         R10, R9
	DECQ         BX
	JNZ          su3loop
	VMOVUPS      Y8, (DI)
	VMOVUPS      Y9, 32(DI)
	VMOVUPS      Y10, 64(DI)
	JMP          sunext

su2:
	MOVQ w+8(FP), SI
	MOVQ rows+32(FP), BX
	MOVQ DX, R9

su2loop:
	VBROADCASTSS (SI), Y7
	VCVTPH2PS    (R9), Y0
	VCVTPH2PS    16(R9), Y1
	VMULPS       Y7, Y0, Y0
	VMULPS       Y7, Y1, Y1
	VADDPS       Y0, Y8, Y8
	VADDPS       Y1, Y9, Y9
	ADDQ         $4, SI
	ADDQ         R10, R9
	DECQ         BX
	JNZ          su2loop
	VMOVUPS      Y8, (DI)
	VMOVUPS      Y9, 32(DI)
	JMP          sunext

su1:
	MOVQ w+8(FP), SI
	MOVQ rows+32(FP), BX
	MOVQ DX, R9

su1loop:
	VBROADCASTSS (SI), Y7
	VCVTPH2PS    (R9), Y0
	VMULPS       Y7, Y0, Y0
	VADDPS       Y0, Y8, Y8
	ADDQ         $4, SI
	ADDQ         R10, R9
	DECQ         BX
	JNZ          su1loop
	VMOVUPS      Y8, (DI)

sunext:
	MOVQ R11, AX
	SHLQ $5, AX
	ADDQ AX, DI
	SHRQ $1, AX
	ADDQ AX, DX
	SUBQ R11, CX
	JNZ  suchunks

sudone:
	VZEROUPPER
	RET

// EXPF sets Y5 = expf(Y1) exactly as expf (silu.go) computes it: 0 below
// the range (and for NaN), the clamp, the rounding to nearest even, every
// product rounded before its addition, 2^n built in the exponent field
// (Y8..Y13, Y15 the constants EXPCONST loads; Y1..Y7 clobbered).
#define EXPCONST \
	VBROADCASTSS silo<>+0(SB), Y8;  \
	VBROADCASTSS silo<>+4(SB), Y9;  \
	VBROADCASTSS silo<>+8(SB), Y10; \
	VBROADCASTSS silo<>+12(SB), Y11; \
	VBROADCASTSS silo<>+16(SB), Y12; \
	VBROADCASTSS silo<>+44(SB), Y13; \
	VPBROADCASTD silo<>+52(SB), Y15

#define EXPF \
	VCMPPS       $0x1d, Y8, Y1, Y7;     \
	VMAXPS       Y8, Y1, Y1;            \
	VMINPS       Y9, Y1, Y1;            \
	VMULPS       Y10, Y1, Y2;           \
	VROUNDPS     $0, Y2, Y2;            \
	VMULPS       Y11, Y2, Y3;           \
	VSUBPS       Y3, Y1, Y1;            \
	VMULPS       Y12, Y2, Y3;           \
	VSUBPS       Y3, Y1, Y1;            \
	VMULPS       Y1, Y1, Y4;            \
	VBROADCASTSS silo<>+20(SB), Y5;     \
	VMULPS       Y1, Y5, Y5;            \
	VBROADCASTSS silo<>+24(SB), Y6;     \
	VADDPS       Y6, Y5, Y5;            \
	VMULPS       Y1, Y5, Y5;            \
	VBROADCASTSS silo<>+28(SB), Y6;     \
	VADDPS       Y6, Y5, Y5;            \
	VMULPS       Y1, Y5, Y5;            \
	VBROADCASTSS silo<>+32(SB), Y6;     \
	VADDPS       Y6, Y5, Y5;            \
	VMULPS       Y1, Y5, Y5;            \
	VBROADCASTSS silo<>+36(SB), Y6;     \
	VADDPS       Y6, Y5, Y5;            \
	VMULPS       Y1, Y5, Y5;            \
	VBROADCASTSS silo<>+40(SB), Y6;     \
	VADDPS       Y6, Y5, Y5;            \
	VMULPS       Y4, Y5, Y5;            \
	VADDPS       Y1, Y5, Y5;            \
	VADDPS       Y13, Y5, Y5;           \
	VCVTPS2DQ    Y2, Y2;                \
	VPADDD       Y15, Y2, Y2;           \
	VPSLLD       $23, Y2, Y2;           \
	VMULPS       Y2, Y5, Y5;            \
	VANDPS       Y7, Y5, Y5

// func siluMulAVX2(gate, up *float32, n8 int)
// gate = silu(gate) * up, 8 values at a time, exactly as siluMul
// (silu.go): EXPF of -gate, then an IEEE division and the product.
TEXT ·siluMulAVX2(SB), NOSPLIT, $0-24
	MOVQ         gate+0(FP), DI
	MOVQ         up+8(FP), SI
	MOVQ         n8+16(FP), CX
	TESTQ        CX, CX
	JZ           sidone
	EXPCONST
	VBROADCASTSS silo<>+48(SB), Y14 // the sign bit

	PCALIGN $16
siloop:
	VMOVUPS (DI), Y0
	VXORPS  Y14, Y0, Y1
	EXPF
	VADDPS  Y13, Y5, Y5
	VDIVPS  Y5, Y0, Y0
	VMULPS  (SI), Y0, Y0
	VMOVUPS Y0, (DI)
	ADDQ    $32, DI
	ADDQ    $32, SI
	DECQ    CX
	JNZ     siloop

sidone:
	VZEROUPPER
	RET

// func expSubAVX2(x *float32, n8 int, m float32)
// x[i] = expf(x[i] - m), 8 values at a time (softmax's exponentials).
TEXT ·expSubAVX2(SB), NOSPLIT, $0-20
	MOVQ         x+0(FP), DI
	MOVQ         n8+8(FP), CX
	VBROADCASTSS m+16(FP), Y14
	TESTQ        CX, CX
	JZ           exdone
	EXPCONST

	PCALIGN $16
exloop:
	VMOVUPS (DI), Y1
	VSUBPS  Y14, Y1, Y1
	EXPF
	VMOVUPS Y5, (DI)
	ADDQ    $32, DI
	DECQ    CX
	JNZ     exloop

exdone:
	VZEROUPPER
	RET

// func expSumAVX2(x *float32, n8 int, m float32) (s0, s1, s2, s3 float64)
// expSubAVX2 that also adds the exponentials up in float64: sj (from 0)
// gets x[j], x[j+4], x[j+8], ... in order, the four running sums of
// the reference's block sum (attntile.go's sumF64).
TEXT ·expSumAVX2(SB), NOSPLIT, $0-56
	MOVQ         x+0(FP), DI
	MOVQ         n8+8(FP), CX
	VBROADCASTSS m+16(FP), Y14
	VXORPD       Y0, Y0, Y0
	TESTQ        CX, CX
	JZ           esdone
	EXPCONST

	PCALIGN $16
esloop:
	VMOVUPS      (DI), Y1
	VSUBPS       Y14, Y1, Y1
	EXPF
	VMOVUPS      Y5, (DI)
	VCVTPS2PD    X5, Y3
	VADDPD       Y3, Y0, Y0
	VEXTRACTF128 $1, Y5, X4
	VCVTPS2PD    X4, Y4
	VADDPD       Y4, Y0, Y0
	ADDQ         $32, DI
	DECQ         CX
	JNZ          esloop

esdone:
	LEAQ    s0+24(FP), DX
	VMOVUPD Y0, (DX)
	VZEROUPPER
	RET

DATA silo<>+0(SB)/4, $0xc2ae0000 // expLo
DATA silo<>+4(SB)/4, $0x42b00000 // expHi
DATA silo<>+8(SB)/4, $0x3fb8aa3b // log2e
DATA silo<>+12(SB)/4, $0x3f318000 // expC1
DATA silo<>+16(SB)/4, $0xb95e8083 // expC2
DATA silo<>+20(SB)/4, $0x39506967 // expP0
DATA silo<>+24(SB)/4, $0x3ab743ce // expP1
DATA silo<>+28(SB)/4, $0x3c088908 // expP2
DATA silo<>+32(SB)/4, $0x3d2aa9c1 // expP3
DATA silo<>+36(SB)/4, $0x3e2aaaaa // expP4
DATA silo<>+40(SB)/4, $0x3f000000 // expP5
DATA silo<>+44(SB)/4, $0x3f800000 // 1
DATA silo<>+48(SB)/4, $0x80000000 // sign bit
DATA silo<>+52(SB)/4, $127
GLOBL silo<>(SB), RODATA|NOPTR, $56

// func addAVX2(dst, src *float32, n8 int)
TEXT ·addAVX2(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n8+16(FP), CX

adloop:
	VMOVUPS (DI), Y0
	VADDPS  (SI), Y0, Y0
	VMOVUPS Y0, (DI)
	ADDQ    $32, DI
	ADDQ    $32, SI
	DECQ    CX
	JNZ     adloop
	VZEROUPPER
	RET

// func scaleMulAVX2(out, x, w *float32, n8 int, scale float32)
TEXT ·scaleMulAVX2(SB), NOSPLIT, $0-36
	MOVQ         out+0(FP), DI
	MOVQ         x+8(FP), SI
	MOVQ         w+16(FP), DX
	MOVQ         n8+24(FP), CX
	VBROADCASTSS scale+32(FP), Y7

smloop:
	VMULPS  (SI), Y7, Y0
	VMULPS  (DX), Y0, Y0
	VMOVUPS Y0, (DI)
	ADDQ    $32, DI
	ADDQ    $32, SI
	ADDQ    $32, DX
	DECQ    CX
	JNZ     smloop
	VZEROUPPER
	RET

// func toF16AVX2(dst *uint16, src *float32, n8 int)
// VCVTPS2PH rounding to nearest even (ggml's conversion for every number);
// a NaN becomes the quiet NaN 0x7E00 with its sign, as ggml.FP32ToFP16
// gives, instead of VCVTPS2PH's payload-keeping one.
TEXT ·toF16AVX2(SB), NOSPLIT, $0-24
	MOVQ         dst+0(FP), DI
	MOVQ         src+8(FP), SI
	MOVQ         n8+16(FP), CX
	VPBROADCASTD f16nan<>+0(SB), Y6 // 0x7e00 in every dword
	VPBROADCASTD f16nan<>+4(SB), Y7 // 0x8000 in every dword

f16loop:
	VMOVUPS      (SI), Y0
	VCVTPS2PH    $0, Y0, X1
	VCMPPS       $3, Y0, Y0, Y2      // NaN lanes
	VPSRLD       $16, Y0, Y3
	VPAND        Y7, Y3, Y3          // the sign as a half
	VPOR         Y6, Y3, Y3          // signed quiet NaN
	VPMOVZXWD    X1, Y1
	VBLENDVPS    Y2, Y3, Y1, Y1
	VEXTRACTI128 $1, Y1, X4
	VPACKUSDW    X4, X1, X1
	VMOVDQU      X1, (DI)
	ADDQ         $16, DI
	ADDQ         $32, SI
	DECQ         CX
	JNZ          f16loop
	VZEROUPPER
	RET

DATA f16nan<>+0(SB)/4, $0x7e00
DATA f16nan<>+4(SB)/4, $0x8000
GLOBL f16nan<>(SB), RODATA|NOPTR, $8
