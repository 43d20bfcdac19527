//go:build amd64 && !purego

#include "textflag.h"

// AVX2+FMA+F16C float kernels: F32/F16 row dots with up to eight columns,
// and the per-token vector work. Lengths are in 8-element chunks; the Go
// wrappers in dot_amd64.go do the tails.

#define FARGS \
	MOVQ out+0(FP), DI;        \
	MOVQ w+8(FP), SI;          \
	MOVQ a+16(FP), DX;         \
	MOVQ aStride+24(FP), R8;   \
	MOVQ n8+32(FP), CX;        \
	MOVQ n+40(FP), BX

#define FZERO8 \
	VXORPS Y8, Y8, Y8;    \
	VXORPS Y9, Y9, Y9;    \
	VXORPS Y10, Y10, Y10; \
	VXORPS Y11, Y11, Y11; \
	VXORPS Y12, Y12, Y12; \
	VXORPS Y13, Y13, Y13; \
	VXORPS Y14, Y14, Y14; \
	VXORPS Y15, Y15, Y15

#define FHSUM(acc, accx, off) \
	VEXTRACTF128 $1, acc, X0; \
	VADDPS accx, X0, X0;      \
	VMOVHLPS X0, X0, X1;      \
	VADDPS X1, X0, X0;        \
	VMOVSHDUP X0, X1;         \
	VADDSS X1, X0, X0;        \
	VMOVSS X0, off(DI)

#define FEACHCOL(COL, next) \
	MOVQ DX, R9;      \
	COL(Y8);          \
	CMPQ BX, $1;      \
	JEQ next;         \
	COL(Y9);          \
	CMPQ BX, $2;      \
	JEQ next;         \
	COL(Y10);         \
	CMPQ BX, $3;      \
	JEQ next;         \
	COL(Y11);         \
	CMPQ BX, $4;      \
	JEQ next;         \
	COL(Y12);         \
	CMPQ BX, $5;      \
	JEQ next;         \
	COL(Y13);         \
	CMPQ BX, $6;      \
	JEQ next;         \
	COL(Y14);         \
	CMPQ BX, $7;      \
	JEQ next;         \
	COL(Y15)

#define FSTOREALL(done) \
	FHSUM(Y8, X8, 0);   \
	CMPQ BX, $1;        \
	JEQ done;           \
	FHSUM(Y9, X9, 4);   \
	CMPQ BX, $2;        \
	JEQ done;           \
	FHSUM(Y10, X10, 8); \
	CMPQ BX, $3;        \
	JEQ done;           \
	FHSUM(Y11, X11, 12); \
	CMPQ BX, $4;        \
	JEQ done;           \
	FHSUM(Y12, X12, 16); \
	CMPQ BX, $5;        \
	JEQ done;           \
	FHSUM(Y13, X13, 20); \
	CMPQ BX, $6;        \
	JEQ done;           \
	FHSUM(Y14, X14, 24); \
	CMPQ BX, $7;        \
	JEQ done;           \
	FHSUM(Y15, X15, 28)

#define COLF32(acc) \
	VFMADD231PS (R9), Y0, acc; \
	ADDQ R8, R9

#define COLF16(acc) \
	VCVTPH2PS (R9), Y1;        \
	VFMADD231PS Y1, Y0, acc;   \
	ADDQ R8, R9

// func dotF32AVX2(out *float32, w, a *byte, aStride, n8, n int)
TEXT ·dotF32AVX2(SB), NOSPLIT, $0-48
	FARGS
	FZERO8
	TESTQ CX, CX
	JZ    f32done

	PCALIGN $16
f32loop:
	VMOVUPS (SI), Y0
	FEACHCOL(COLF32, f32next)

f32next:
	ADDQ $32, SI
	ADDQ $32, DX
	DECQ CX
	JNZ  f32loop

f32done:
	FSTOREALL(f32ret)

f32ret:
	VZEROUPPER
	RET

// func dotF16AVX2(out *float32, w, a *byte, aStride, n8, n int)
TEXT ·dotF16AVX2(SB), NOSPLIT, $0-48
	FARGS
	FZERO8
	TESTQ CX, CX
	JZ    f16done

	PCALIGN $16
f16loop:
	VCVTPH2PS (SI), Y0
	FEACHCOL(COLF16, f16next)

f16next:
	ADDQ $16, SI
	ADDQ $16, DX
	DECQ CX
	JNZ  f16loop

f16done:
	FSTOREALL(f16ret)

f16ret:
	VZEROUPPER
	RET

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
