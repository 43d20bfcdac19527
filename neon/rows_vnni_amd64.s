//go:build amd64 && !purego

#include "textflag.h"
#include "rows_amd64.h"

// AVX-512 VNNI row-group kernels (the avx512vnni set): the same scheme as
// the AVX2 ones in rows_amd64.s (8 rows transposed once per block so that
// lane r of chunk c holds row r's 4 quants of values 4c..4c+3; columns
// inner; the sums of a column in the 8 int32 lanes of one vector; the
// outputs accumulate in out; the next row group prefetched linearly), with
// the integer work done by VPDPBUSD on 256-bit registers (EVEX, AVX512VL):
// per column and chunk one VPDPBUSD of the chunk (unsigned bytes) with the
// column's activation dword c broadcast from memory (signed bytes), 4
// products summed into each int32 lane without any int16 step.
//
// The weights enter as unsigned bytes u = q + o (Q4_0: the nibble, value
// q = u - 8; Q5_0: the 5-bit quant, q = u - 16; Q8_0: w XOR 0x80 = w + 128)
// so sum q*a = sum u*a - o*sum a, with o*sum a formed once per column
// block by one VPDPBUSD of o bytes with the 32 activation bytes and a
// horizontal sum. Every intermediate is exact in int32 (|sum u*a| <=
// 32*255*128), so the integer sums equal the generic ones for any bytes
// (Q8_0 needs no -128 special case). The float part is the AVX2 kernels'
// to the instruction: (sumi*dw)*da for Q4_0, sumi*(dw*da) for Q5_0 and
// Q8_0, separate multiplies and adds, blocks added in order; so every
// output is bit-identical to the generic one-row dot.
//
// Registers: DI out, SI row 0's block, AX row 4's block (unpack) or the
// columns left, R10 wStride, R11 3*wStride, DX column 0's block, R8
// aStride, CX ldo*4, BX n, R12 blocks left, R9 the column's block, R14 the
// column's outputs, R13 the prefetch address. Y8..Y15 the chunks, Y6 the
// rows' dw, Y7 the o bytes.

// VSUMS leaves in Y1 the 8 rows' exact sums q*a with the column block at
// R9: the chunks' VPDPBUSD in two chains (Y0, Y1) and o*sum a (Y7 the o
// bytes) summed over the 8 dwords in Y2 (temporary Y3).
#define VSUMS \
	VPXOR         Y2, Y2, Y2;      \
	VPDPBUSD      2(R9), Y7, Y2;   \
	VPXOR         Y0, Y0, Y0;      \
	VPXOR         Y1, Y1, Y1;      \
	VPDPBUSD.BCST 2(R9), Y8, Y0;   \
	VPDPBUSD.BCST 6(R9), Y9, Y1;   \
	VPDPBUSD.BCST 10(R9), Y10, Y0; \
	VPDPBUSD.BCST 14(R9), Y11, Y1; \
	VPSHUFD       $0x4e, Y2, Y3;   \
	VPADDD        Y3, Y2, Y2;      \
	VPDPBUSD.BCST 18(R9), Y12, Y0; \
	VPDPBUSD.BCST 22(R9), Y13, Y1; \
	VPSHUFD       $0xb1, Y2, Y3;   \
	VPADDD        Y3, Y2, Y2;      \
	VPDPBUSD.BCST 26(R9), Y14, Y0; \
	VPDPBUSD.BCST 30(R9), Y15, Y1; \
	VPERM2I128    $0x01, Y2, Y2, Y3; \
	VPADDD        Y3, Y2, Y2;      \
	VPADDD        Y0, Y1, Y1;      \
	VPSUBD        Y2, Y1, Y1

// func rowsQ4_0Q8_0VNNI(out *float32, ldo int, w *byte, wStride int, a *byte, aStride, nb, n int)
TEXT ·rowsQ4_0Q8_0VNNI(SB), NOSPLIT, $8-64
	RARGS
	RZERO(q4zero)
	VMOVDQU reights<>(SB), Y7
	PFINIT(R13, R9)

	PCALIGN $16
q4block:
	LEAQ    (SI)(R10*4), AX
	PFNEXT(R13)
	UNPACK_Q4
	RDW
	MOVQ    DX, R9
	MOVQ    DI, R14
	MOVQ    BX, AX

	PCALIGN $16
q4col:
	VSUMS
	FAC_Q4
	RACC
	JNZ q4col

	ADDQ $18, SI
	ADDQ $34, DX
	DECQ R12
	JNZ  q4block
	VZEROUPPER
	RET

// func rowsQ5_0Q8_0VNNI(out *float32, ldo int, w *byte, wStride int, a *byte, aStride, nb, n int)
TEXT ·rowsQ5_0Q8_0VNNI(SB), NOSPLIT, $8-64
	RARGS
	RZERO(q5zero)
	VMOVDQU rsixteens<>(SB), Y7
	PFINIT(R13, R9)

	PCALIGN $16
q5block:
	LEAQ        (SI)(R10*4), AX
	PFNEXT(R13)
	UNPACK_Q5
	RDW
	MOVQ        DX, R9
	MOVQ        DI, R14
	MOVQ        BX, AX

	PCALIGN $16
q5col:
	VSUMS
	FAC_DD
	RACC
	JNZ q5col

	ADDQ $22, SI
	ADDQ $34, DX
	DECQ R12
	JNZ  q5block
	VZEROUPPER
	RET

// func rowsQ8_0Q8_0VNNI(out *float32, ldo int, w *byte, wStride int, a *byte, aStride, nb, n int)
//
// Q8_0: the transposed int8 weights XOR 0x80 (w + 128 as unsigned bytes),
// o = 128.
TEXT ·rowsQ8_0Q8_0VNNI(SB), NOSPLIT, $8-64
	RARGS
	RZERO(q8zero)
	VMOVDQU rx80<>(SB), Y7
	PFINIT(R13, R9)

	PCALIGN $16
q8block:
	LEAQ    (SI)(R10*4), AX
	PFNEXT5(R13)
	UNPACK_Q8
	RDW
	MOVQ    DX, R9
	MOVQ    DI, R14
	MOVQ    BX, AX

	PCALIGN $16
q8col:
	VSUMS
	FAC_DD
	RACC
	JNZ q8col

	ADDQ $34, SI
	ADDQ $34, DX
	DECQ R12
	JNZ  q8block
	VZEROUPPER
	RET
