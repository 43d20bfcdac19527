//go:build amd64 && !purego

#include "textflag.h"

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

DATA vnib<>+0(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA vnib<>+8(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA vnib<>+16(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA vnib<>+24(SB)/8, $0x0f0f0f0f0f0f0f0f
GLOBL vnib<>(SB), RODATA|NOPTR, $32

DATA veights<>+0(SB)/8, $0x0808080808080808
DATA veights<>+8(SB)/8, $0x0808080808080808
DATA veights<>+16(SB)/8, $0x0808080808080808
DATA veights<>+24(SB)/8, $0x0808080808080808
GLOBL veights<>(SB), RODATA|NOPTR, $32

DATA vsixteens<>+0(SB)/8, $0x1010101010101010
DATA vsixteens<>+8(SB)/8, $0x1010101010101010
DATA vsixteens<>+16(SB)/8, $0x1010101010101010
DATA vsixteens<>+24(SB)/8, $0x1010101010101010
GLOBL vsixteens<>(SB), RODATA|NOPTR, $32

DATA vx80<>+0(SB)/8, $0x8080808080808080
DATA vx80<>+8(SB)/8, $0x8080808080808080
DATA vx80<>+16(SB)/8, $0x8080808080808080
DATA vx80<>+24(SB)/8, $0x8080808080808080
GLOBL vx80<>(SB), RODATA|NOPTR, $32

#define VARGS \
	MOVQ out+0(FP), DI;       \
	MOVQ ldo+8(FP), CX;       \
	SHLQ $2, CX;              \
	MOVQ w+16(FP), SI;        \
	MOVQ wStride+24(FP), R10; \
	LEAQ (R10)(R10*2), R11;   \
	MOVQ a+32(FP), DX;        \
	MOVQ aStride+40(FP), R8;  \
	MOVQ nb+48(FP), R12;      \
	MOVQ n+56(FP), BX

// VPFINIT and VPFNEXT: the linear prefetch of the next row group, as in
// rows_amd64.s (PFINIT, PFNEXT): each block step fetches 8 blocks' worth
// of the next group's 8*wStride bytes; prefetches never fault.
#define VPFINIT(T, U) \
	LEAQ (R10*8), T; \
	MOVQ SI, U;      \
	SHLQ $3, U;      \
	SUBQ SI, U;      \
	SUBQ U, T;       \
	MOVQ T, pf-8(SP)

#define VPFNEXT(T) \
	MOVQ       pf-8(SP), T;  \
	LEAQ       (T)(SI*8), T; \
	PREFETCHT0 (T);          \
	PREFETCHT0 64(T);        \
	PREFETCHT0 128(T)

#define VPFNEXT5(T) \
	VPFNEXT(T);              \
	PREFETCHT0 192(T);       \
	PREFETCHT0 256(T)

// VZERO zeroes the n columns' 8 outputs.
#define VZERO(loop) \
	VXORPS  Y0, Y0, Y0; \
	MOVQ    DI, R14;    \
	MOVQ    BX, AX;     \
loop:                   \
	VMOVUPS Y0, (R14);  \
	ADDQ    CX, R14;    \
	DECQ    AX;         \
	JNZ     loop

// VDW gathers the F16 scales of the 8 rows' blocks into Y6 as float32
// (AX = row 4's block; uses R9).
#define VDW \
	MOVWLZX (SI), R9;                  \
	VMOVD   R9, X6;                    \
	VPINSRW $1, (SI)(R10*1), X6, X6;   \
	VPINSRW $2, (SI)(R10*2), X6, X6;   \
	VPINSRW $3, (SI)(R11*1), X6, X6;   \
	VPINSRW $4, (AX), X6, X6;          \
	VPINSRW $5, (AX)(R10*1), X6, X6;   \
	VPINSRW $6, (AX)(R10*2), X6, X6;   \
	VPINSRW $7, (AX)(R11*1), X6, X6;   \
	VCVTPH2PS X6, Y6

// VTRANS4 loads the 16 bytes at off of the 8 rows' blocks and transposes
// them into Y2..Y5: lane r of Yk+2 = row r's dword k (uses Y0..Y5).
#define VTRANS4(off) \
	VMOVDQU      off(SI), X0;                       \
	VINSERTI128  $1, off(AX), Y0, Y0;               \
	VMOVDQU      off(SI)(R10*1), X1;                \
	VINSERTI128  $1, off(AX)(R10*1), Y1, Y1;        \
	VMOVDQU      off(SI)(R10*2), X2;                \
	VINSERTI128  $1, off(AX)(R10*2), Y2, Y2;        \
	VMOVDQU      off(SI)(R11*1), X3;                \
	VINSERTI128  $1, off(AX)(R11*1), Y3, Y3;        \
	VPUNPCKLDQ   Y1, Y0, Y4;                        \
	VPUNPCKHDQ   Y1, Y0, Y5;                        \
	VPUNPCKLDQ   Y3, Y2, Y0;                        \
	VPUNPCKHDQ   Y3, Y2, Y1;                        \
	VPUNPCKLQDQ  Y0, Y4, Y2;                        \
	VPUNPCKHQDQ  Y0, Y4, Y3;                        \
	VPUNPCKLQDQ  Y1, Y5, Y4;                        \
	VPUNPCKHQDQ  Y1, Y5, Y5

// VNIBS splits D (dword k of every row) into the low nibbles lo (chunk k)
// and the high nibbles hi (chunk k+4), Y6 vnib.
#define VNIBS(D, lo, hi) \
	VPAND  Y6, D, lo;  \
	VPSRLW $4, D, D;   \
	VPAND  Y6, D, hi

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

// The float factors of the column (int sums in Y1, dw in Y6), as in
// rows_amd64.s: (sumi*dw)*da and sumi*(dw*da).
#define VFAC_Q4 \
	VCVTDQ2PS    Y1, Y1;     \
	VPBROADCASTW (R9), X3;   \
	VCVTPH2PS    X3, Y3;     \
	VMULPS       Y6, Y1, Y1; \
	VMULPS       Y3, Y1, Y1

#define VFAC_DD \
	VCVTDQ2PS    Y1, Y1;     \
	VPBROADCASTW (R9), X3;   \
	VCVTPH2PS    X3, Y3;     \
	VMULPS       Y6, Y3, Y3; \
	VMULPS       Y3, Y1, Y1

// VACC adds Y1 to the column's outputs and steps to the next column.
#define VACC \
	VADDPS  (R14), Y1, Y1; \
	VMOVUPS Y1, (R14);     \
	ADDQ    R8, R9;        \
	ADDQ    CX, R14;       \
	DECQ    AX

// func rowsQ4_0Q8_0VNNI(out *float32, ldo int, w *byte, wStride int, a *byte, aStride, nb, n int)
TEXT ·rowsQ4_0Q8_0VNNI(SB), NOSPLIT, $8-64
	VARGS
	VZERO(q4zero)
	VMOVDQU veights<>(SB), Y7
	VPFINIT(R13, R9)

	PCALIGN $16
q4block:
	LEAQ    (SI)(R10*4), AX
	VPFNEXT(R13)
	VTRANS4(2)
	VMOVDQU vnib<>(SB), Y6
	VNIBS(Y2, Y8, Y12)
	VNIBS(Y3, Y9, Y13)
	VNIBS(Y4, Y10, Y14)
	VNIBS(Y5, Y11, Y15)
	VDW
	MOVQ    DX, R9
	MOVQ    DI, R14
	MOVQ    BX, AX

	PCALIGN $16
q4col:
	VSUMS
	VFAC_Q4
	VACC
	JNZ q4col

	ADDQ $18, SI
	ADDQ $34, DX
	DECQ R12
	JNZ  q4block
	VZEROUPPER
	RET

// vrep: VPSHUFB controls repeating byte k of every dword 4 times (k = 0..3
// at 32k).
DATA vrep<>+0(SB)/8, $0x0404040400000000
DATA vrep<>+8(SB)/8, $0x0c0c0c0c08080808
DATA vrep<>+16(SB)/8, $0x0404040400000000
DATA vrep<>+24(SB)/8, $0x0c0c0c0c08080808
DATA vrep<>+32(SB)/8, $0x0505050501010101
DATA vrep<>+40(SB)/8, $0x0d0d0d0d09090909
DATA vrep<>+48(SB)/8, $0x0505050501010101
DATA vrep<>+56(SB)/8, $0x0d0d0d0d09090909
DATA vrep<>+64(SB)/8, $0x0606060602020202
DATA vrep<>+72(SB)/8, $0x0e0e0e0e0a0a0a0a
DATA vrep<>+80(SB)/8, $0x0606060602020202
DATA vrep<>+88(SB)/8, $0x0e0e0e0e0a0a0a0a
DATA vrep<>+96(SB)/8, $0x0707070703030303
DATA vrep<>+104(SB)/8, $0x0f0f0f0f0b0b0b0b
DATA vrep<>+112(SB)/8, $0x0707070703030303
DATA vrep<>+120(SB)/8, $0x0f0f0f0f0b0b0b0b
GLOBL vrep<>(SB), RODATA|NOPTR, $128

// vbits: byte k of every dword has bit k (low nibble), then bit k+4.
DATA vbits<>+0(SB)/8, $0x0804020108040201
DATA vbits<>+8(SB)/8, $0x0804020108040201
DATA vbits<>+16(SB)/8, $0x0804020108040201
DATA vbits<>+24(SB)/8, $0x0804020108040201
DATA vbits<>+32(SB)/8, $0x8040201080402010
DATA vbits<>+40(SB)/8, $0x8040201080402010
DATA vbits<>+48(SB)/8, $0x8040201080402010
DATA vbits<>+56(SB)/8, $0x8040201080402010
GLOBL vbits<>(SB), RODATA|NOPTR, $64

// VHBIT ors 16 into the bytes of chunk Y whose bit (vbits at off) is set
// in the repeated qh bytes of Y1 (Y7 vsixteens).
#define VHBIT(off, Y) \
	VPAND    vbits<>+off(SB), Y1, Y2; \
	VPCMPEQB vbits<>+off(SB), Y2, Y2; \
	VPAND    Y7, Y2, Y2;              \
	VPOR     Y2, Y, Y

// func rowsQ5_0Q8_0VNNI(out *float32, ldo int, w *byte, wStride int, a *byte, aStride, nb, n int)
TEXT ·rowsQ5_0Q8_0VNNI(SB), NOSPLIT, $8-64
	VARGS
	VZERO(q5zero)
	VMOVDQU vsixteens<>(SB), Y7
	VPFINIT(R13, R9)

	PCALIGN $16
q5block:
	LEAQ        (SI)(R10*4), AX
	VPFNEXT(R13)
	VTRANS4(6)
	VMOVDQU     vnib<>(SB), Y6
	VNIBS(Y2, Y8, Y12)
	VNIBS(Y3, Y9, Y13)
	VNIBS(Y4, Y10, Y14)
	VNIBS(Y5, Y11, Y15)
	VMOVD       2(SI), X0
	VPINSRD     $1, 2(SI)(R10*1), X0, X0
	VPINSRD     $2, 2(SI)(R10*2), X0, X0
	VPINSRD     $3, 2(SI)(R11*1), X0, X0
	VMOVD       2(AX), X1
	VPINSRD     $1, 2(AX)(R10*1), X1, X1
	VPINSRD     $2, 2(AX)(R10*2), X1, X1
	VPINSRD     $3, 2(AX)(R11*1), X1, X1
	VINSERTI128 $1, X1, Y0, Y0
	VPSHUFB     vrep<>+0(SB), Y0, Y1
	VHBIT(0, Y8)
	VHBIT(32, Y9)
	VPSHUFB     vrep<>+32(SB), Y0, Y1
	VHBIT(0, Y10)
	VHBIT(32, Y11)
	VPSHUFB     vrep<>+64(SB), Y0, Y1
	VHBIT(0, Y12)
	VHBIT(32, Y13)
	VPSHUFB     vrep<>+96(SB), Y0, Y1
	VHBIT(0, Y14)
	VHBIT(32, Y15)
	VDW
	MOVQ        DX, R9
	MOVQ        DI, R14
	MOVQ        BX, AX

	PCALIGN $16
q5col:
	VSUMS
	VFAC_DD
	VACC
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
	VARGS
	VZERO(q8zero)
	VMOVDQU vx80<>(SB), Y7
	VPFINIT(R13, R9)

	PCALIGN $16
q8block:
	LEAQ    (SI)(R10*4), AX
	VPFNEXT5(R13)
	VTRANS4(2)
	VPXOR   Y7, Y2, Y8
	VPXOR   Y7, Y3, Y9
	VPXOR   Y7, Y4, Y10
	VPXOR   Y7, Y5, Y11
	VTRANS4(18)
	VPXOR   Y7, Y2, Y12
	VPXOR   Y7, Y3, Y13
	VPXOR   Y7, Y4, Y14
	VPXOR   Y7, Y5, Y15
	VDW
	MOVQ    DX, R9
	MOVQ    DI, R14
	MOVQ    BX, AX

	PCALIGN $16
q8col:
	VSUMS
	VFAC_DD
	VACC
	JNZ q8col

	ADDQ $34, SI
	ADDQ $34, DX
	DECQ R12
	JNZ  q8block
	VZEROUPPER
	RET
