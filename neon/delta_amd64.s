//go:build amd64 && !purego

#include "textflag.h"

// func deltaRowAVX2(S, R, q, k *float32, n int, v, beta, decay float32) float32
// One row of the gated delta rule, n a multiple of 16: S = decay·R while
// kv = S·k is summed (two 8-lane FMA accumulators), delta = (v-kv)·beta,
// then S += delta·k (FMA) while S·q is summed the same way. The lanes are
// combined (acc0+acc1, then the halves, then pairs): one order per row.
TEXT ·deltaRowAVX2(SB), NOSPLIT, $0-60
	MOVQ         S+0(FP), DI
	MOVQ         R+8(FP), SI
	MOVQ         q+16(FP), DX
	MOVQ         k+24(FP), BX
	MOVQ         n+32(FP), CX
	VBROADCASTSS decay+48(FP), Y15
	VXORPS       Y0, Y0, Y0
	VXORPS       Y1, Y1, Y1
	MOVQ         CX, R8
	XORQ         R9, R9

	PCALIGN $16
dr1:
	VMULPS      (SI)(R9*1), Y15, Y2
	VMULPS      32(SI)(R9*1), Y15, Y3
	VMOVUPS     Y2, (DI)(R9*1)
	VMOVUPS     Y3, 32(DI)(R9*1)
	VFMADD231PS (BX)(R9*1), Y2, Y0
	VFMADD231PS 32(BX)(R9*1), Y3, Y1
	ADDQ        $64, R9
	SUBQ        $16, R8
	JNZ         dr1

	VADDPS       Y1, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VADDPS       X1, X0, X0
	VHADDPS      X0, X0, X0
	VHADDPS      X0, X0, X0
	VMOVSS       v+40(FP), X2
	VSUBSS       X0, X2, X2
	VMULSS       beta+44(FP), X2, X2
	VBROADCASTSS X2, Y14
	VXORPS       Y0, Y0, Y0
	VXORPS       Y1, Y1, Y1
	MOVQ         CX, R8
	XORQ         R9, R9

	PCALIGN $16
dr2:
	VMOVUPS     (DI)(R9*1), Y2
	VMOVUPS     32(DI)(R9*1), Y3
	VFMADD231PS (BX)(R9*1), Y14, Y2
	VFMADD231PS 32(BX)(R9*1), Y14, Y3
	VMOVUPS     Y2, (DI)(R9*1)
	VMOVUPS     Y3, 32(DI)(R9*1)
	VFMADD231PS (DX)(R9*1), Y2, Y0
	VFMADD231PS 32(DX)(R9*1), Y3, Y1
	ADDQ        $64, R9
	SUBQ        $16, R8
	JNZ         dr2

	VADDPS       Y1, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VADDPS       X1, X0, X0
	VHADDPS      X0, X0, X0
	VHADDPS      X0, X0, X0
	VMOVSS       X0, ret+56(FP)
	VZEROUPPER
	RET
