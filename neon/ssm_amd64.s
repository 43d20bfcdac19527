//go:build amd64 && !purego

#include "textflag.h"

// func ssmStepAVX2(dst, src, x, B, C, y *float32, rows, n int, dt, dA float32)
// One Mamba-2 head's scan step (SSMStep) with outputs, rows even and n a
// multiple of 8, two rows at a time: per row v = src·dA + B·(x·dt) (each
// product rounded: VMULPS, then VADDPS, no FMA), stored, and acc += v·C
// in one 8-lane accumulator (lane = k mod 8); y = ((l0+l4)+(l1+l5)) +
// ((l2+l6)+(l3+l7)): the generic order, so the same bits.
TEXT ·ssmStepAVX2(SB), NOSPLIT, $0-72
	MOVQ         dst+0(FP), DI
	MOVQ         src+8(FP), SI
	MOVQ         x+16(FP), R10
	MOVQ         B+24(FP), BX
	MOVQ         C+32(FP), DX
	MOVQ         y+40(FP), R11
	MOVQ         rows+48(FP), R12
	MOVQ         n+56(FP), R13
	MOVQ         R13, R14
	SHLQ         $2, R14                // row stride in bytes
	VMOVSS       dt+64(FP), X12
	VBROADCASTSS dA+68(FP), Y15

rows2:
	VMOVSS       (R10), X0
	VMULSS       X12, X0, X0
	VBROADCASTSS X0, Y14                // x[p]·dt
	VMOVSS       4(R10), X1
	VMULSS       X12, X1, X1
	VBROADCASTSS X1, Y13                // x[p+1]·dt
	VXORPS       Y0, Y0, Y0
	VXORPS       Y1, Y1, Y1
	LEAQ         (SI)(R14*1), CX        // src row p+1
	LEAQ         (DI)(R14*1), AX        // dst row p+1
	MOVQ         R13, R8
	XORQ         R9, R9

	PCALIGN $16
k8:
	VMOVUPS (BX)(R9*1), Y2
	VMOVUPS (DX)(R9*1), Y3
	VMULPS  (SI)(R9*1), Y15, Y4
	VMULPS  Y2, Y14, Y5
	VADDPS  Y5, Y4, Y4
	VMOVUPS Y4, (DI)(R9*1)
	VMULPS  Y3, Y4, Y4
	VADDPS  Y4, Y0, Y0
	VMULPS  (CX)(R9*1), Y15, Y6
	VMULPS  Y2, Y13, Y7
	VADDPS  Y7, Y6, Y6
	VMOVUPS Y6, (AX)(R9*1)
	VMULPS  Y3, Y6, Y6
	VADDPS  Y6, Y1, Y1
	ADDQ    $32, R9
	SUBQ    $8, R8
	JNZ     k8

	VEXTRACTF128 $1, Y0, X2
	VADDPS       X2, X0, X0
	VHADDPS      X0, X0, X0
	VHADDPS      X0, X0, X0
	VMOVSS       X0, (R11)
	VEXTRACTF128 $1, Y1, X3
	VADDPS       X3, X1, X1
	VHADDPS      X1, X1, X1
	VHADDPS      X1, X1, X1
	VMOVSS       X1, 4(R11)

	ADDQ $8, R10
	ADDQ $8, R11
	LEAQ (SI)(R14*2), SI
	LEAQ (DI)(R14*2), DI
	SUBQ $2, R12
	JNZ  rows2
	VZEROUPPER
	RET

// func ssmDecayAVX2(dst, src, x, B *float32, rows, n int, dt, dA float32)
// SSMStep without outputs (a replay): dst = src·dA + B·(x·dt) row by row,
// each product rounded, n a multiple of 8, rows > 0.
TEXT ·ssmDecayAVX2(SB), NOSPLIT, $0-56
	MOVQ         dst+0(FP), DI
	MOVQ         src+8(FP), SI
	MOVQ         x+16(FP), R10
	MOVQ         B+24(FP), BX
	MOVQ         rows+32(FP), R12
	MOVQ         n+40(FP), R13
	VMOVSS       dt+48(FP), X12
	VBROADCASTSS dA+52(FP), Y15

row:
	VMOVSS       (R10), X0
	VMULSS       X12, X0, X0
	VBROADCASTSS X0, Y14
	MOVQ         R13, R8
	XORQ         R9, R9

	PCALIGN $16
d8:
	VMULPS  (SI)(R9*1), Y15, Y4
	VMULPS  (BX)(R9*1), Y14, Y5
	VADDPS  Y5, Y4, Y4
	VMOVUPS Y4, (DI)(R9*1)
	ADDQ    $32, R9
	SUBQ    $8, R8
	JNZ     d8

	ADDQ $4, R10
	ADDQ R9, SI
	ADDQ R9, DI
	SUBQ $1, R12
	JNZ  row
	VZEROUPPER
	RET
