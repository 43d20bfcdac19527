//go:build amd64 && !purego

#include "textflag.h"

// func deltaRow4AVX2(S, R, q, k *float32, n int, v *float32, beta, decay float32, o *float32)
// Four consecutive rows (row r at S+r·n, R+r·n) of the gated delta rule,
// n a multiple of 16, each row by exactly deltaRowAVX2's operations in its
// order (the same two 8-lane FMA accumulators per row, the same lane
// combination): o[r] and the rows are deltaRowAVX2's bits. The rows only
// share the loads of k and q and overlap their dependency chains (one row
// alone waits on its accumulators' FMA latency).
TEXT ·deltaRow4AVX2(SB), NOSPLIT, $0-64
	MOVQ         S+0(FP), DI
	MOVQ         R+8(FP), SI
	MOVQ         k+24(FP), BX
	MOVQ         n+32(FP), CX
	MOVQ         CX, AX
	SHLQ         $2, AX
	LEAQ         (AX)(AX*2), R12
	VBROADCASTSS decay+52(FP), Y15
	VXORPS       Y0, Y0, Y0
	VXORPS       Y1, Y1, Y1
	VXORPS       Y2, Y2, Y2
	VXORPS       Y3, Y3, Y3
	VXORPS       Y4, Y4, Y4
	VXORPS       Y5, Y5, Y5
	VXORPS       Y6, Y6, Y6
	VXORPS       Y7, Y7, Y7
	MOVQ         CX, R8

	PCALIGN $16
d4a:
	VMULPS      (SI), Y15, Y8
	VMULPS      32(SI), Y15, Y9
	VMOVUPS     Y8, (DI)
	VMOVUPS     Y9, 32(DI)
	VFMADD231PS (BX), Y8, Y0
	VFMADD231PS 32(BX), Y9, Y1
	VMULPS      (SI)(AX*1), Y15, Y10
	VMULPS      32(SI)(AX*1), Y15, Y11
	VMOVUPS     Y10, (DI)(AX*1)
	VMOVUPS     Y11, 32(DI)(AX*1)
	VFMADD231PS (BX), Y10, Y2
	VFMADD231PS 32(BX), Y11, Y3
	VMULPS      (SI)(AX*2), Y15, Y8
	VMULPS      32(SI)(AX*2), Y15, Y9
	VMOVUPS     Y8, (DI)(AX*2)
	VMOVUPS     Y9, 32(DI)(AX*2)
	VFMADD231PS (BX), Y8, Y4
	VFMADD231PS 32(BX), Y9, Y5
	VMULPS      (SI)(R12*1), Y15, Y10
	VMULPS      32(SI)(R12*1), Y15, Y11
	VMOVUPS     Y10, (DI)(R12*1)
	VMOVUPS     Y11, 32(DI)(R12*1)
	VFMADD231PS (BX), Y10, Y6
	VFMADD231PS 32(BX), Y11, Y7
	ADDQ        $64, SI
	ADDQ        $64, DI
	ADDQ        $64, BX
	SUBQ        $16, R8
	JNZ         d4a

	// delta_r = (v[r] - kv_r)·beta, as deltaRowAVX2 combines its lanes.
	MOVQ         v+40(FP), R9
	VADDPS       Y1, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VADDPS       X1, X0, X0
	VHADDPS      X0, X0, X0
	VHADDPS      X0, X0, X0
	VMOVSS       (R9), X8
	VSUBSS       X0, X8, X8
	VMULSS       beta+48(FP), X8, X8
	VBROADCASTSS X8, Y12
	VADDPS       Y3, Y2, Y2
	VEXTRACTF128 $1, Y2, X3
	VADDPS       X3, X2, X2
	VHADDPS      X2, X2, X2
	VHADDPS      X2, X2, X2
	VMOVSS       4(R9), X9
	VSUBSS       X2, X9, X9
	VMULSS       beta+48(FP), X9, X9
	VBROADCASTSS X9, Y13
	VADDPS       Y5, Y4, Y4
	VEXTRACTF128 $1, Y4, X5
	VADDPS       X5, X4, X4
	VHADDPS      X4, X4, X4
	VHADDPS      X4, X4, X4
	VMOVSS       8(R9), X10
	VSUBSS       X4, X10, X10
	VMULSS       beta+48(FP), X10, X10
	VBROADCASTSS X10, Y14
	VADDPS       Y7, Y6, Y6
	VEXTRACTF128 $1, Y6, X7
	VADDPS       X7, X6, X6
	VHADDPS      X6, X6, X6
	VHADDPS      X6, X6, X6
	VMOVSS       12(R9), X11
	VSUBSS       X6, X11, X11
	VMULSS       beta+48(FP), X11, X11
	VBROADCASTSS X11, Y15

	MOVQ   S+0(FP), DI
	MOVQ   q+16(FP), DX
	MOVQ   k+24(FP), BX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	MOVQ   CX, R8

	PCALIGN $16
d4b:
	VMOVUPS     (DI), Y8
	VMOVUPS     32(DI), Y9
	VFMADD231PS (BX), Y12, Y8
	VFMADD231PS 32(BX), Y12, Y9
	VMOVUPS     Y8, (DI)
	VMOVUPS     Y9, 32(DI)
	VFMADD231PS (DX), Y8, Y0
	VFMADD231PS 32(DX), Y9, Y1
	VMOVUPS     (DI)(AX*1), Y10
	VMOVUPS     32(DI)(AX*1), Y11
	VFMADD231PS (BX), Y13, Y10
	VFMADD231PS 32(BX), Y13, Y11
	VMOVUPS     Y10, (DI)(AX*1)
	VMOVUPS     Y11, 32(DI)(AX*1)
	VFMADD231PS (DX), Y10, Y2
	VFMADD231PS 32(DX), Y11, Y3
	VMOVUPS     (DI)(AX*2), Y8
	VMOVUPS     32(DI)(AX*2), Y9
	VFMADD231PS (BX), Y14, Y8
	VFMADD231PS 32(BX), Y14, Y9
	VMOVUPS     Y8, (DI)(AX*2)
	VMOVUPS     Y9, 32(DI)(AX*2)
	VFMADD231PS (DX), Y8, Y4
	VFMADD231PS 32(DX), Y9, Y5
	VMOVUPS     (DI)(R12*1), Y10
	VMOVUPS     32(DI)(R12*1), Y11
	VFMADD231PS (BX), Y15, Y10
	VFMADD231PS 32(BX), Y15, Y11
	VMOVUPS     Y10, (DI)(R12*1)
	VMOVUPS     Y11, 32(DI)(R12*1)
	VFMADD231PS (DX), Y10, Y6
	VFMADD231PS 32(DX), Y11, Y7
	ADDQ        $64, DI
	ADDQ        $64, DX
	ADDQ        $64, BX
	SUBQ        $16, R8
	JNZ         d4b

	MOVQ         o+56(FP), R9
	VADDPS       Y1, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VADDPS       X1, X0, X0
	VHADDPS      X0, X0, X0
	VHADDPS      X0, X0, X0
	VMOVSS       X0, (R9)
	VADDPS       Y3, Y2, Y2
	VEXTRACTF128 $1, Y2, X3
	VADDPS       X3, X2, X2
	VHADDPS      X2, X2, X2
	VHADDPS      X2, X2, X2
	VMOVSS       X2, 4(R9)
	VADDPS       Y5, Y4, Y4
	VEXTRACTF128 $1, Y4, X5
	VADDPS       X5, X4, X4
	VHADDPS      X4, X4, X4
	VHADDPS      X4, X4, X4
	VMOVSS       X4, 8(R9)
	VADDPS       Y7, Y6, Y6
	VEXTRACTF128 $1, Y6, X7
	VADDPS       X7, X6, X6
	VHADDPS      X6, X6, X6
	VHADDPS      X6, X6, X6
	VMOVSS       X6, 12(R9)
	VZEROUPPER
	RET
