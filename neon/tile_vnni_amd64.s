//go:build amd64 && !purego

#include "textflag.h"
#include "rows_amd64.h"

// AVX-512 VNNI tile kernels (the avx512vnni set's Tile kernels): RowGroup
// weight rows × n activation columns like the row-group kernels in
// rows_vnni_amd64.s, but over activations packed once per matrix product
// (packQ8_0VNNI) and with the outputs of up to 8 columns in registers for
// the whole row.
//
// The packed activations hold, per block b and column j, a 40-byte entry
// at (b*n + j)*40: the 32 int8 quants, the int32 -o*sum(quants) (o = 8, 16
// or 128, the weight type's unsigned offset) and the float32 scale da. So
// per column and block the kernel needs no offset correction of its own
// (the VPDPBUSD chain starts from -o*sum a), no F16 conversion (da is a
// broadcast memory operand) and no load or store of its outputs (they
// stay in Y16..Y23); the 8 rows' blocks are unpacked once per block for a
// tile of 8, 4, 2 or 1 columns. The integer sums are exact and the float
// steps are those of the row-group kernels to the instruction
// ((sumi*dw)*da for Q4_0, sumi*(dw*da) for Q5_0 and Q8_0, added to the
// running sum block after block), so every output is bit-identical to the
// generic one-row dot.
//
// Registers: R14 out (the tile's first column), CX ldo*4, SI row 0's
// block, AX row 4's block, R10 wStride, R11 3*wStride, DX the tile's
// first packed entry of block 0, R9 the tile's entry of the current block,
// R8 n*40 (one block's entries), BX columns left, R12 blocks left, R13 the
// prefetch address and RDW's temporary. Y8..Y15 the unpacked chunks, Y6
// the rows' dw, Y7 the Q5_0/Q8_0 constant, Y16..Y23 the tile's sums,
// Y24..Y31 the columns' integer chains.

#define PE 40

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
	TSUMS(off, C0, C1);           \
	VMULPS      Y6, C1, C1;       \
	VMULPS.BCST off+36(R9), C1, C1; \
	VADDPS      C1, ACC, ACC

// TCOLD adds a column's block to ACC for Q5_0 and Q8_0: sumi*(dw*da).
#define TCOLD(off, C0, C1, ACC) \
	TSUMS(off, C0, C1);           \
	VMULPS.BCST off+36(R9), Y6, C0; \
	VMULPS      C0, C1, C1;       \
	VADDPS      C1, ACC, ACC

#define COLS1(COL) \
	COL(0, Y24, Y25, Y16)

#define COLS2(COL) \
	COL(0, Y24, Y25, Y16); \
	COL(PE, Y26, Y27, Y17)

#define COLS4(COL) \
	COL(0, Y24, Y25, Y16);    \
	COL(PE, Y26, Y27, Y17);   \
	COL(2*PE, Y28, Y29, Y18); \
	COL(3*PE, Y30, Y31, Y19)

#define COLS8(COL) \
	COLS4(COL);               \
	COL(4*PE, Y24, Y25, Y20); \
	COL(5*PE, Y26, Y27, Y21); \
	COL(6*PE, Y28, Y29, Y22); \
	COL(7*PE, Y30, Y31, Y23)

#define ZERO1 VPXORD Y16, Y16, Y16
#define ZERO2 ZERO1; VPXORD Y17, Y17, Y17
#define ZERO4 ZERO2; VPXORD Y18, Y18, Y18; VPXORD Y19, Y19, Y19
#define ZERO8 ZERO4; VPXORD Y20, Y20, Y20; VPXORD Y21, Y21, Y21; VPXORD Y22, Y22, Y22; VPXORD Y23, Y23, Y23

#define STORE1 VMOVUPS Y16, (R14); ADDQ CX, R14
#define STORE2 STORE1; VMOVUPS Y17, (R14); ADDQ CX, R14
#define STORE4 STORE2; VMOVUPS Y18, (R14); ADDQ CX, R14; VMOVUPS Y19, (R14); ADDQ CX, R14
#define STORE8 STORE4; VMOVUPS Y20, (R14); ADDQ CX, R14; VMOVUPS Y21, (R14); ADDQ CX, R14; VMOVUPS Y22, (R14); ADDQ CX, R14; VMOVUPS Y23, (R14); ADDQ CX, R14

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

// TILE runs the tiles of T columns while at least T are left: per tile
// every block of the 8 rows is unpacked (UNPACK, blocks of wsz bytes) and
// its columns added (COLS), then the T sums are stored.
#define TILE(T, tile, blk, next, ZERO, UNPACK, PFN, COLS, STORE, wsz) \
tile:                          \
	CMPQ BX, $T;               \
	JLT  next;                 \
	ZERO;                      \
	MOVQ w+16(FP), SI;         \
	MOVQ nb+40(FP), R12;       \
	MOVQ DX, R9;               \
blk:                           \
	LEAQ (SI)(R10*4), AX;      \
	PFN(R13);                  \
	UNPACK;                    \
	RDWT(R13);                 \
	COLS;                      \
	ADDQ $wsz, SI;             \
	ADDQ R8, R9;               \
	DECQ R12;                  \
	JNZ  blk;                  \
	STORE;                     \
	ADDQ $(T*PE), DX;          \
	SUBQ $T, BX;               \
	JMP  tile

// TILES runs the tiles of 8, 4, 2 and 1 columns (labels are local to
// each TEXT block) and returns.
#define TILES(UNPACK, PFN, COL, wsz) \
	TILE(8, t8, b8, t4, ZERO8, UNPACK, PFN, COLS8(COL), STORE8, wsz); \
	TILE(4, t4, b4, t2, ZERO4, UNPACK, PFN, COLS4(COL), STORE4, wsz); \
	TILE(2, t2, b2, t1, ZERO2, UNPACK, PFN, COLS2(COL), STORE2, wsz); \
	TILE(1, t1, b1, end, ZERO1, UNPACK, PFN, COLS1(COL), STORE1, wsz); \
end:                                                                 \
	VZEROUPPER;                                                      \
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
