//go:build amd64 && !purego

#include "textflag.h"
#include "rows_amd64.h"

// AVX-512 VNNI tile kernels (the avx512vnni set's Tile kernels): RowGroup
// weight rows × n activation columns like the row-group kernels in
// rows_vnni_amd64.s, but over activations packed once per matrix product
// (packQ8_0VNNI) and with the outputs of up to 12 columns in registers for
// the whole row.
//
// The packed activations hold, per block b and column j, a 40-byte entry
// at (b*n + j)*40: the 32 int8 quants, the int32 -o*sum(quants) (o = 8, 16
// or 128, the weight type's unsigned offset) and the float32 scale da. So
// per column and block the kernel needs no offset correction of its own
// (the VPDPBUSD chain starts from -o*sum a), no F16 conversion (da is a
// broadcast memory operand) and no load or store of its outputs (they
// stay in Y16..Y27); the 8 rows' blocks are unpacked once per block for a
// tile of up to 12 columns (a verification batch of 1 + 8..11 drafted
// tokens is one tile). The integer sums are exact and the float
// steps are those of the row-group kernels to the instruction
// ((sumi*dw)*da for Q4_0, sumi*(dw*da) for Q5_0 and Q8_0, added to the
// running sum block after block), so every output is bit-identical to the
// generic one-row dot.
//
// Registers: R14 out (the tile's first column), CX ldo*4, SI row 0's
// block, AX row 4's block, R10 wStride, R11 3*wStride, DX the tile's
// first packed entry of block 0, R9 the tile's entry of the current block,
// R8 n*40 (one block's entries), BX columns left, DI the tile's columns,
// R12 blocks left, R13 the prefetch address and RDW's temporary. Y8..Y15
// the unpacked chunks, Y6 the rows' dw, Y7 the Q5_0/Q8_0 constant,
// Y16..Y27 the tile's sums, Y28..Y31 the columns' integer chains.

#define PE 40
#define MAXT 12

// TSUMS leaves in C1 the 8 rows' exact sums q*a of the column whose entry
// is at off(R9): two VPDPBUSD chains, C0 starting from -o*sum a.
#define TSUMS(off, C0, C1) \
	VPBROADCASTD  off+32(R9), C0;      \
	VPXORD        C1, C1, C1;          \
	VPDPBUSD.BCST off+0(R9), Y8, C0;   \
	VPDPBUSD.BCST off+4(R9), Y9, C1;   \
	VPDPBUSD.BCST off+8(R9), Y10, C0;  \
	VPDPBUSD.BCST off+12(R9), Y11, C1; \
	VPDPBUSD.BCST off+16(R9), Y12, C0; \
	VPDPBUSD.BCST off+20(R9), Y13, C1; \
	VPDPBUSD.BCST off+24(R9), Y14, C0; \
	VPDPBUSD.BCST off+28(R9), Y15, C1; \
	VPADDD        C0, C1, C1;          \
	VCVTDQ2PS     C1, C1

// TCOL4 adds a column's block to ACC for Q4_0: (sumi*dw)*da.
#define TCOL4(off, C0, C1, ACC) \
	TSUMS(off, C0, C1);             \
	VMULPS      Y6, C1, C1;         \
	VMULPS.BCST off+36(R9), C1, C1; \
	VADDPS      C1, ACC, ACC

// TCOLD adds a column's block to ACC for Q5_0 and Q8_0: sumi*(dw*da).
#define TCOLD(off, C0, C1, ACC) \
	TSUMS(off, C0, C1);             \
	VMULPS.BCST off+36(R9), Y6, C0; \
	VMULPS      C0, C1, C1;         \
	VADDPS      C1, ACC, ACC

// TARGS loads the arguments (and the prefetch offset, see PFINIT).
#define TARGS \
	MOVQ   out+0(FP), R14;      \
	MOVQ   ldo+8(FP), CX;       \
	SHLQ   $2, CX;              \
	MOVQ   w+16(FP), SI;        \
	MOVQ   wStride+24(FP), R10; \
	LEAQ   (R10)(R10*2), R11;   \
	MOVQ   pack+32(FP), DX;     \
	MOVQ   n+48(FP), BX;        \
	IMUL3Q $PE, BX, R8;         \
	PFINIT(R13, R9)

// TILES runs tiles of T = min(columns left, MAXT) columns until none are
// left, then returns. Column position p (0..MAXT-1) sums into Y16+p from
// the packed entry at p*PE(R9); a tile of T columns takes the last T
// positions (R9 set back by MAXT-T entries), entered by a jump on T in
// every block and again for the stores (labels are local to a TEXT
// block). Per block the 8 rows are unpacked (UNPACK, blocks of wsz bytes)
// once for all T columns. DI holds T. The integer chains of even
// positions use Y28, Y29, of odd ones Y30, Y31 (renaming makes every
// column independent).
#define TILES(UNPACK, PFN, COL, wsz) \
tile:                                       \
	TESTQ BX, BX;                       \
	JZ end;                             \
	MOVQ $MAXT, DI;                     \
	CMPQ BX, DI;                        \
	CMOVQLT BX, DI;                     \
	VPXORD Y16, Y16, Y16;               \
	VPXORD Y17, Y17, Y17;               \
	VPXORD Y18, Y18, Y18;               \
	VPXORD Y19, Y19, Y19;               \
	VPXORD Y20, Y20, Y20;               \
	VPXORD Y21, Y21, Y21;               \
	VPXORD Y22, Y22, Y22;               \
	VPXORD Y23, Y23, Y23;               \
	VPXORD Y24, Y24, Y24;               \
	VPXORD Y25, Y25, Y25;               \
	VPXORD Y26, Y26, Y26;               \
	VPXORD Y27, Y27, Y27;               \
	IMUL3Q $PE, DI, AX;                 \
	LEAQ -(MAXT*PE)(DX)(AX*1), R9;      \
	MOVQ w+16(FP), SI;                  \
	MOVQ nb+40(FP), R12;                \
blk:                                        \
	LEAQ (SI)(R10*4), AX;               \
	PFN(R13);                           \
	UNPACK;                             \
	RDWT(R13);                          \
	CMPQ DI, $12;                       \
	JEQ c0;                             \
	CMPQ DI, $11;                       \
	JEQ c1;                             \
	CMPQ DI, $10;                       \
	JEQ c2;                             \
	CMPQ DI, $9;                        \
	JEQ c3;                             \
	CMPQ DI, $8;                        \
	JEQ c4;                             \
	CMPQ DI, $7;                        \
	JEQ c5;                             \
	CMPQ DI, $6;                        \
	JEQ c6;                             \
	CMPQ DI, $5;                        \
	JEQ c7;                             \
	CMPQ DI, $4;                        \
	JEQ c8;                             \
	CMPQ DI, $3;                        \
	JEQ c9;                             \
	CMPQ DI, $2;                        \
	JEQ c10;                            \
	JMP c11;                            \
c0:                                         \
	COL(0*PE, Y28, Y29, Y16);           \
c1:                                         \
	COL(1*PE, Y30, Y31, Y17);           \
c2:                                         \
	COL(2*PE, Y28, Y29, Y18);           \
c3:                                         \
	COL(3*PE, Y30, Y31, Y19);           \
c4:                                         \
	COL(4*PE, Y28, Y29, Y20);           \
c5:                                         \
	COL(5*PE, Y30, Y31, Y21);           \
c6:                                         \
	COL(6*PE, Y28, Y29, Y22);           \
c7:                                         \
	COL(7*PE, Y30, Y31, Y23);           \
c8:                                         \
	COL(8*PE, Y28, Y29, Y24);           \
c9:                                         \
	COL(9*PE, Y30, Y31, Y25);           \
c10:                                        \
	COL(10*PE, Y28, Y29, Y26);          \
c11:                                        \
	COL(11*PE, Y30, Y31, Y27);          \
	ADDQ $wsz, SI;                      \
	ADDQ R8, R9;                        \
	DECQ R12;                           \
	JNZ blk;                            \
	CMPQ DI, $12;                       \
	JEQ s0;                             \
	CMPQ DI, $11;                       \
	JEQ s1;                             \
	CMPQ DI, $10;                       \
	JEQ s2;                             \
	CMPQ DI, $9;                        \
	JEQ s3;                             \
	CMPQ DI, $8;                        \
	JEQ s4;                             \
	CMPQ DI, $7;                        \
	JEQ s5;                             \
	CMPQ DI, $6;                        \
	JEQ s6;                             \
	CMPQ DI, $5;                        \
	JEQ s7;                             \
	CMPQ DI, $4;                        \
	JEQ s8;                             \
	CMPQ DI, $3;                        \
	JEQ s9;                             \
	CMPQ DI, $2;                        \
	JEQ s10;                            \
	JMP s11;                            \
s0:                                         \
	VMOVUPS Y16, (R14);                 \
	ADDQ CX, R14;                       \
s1:                                         \
	VMOVUPS Y17, (R14);                 \
	ADDQ CX, R14;                       \
s2:                                         \
	VMOVUPS Y18, (R14);                 \
	ADDQ CX, R14;                       \
s3:                                         \
	VMOVUPS Y19, (R14);                 \
	ADDQ CX, R14;                       \
s4:                                         \
	VMOVUPS Y20, (R14);                 \
	ADDQ CX, R14;                       \
s5:                                         \
	VMOVUPS Y21, (R14);                 \
	ADDQ CX, R14;                       \
s6:                                         \
	VMOVUPS Y22, (R14);                 \
	ADDQ CX, R14;                       \
s7:                                         \
	VMOVUPS Y23, (R14);                 \
	ADDQ CX, R14;                       \
s8:                                         \
	VMOVUPS Y24, (R14);                 \
	ADDQ CX, R14;                       \
s9:                                         \
	VMOVUPS Y25, (R14);                 \
	ADDQ CX, R14;                       \
s10:                                        \
	VMOVUPS Y26, (R14);                 \
	ADDQ CX, R14;                       \
s11:                                        \
	VMOVUPS Y27, (R14);                 \
	ADDQ CX, R14;                       \
	IMUL3Q $PE, DI, AX;                 \
	ADDQ AX, DX;                        \
	SUBQ DI, BX;                        \
	JMP tile;                           \
end:                                        \
	VZEROUPPER;                         \
	RET

// func tileQ4_0Q8_0VNNI(out *float32, ldo int, w *byte, wStride int, pack *byte, nb, n int)
TEXT ·tileQ4_0Q8_0VNNI(SB), NOSPLIT, $8-56
	TARGS
	TILES(UNPACK_Q4, PFNEXT, TCOL4, 18)

// func tileQ5_0Q8_0VNNI(out *float32, ldo int, w *byte, wStride int, pack *byte, nb, n int)
TEXT ·tileQ5_0Q8_0VNNI(SB), NOSPLIT, $8-56
	TARGS
	VMOVDQU rsixteens<>(SB), Y7
	TILES(UNPACK_Q5, PFNEXT, TCOLD, 22)

// func tileQ8_0Q8_0VNNI(out *float32, ldo int, w *byte, wStride int, pack *byte, nb, n int)
TEXT ·tileQ8_0Q8_0VNNI(SB), NOSPLIT, $8-56
	TARGS
	VMOVDQU rx80<>(SB), Y7
	TILES(UNPACK_Q8, PFNEXT5, TCOLD, 34)

DATA tones8<>+0(SB)/8, $0x0101010101010101
DATA tones8<>+8(SB)/8, $0x0101010101010101
DATA tones8<>+16(SB)/8, $0x0101010101010101
DATA tones8<>+24(SB)/8, $0x0101010101010101
GLOBL tones8<>(SB), RODATA|NOPTR, $32

// func packQ8_0VNNI(dst *byte, a *byte, aStride, nb, n, o int)
//
// For each block b and column j: the 32 quants of a[j*aStride + b*34:],
// -o*sum(quants) and the F16 scale as float32, at dst + (b*n + j)*40.
TEXT ·packQ8_0VNNI(SB), NOSPLIT, $0-48
	MOVQ    dst+0(FP), DI
	MOVQ    a+8(FP), SI
	MOVQ    aStride+16(FP), R8
	MOVQ    nb+24(FP), R12
	MOVQ    o+40(FP), R10
	NEGQ    R10
	VMOVDQU tones8<>(SB), Y7

pblock:
	MOVQ SI, R9
	MOVQ n+32(FP), BX

pcol:
	VMOVDQU      2(R9), Y0
	VMOVDQU      Y0, (DI)
	VPXOR        Y1, Y1, Y1
	VPDPBUSD     Y0, Y7, Y1
	VEXTRACTI128 $1, Y1, X2
	VPADDD       X2, X1, X1
	VPSHUFD      $0x4e, X1, X2
	VPADDD       X2, X1, X1
	VPSHUFD      $0xb1, X1, X2
	VPADDD       X2, X1, X1
	VMOVD        X1, AX
	IMULL        R10, AX
	MOVL         AX, 32(DI)
	MOVWLZX      (R9), AX
	VMOVD        AX, X3
	VCVTPH2PS    X3, X3
	VMOVSS       X3, 36(DI)
	ADDQ         $PE, DI
	ADDQ         R8, R9
	DECQ         BX
	JNZ          pcol

	ADDQ $34, SI
	DECQ R12
	JNZ  pblock
	VZEROUPPER
	RET
