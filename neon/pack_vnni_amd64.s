//go:build amd64 && !purego

#include "textflag.h"

// AVX-512 VNNI kernels over the packed layouts of pack_vnni_amd64.go:
// groups of 16 weight rows, one row per int32 lane of a zmm register.
// Per 32-value block a group holds the 16 rows' F16 scales (32 bytes),
// then chunk k of every row side by side (64 bytes: row r's dword k at
// 4r): for Q4_0 the 4 bytes of nibbles k (low nibbles values 4k..4k+3,
// high ones 16+4k..), for Q5_0 first the 16 rows' qh words, for Q8_0 the
// 8 chunks of quants already XORed with 0x80. So a block unpacks with
// whole-register loads and logic: no transposes, no scale gathers, one
// linear stream per group.
//
// The activations are prepared once per product (packQ8_0VNNI): per
// column and block a 40-byte entry holding the 32 quants, -o*sum(quants)
// (o = 8, 16, 128: the weights enter VPDPBUSD as the unsigned u = q + o)
// and the scale as float32; column j's entries are aStride bytes after
// column j-1's. Per column and block: two VPDPBUSD chains over the 8
// chunks with the activation dwords broadcast from memory (the first
// chain starting from -o*sum), their sum converted to float, then the
// generic float steps to the instruction: (sumi*dw)*da for Q4_0,
// sumi*(dw*da) for Q5_0 and Q8_0, added to the row's running sum block
// after block. The integer sums are exact, so every output is
// bit-identical to the generic one-row dot.
//
// Columns go in tiles of up to 16 (a verification batch of 1 + 15 drafted
// tokens is one tile), their sums in Z16..Z31 for the whole row of
// blocks: tile position p (0..15) reads its entries at the address
// POSp, from four column pointers R9 (position 0), R10 (5), R11 (10),
// R14 (15) and the strides R8 = aStride, R13 = 3*aStride. A tile of T
// columns takes positions 16-T..15 (the pointers are set back by 16-T
// columns), entered by a jump on T in every block.
//
// Registers: DI the tile's outputs (row 0 of the group, column 0 of the
// tile), CX ldo*4, SI the group's current block, R12 blocks left, BX
// columns left, DX the tile's first column, AX temporary, t-8(SP) the
// tile's width, grp-16(SP) and gout-24(SP) the group's first block and
// outputs, ng-32(SP) the groups left. Z8..Z15 the unpacked chunks, Z6 the rows' dw, Z7 the
// nibble mask, Z0..Z3 the integer chains, Z4 temporary.

#define POS0 0(R9)
#define POS1 0(R9)(R8*1)
#define POS2 0(R9)(R8*2)
#define POS3 0(R9)(R13*1)
#define POS4 0(R9)(R8*4)
#define POS5 0(R10)
#define POS6 0(R10)(R8*1)
#define POS7 0(R10)(R8*2)
#define POS8 0(R10)(R13*1)
#define POS9 0(R10)(R8*4)
#define POS10 0(R11)
#define POS11 0(R11)(R8*1)
#define POS12 0(R11)(R8*2)
#define POS13 0(R11)(R13*1)
#define POS14 0(R11)(R8*4)
#define POS15 0(R14)

// PSUMS leaves in C1 the 16 rows' exact sums q*a with the entry at m: two
// chains, C0 starting from -o*sum a.
#define PSUMS(m, C0, C1) \
	VPBROADCASTD  32+m, C0;      \
	VPXORD        C1, C1, C1;    \
	VPDPBUSD.BCST 0+m, Z8, C0;   \
	VPDPBUSD.BCST 4+m, Z9, C1;   \
	VPDPBUSD.BCST 8+m, Z10, C0;  \
	VPDPBUSD.BCST 12+m, Z11, C1; \
	VPDPBUSD.BCST 16+m, Z12, C0; \
	VPDPBUSD.BCST 20+m, Z13, C1; \
	VPDPBUSD.BCST 24+m, Z14, C0; \
	VPDPBUSD.BCST 28+m, Z15, C1; \
	VPADDD        C0, C1, C1;    \
	VCVTDQ2PS     C1, C1

// PSUMS1 is PSUMS in one chain (C1 unused): one VPADDD fewer per column
// and block, for the tile positions whose columns run 16 or 12 abreast
// (their chains overlap); the last four positions keep two chains, so
// that a tile of one to four columns (decoding) waits less on latency.
#define PSUMS1(m, C0, C1) \
	VPBROADCASTD  32+m, C1;      \
	VPDPBUSD.BCST 0+m, Z8, C1;   \
	VPDPBUSD.BCST 4+m, Z9, C1;   \
	VPDPBUSD.BCST 8+m, Z10, C1;  \
	VPDPBUSD.BCST 12+m, Z11, C1; \
	VPDPBUSD.BCST 16+m, Z12, C1; \
	VPDPBUSD.BCST 20+m, Z13, C1; \
	VPDPBUSD.BCST 24+m, Z14, C1; \
	VPDPBUSD.BCST 28+m, Z15, C1; \
	VCVTDQ2PS     C1, C1

// PCOL4 adds a column's block to ACC for Q4_0: (sumi*dw)*da (SUMS one of
// the above).
#define PCOL4(SUMS, m, C0, C1, ACC) \
	SUMS(m, C0, C1);             \
	VMULPS      Z6, C1, C1;      \
	VMULPS.BCST 36+m, C1, C1;    \
	VADDPS      C1, ACC, ACC

// PCOLD adds a column's block to ACC for Q5_0 and Q8_0: sumi*(dw*da).
#define PCOLD(SUMS, m, C0, C1, ACC) \
	SUMS(m, C0, C1);             \
	VMULPS.BCST 36+m, Z6, C0;    \
	VMULPS      C0, C1, C1;      \
	VADDPS      C1, ACC, ACC

// NIB16 splits chunk off of the block at SI into its low (lo) and high
// (hi) nibbles (Z7 the nibble mask; Z0 temporary).
#define NIB16(off, lo, hi) \
	VMOVDQU64 off(SI), Z0;  \
	VPSRLW    $4, Z0, hi;   \
	VPANDD    Z7, Z0, lo;   \
	VPANDD    Z7, hi, hi

// UNPACK_Q4X16: the 16 rows' dw in Z6, the unsigned quants of values
// 4c..4c+3 of every row in Z8+c.
#define UNPACK_Q4X16 \
	VCVTPH2PS (SI), Z6;        \
	NIB16(32, Z8, Z12);        \
	NIB16(96, Z9, Z13);        \
	NIB16(160, Z10, Z14);      \
	NIB16(224, Z11, Z15)

// QHBIT adds 16 to the bytes of chunk Z whose fifth bit is set: bits
// 4c..4c+3 of every row's qh (in Z5), byte c/2 repeated over the dword
// (shuffle sh), tested against 1,2,4,8 or 16,32,64,128 (bits).
#define QHBIT(sh, bits, Z) \
	VPSHUFB  sh, Z5, Z0;           \
	VPTESTMB bits, Z0, K1;         \
	VPADDB   p16s<>(SB), Z, K1, Z

#define UNPACK_Q5X16 \
	VCVTPH2PS (SI), Z6;        \
	NIB16(96, Z8, Z12);        \
	NIB16(160, Z9, Z13);       \
	NIB16(224, Z10, Z14);      \
	NIB16(288, Z11, Z15);      \
	VMOVDQU64 32(SI), Z5;      \
	QHBIT(pqh<>+0(SB), pbits<>+0(SB), Z8);    \
	QHBIT(pqh<>+0(SB), pbits<>+64(SB), Z9);   \
	QHBIT(pqh<>+64(SB), pbits<>+0(SB), Z10);  \
	QHBIT(pqh<>+64(SB), pbits<>+64(SB), Z11); \
	QHBIT(pqh<>+128(SB), pbits<>+0(SB), Z12); \
	QHBIT(pqh<>+128(SB), pbits<>+64(SB), Z13); \
	QHBIT(pqh<>+192(SB), pbits<>+0(SB), Z14); \
	QHBIT(pqh<>+192(SB), pbits<>+64(SB), Z15)

#define UNPACK_Q8X16 \
	VCVTPH2PS (SI), Z6;        \
	VMOVDQU64 32(SI), Z8;      \
	VMOVDQU64 96(SI), Z9;      \
	VMOVDQU64 160(SI), Z10;    \
	VMOVDQU64 224(SI), Z11;    \
	VMOVDQU64 288(SI), Z12;    \
	VMOVDQU64 352(SI), Z13;    \
	VMOVDQU64 416(SI), Z14;    \
	VMOVDQU64 480(SI), Z15

// PF prefetches the block bsz bytes x ahead of SI, one line per 64 bytes
// (pf5: 5 lines for blocks of up to 320 bytes, pf9: 9 for Q8_0's 544).
#define PF5(x) \
	PREFETCHT0 x(SI);     \
	PREFETCHT0 x+64(SI);  \
	PREFETCHT0 x+128(SI); \
	PREFETCHT0 x+192(SI); \
	PREFETCHT0 x+256(SI)

#define PF6(x) \
	PF5(x);               \
	PREFETCHT0 x+320(SI)

#define PF9(x) \
	PF5(x);               \
	PREFETCHT0 x+320(SI); \
	PREFETCHT0 x+384(SI); \
	PREFETCHT0 x+448(SI); \
	PREFETCHT0 x+512(SI)

// PSTEP moves the four column pointers to the next block's entries.
#define PSTEP \
	ADDQ $40, R9;  \
	ADDQ $40, R10; \
	ADDQ $40, R11; \
	ADDQ $40, R14

// PTILES(UNPACK, PF, COL, bsz): the kernel body. For every group: tiles
// of T = min(columns left, 16) columns; per block the group's 16 rows
// unpacked once (UNPACK, blocks of bsz bytes), then the tile's columns
// (COL), entered at position 16-T; at the end the T columns' 16 sums
// stored. Labels are local to the TEXT block.
#define PTILES(UNPACK, PF, COL, bsz) \
	MOVQ    out+0(FP), DI;            \
	MOVQ    ldo+8(FP), CX;            \
	SHLQ    $2, CX;                   \
	MOVQ    w+16(FP), SI;              \
	MOVQ    aStride+40(FP), R8;       \
	LEAQ    (R8)(R8*2), R13;          \
	MOVL    $0x0f0f0f0f, AX;          \
	VPBROADCASTD AX, Z7;              \
	MOVQ    groups+24(FP), AX;        \
	MOVQ    AX, ng-32(SP);            \
group:                                \
	MOVQ    a+32(FP), DX;             \
	MOVQ    n+56(FP), BX;             \
	MOVQ    SI, grp-16(SP);           \
	MOVQ    DI, gout-24(SP);          \
tile:                                 \
	MOVQ    $16, AX;                  \
	CMPQ    BX, AX;                   \
	CMOVQLT BX, AX;                   \
	MOVQ    AX, t-8(SP);              \
	NEGQ    AX;                       \
	ADDQ    $16, AX;                  \
	IMULQ   R8, AX;                   \
	MOVQ    DX, R9;                   \
	SUBQ    AX, R9;                   \
	LEAQ    (R9)(R8*4), R10;          \
	ADDQ    R8, R10;                  \
	LEAQ    (R10)(R8*4), R11;         \
	ADDQ    R8, R11;                  \
	LEAQ    (R11)(R8*4), R14;         \
	ADDQ    R8, R14;                  \
	VPXORD  Z16, Z16, Z16;            \
	VPXORD  Z17, Z17, Z17;            \
	VPXORD  Z18, Z18, Z18;            \
	VPXORD  Z19, Z19, Z19;            \
	VPXORD  Z20, Z20, Z20;            \
	VPXORD  Z21, Z21, Z21;            \
	VPXORD  Z22, Z22, Z22;            \
	VPXORD  Z23, Z23, Z23;            \
	VPXORD  Z24, Z24, Z24;            \
	VPXORD  Z25, Z25, Z25;            \
	VPXORD  Z26, Z26, Z26;            \
	VPXORD  Z27, Z27, Z27;            \
	VPXORD  Z28, Z28, Z28;            \
	VPXORD  Z29, Z29, Z29;            \
	VPXORD  Z30, Z30, Z30;            \
	VPXORD  Z31, Z31, Z31;            \
	MOVQ    grp-16(SP), SI;           \
	MOVQ    nb+48(FP), R12;           \
blk:                                  \
	PF(2048);                         \
	UNPACK;                           \
	MOVQ    t-8(SP), AX;              \
	CMPQ    AX, $16;                  \
	JEQ     c0;                       \
	CMPQ    AX, $1;                   \
	JEQ     c15;                      \
	CMPQ    AX, $8;                   \
	JGT     hi8;                      \
	JEQ     c8;                       \
	CMPQ    AX, $4;                   \
	JGT     hi4;                      \
	JEQ     c12;                      \
	CMPQ    AX, $3;                   \
	JEQ     c13;                      \
	JMP     c14;                      \
hi4:                                  \
	CMPQ    AX, $6;                   \
	JGT     hi6;                      \
	JEQ     c10;                      \
	JMP     c11;                      \
hi6:                                  \
	CMPQ    AX, $7;                   \
	JEQ     c9;                       \
	JMP     c8x;                      \
hi8:                                  \
	CMPQ    AX, $12;                  \
	JGT     hi12;                     \
	JEQ     c4;                       \
	CMPQ    AX, $10;                  \
	JGT     c5;                       \
	JEQ     c6;                       \
	JMP     c7;                       \
hi12:                                 \
	CMPQ    AX, $14;                  \
	JGT     hi14;                     \
	JEQ     c2;                       \
	JMP     c3;                       \
hi14:                                 \
	JMP     c1;                       \
c8x:                                  \
	JMP     c8;                       \
c0:                                   \
	COL(PSUMS1, POS0, Z0, Z1, Z16);           \
c1:                                   \
	COL(PSUMS1, POS1, Z2, Z3, Z17);           \
c2:                                   \
	COL(PSUMS1, POS2, Z0, Z1, Z18);           \
c3:                                   \
	COL(PSUMS1, POS3, Z2, Z3, Z19);           \
c4:                                   \
	COL(PSUMS1, POS4, Z0, Z1, Z20);           \
c5:                                   \
	COL(PSUMS1, POS5, Z2, Z3, Z21);           \
c6:                                   \
	COL(PSUMS1, POS6, Z0, Z1, Z22);           \
c7:                                   \
	COL(PSUMS1, POS7, Z2, Z3, Z23);           \
c8:                                   \
	COL(PSUMS1, POS8, Z0, Z1, Z24);           \
c9:                                   \
	COL(PSUMS1, POS9, Z2, Z3, Z25);           \
c10:                                  \
	COL(PSUMS1, POS10, Z0, Z1, Z26);          \
c11:                                  \
	COL(PSUMS1, POS11, Z2, Z3, Z27);          \
c12:                                  \
	COL(PSUMS, POS12, Z0, Z1, Z28);          \
c13:                                  \
	COL(PSUMS, POS13, Z2, Z3, Z29);          \
c14:                                  \
	COL(PSUMS, POS14, Z0, Z1, Z30);          \
c15:                                  \
	COL(PSUMS, POS15, Z2, Z3, Z31);          \
	PSTEP;                            \
	ADDQ    $bsz, SI;                 \
	DECQ    R12;                      \
	JNZ     blk;                      \
	MOVQ    t-8(SP), AX;              \
	CMPQ    AX, $16;                  \
	JEQ     s0;                       \
	CMPQ    AX, $1;                   \
	JEQ     s15;                      \
	CMPQ    AX, $8;                   \
	JGT     sh8;                      \
	JEQ     s8;                       \
	CMPQ    AX, $4;                   \
	JGT     sh4;                      \
	JEQ     s12;                      \
	CMPQ    AX, $3;                   \
	JEQ     s13;                      \
	JMP     s14;                      \
sh4:                                  \
	CMPQ    AX, $6;                   \
	JGT     sh6;                      \
	JEQ     s10;                      \
	JMP     s11;                      \
sh6:                                  \
	CMPQ    AX, $7;                   \
	JEQ     s9;                       \
	JMP     s8;                       \
sh8:                                  \
	CMPQ    AX, $12;                  \
	JGT     sh12;                     \
	JEQ     s4;                       \
	CMPQ    AX, $10;                  \
	JGT     s5;                       \
	JEQ     s6;                       \
	JMP     s7;                       \
sh12:                                 \
	CMPQ    AX, $14;                  \
	JGT     s1;                       \
	JEQ     s2;                       \
	JMP     s3;                       \
s0:                                   \
	VMOVUPS Z16, (DI);                \
	ADDQ    CX, DI;                   \
s1:                                   \
	VMOVUPS Z17, (DI);                \
	ADDQ    CX, DI;                   \
s2:                                   \
	VMOVUPS Z18, (DI);                \
	ADDQ    CX, DI;                   \
s3:                                   \
	VMOVUPS Z19, (DI);                \
	ADDQ    CX, DI;                   \
s4:                                   \
	VMOVUPS Z20, (DI);                \
	ADDQ    CX, DI;                   \
s5:                                   \
	VMOVUPS Z21, (DI);                \
	ADDQ    CX, DI;                   \
s6:                                   \
	VMOVUPS Z22, (DI);                \
	ADDQ    CX, DI;                   \
s7:                                   \
	VMOVUPS Z23, (DI);                \
	ADDQ    CX, DI;                   \
s8:                                   \
	VMOVUPS Z24, (DI);                \
	ADDQ    CX, DI;                   \
s9:                                   \
	VMOVUPS Z25, (DI);                \
	ADDQ    CX, DI;                   \
s10:                                  \
	VMOVUPS Z26, (DI);                \
	ADDQ    CX, DI;                   \
s11:                                  \
	VMOVUPS Z27, (DI);                \
	ADDQ    CX, DI;                   \
s12:                                  \
	VMOVUPS Z28, (DI);                \
	ADDQ    CX, DI;                   \
s13:                                  \
	VMOVUPS Z29, (DI);                \
	ADDQ    CX, DI;                   \
s14:                                  \
	VMOVUPS Z30, (DI);                \
	ADDQ    CX, DI;                   \
s15:                                  \
	VMOVUPS Z31, (DI);                \
	ADDQ    CX, DI;                   \
	MOVQ    t-8(SP), AX;              \
	IMULQ   R8, AX;                   \
	ADDQ    AX, DX;                   \
	SUBQ    t-8(SP), BX;              \
	JNZ     tile;                     \
	MOVQ    gout-24(SP), DI;          \
	ADDQ    $64, DI;                  \
	DECQ    ng-32(SP);                \
	JNZ     group;                    \
	VZEROUPPER;                       \
	RET

// func mulQ4_0x16VNNI(out *float32, ldo int, w *byte, groups int, a *byte, aStride, nb, n int)
TEXT ·mulQ4_0x16VNNI(SB), NOSPLIT, $32-64
	PTILES(UNPACK_Q4X16, PF5, PCOL4, 288)

// func mulQ5_0x16VNNI(out *float32, ldo int, w *byte, groups int, a *byte, aStride, nb, n int)
TEXT ·mulQ5_0x16VNNI(SB), NOSPLIT, $32-64
	PTILES(UNPACK_Q5X16, PF6, PCOLD, 352)

// func mulQ8_0x16VNNI(out *float32, ldo int, w *byte, groups int, a *byte, aStride, nb, n int)
TEXT ·mulQ8_0x16VNNI(SB), NOSPLIT, $32-64
	PTILES(UNPACK_Q8X16, PF9, PCOLD, 544)

// pqh: VPSHUFB controls repeating byte c of every dword over the dword
// (c = 0..3, 64 bytes each).
DATA pqh<>+0(SB)/8, $0x0404040400000000
DATA pqh<>+8(SB)/8, $0x0c0c0c0c08080808
DATA pqh<>+16(SB)/8, $0x0404040400000000
DATA pqh<>+24(SB)/8, $0x0c0c0c0c08080808
DATA pqh<>+32(SB)/8, $0x0404040400000000
DATA pqh<>+40(SB)/8, $0x0c0c0c0c08080808
DATA pqh<>+48(SB)/8, $0x0404040400000000
DATA pqh<>+56(SB)/8, $0x0c0c0c0c08080808
DATA pqh<>+64(SB)/8, $0x0505050501010101
DATA pqh<>+72(SB)/8, $0x0d0d0d0d09090909
DATA pqh<>+80(SB)/8, $0x0505050501010101
DATA pqh<>+88(SB)/8, $0x0d0d0d0d09090909
DATA pqh<>+96(SB)/8, $0x0505050501010101
DATA pqh<>+104(SB)/8, $0x0d0d0d0d09090909
DATA pqh<>+112(SB)/8, $0x0505050501010101
DATA pqh<>+120(SB)/8, $0x0d0d0d0d09090909
DATA pqh<>+128(SB)/8, $0x0606060602020202
DATA pqh<>+136(SB)/8, $0x0e0e0e0e0a0a0a0a
DATA pqh<>+144(SB)/8, $0x0606060602020202
DATA pqh<>+152(SB)/8, $0x0e0e0e0e0a0a0a0a
DATA pqh<>+160(SB)/8, $0x0606060602020202
DATA pqh<>+168(SB)/8, $0x0e0e0e0e0a0a0a0a
DATA pqh<>+176(SB)/8, $0x0606060602020202
DATA pqh<>+184(SB)/8, $0x0e0e0e0e0a0a0a0a
DATA pqh<>+192(SB)/8, $0x0707070703030303
DATA pqh<>+200(SB)/8, $0x0f0f0f0f0b0b0b0b
DATA pqh<>+208(SB)/8, $0x0707070703030303
DATA pqh<>+216(SB)/8, $0x0f0f0f0f0b0b0b0b
DATA pqh<>+224(SB)/8, $0x0707070703030303
DATA pqh<>+232(SB)/8, $0x0f0f0f0f0b0b0b0b
DATA pqh<>+240(SB)/8, $0x0707070703030303
DATA pqh<>+248(SB)/8, $0x0f0f0f0f0b0b0b0b
GLOBL pqh<>(SB), RODATA|NOPTR, $256

// pbits: byte k of every dword tests bit k (low nibble), then bit k+4.
DATA pbits<>+0(SB)/8, $0x0804020108040201
DATA pbits<>+8(SB)/8, $0x0804020108040201
DATA pbits<>+16(SB)/8, $0x0804020108040201
DATA pbits<>+24(SB)/8, $0x0804020108040201
DATA pbits<>+32(SB)/8, $0x0804020108040201
DATA pbits<>+40(SB)/8, $0x0804020108040201
DATA pbits<>+48(SB)/8, $0x0804020108040201
DATA pbits<>+56(SB)/8, $0x0804020108040201
DATA pbits<>+64(SB)/8, $0x8040201080402010
DATA pbits<>+72(SB)/8, $0x8040201080402010
DATA pbits<>+80(SB)/8, $0x8040201080402010
DATA pbits<>+88(SB)/8, $0x8040201080402010
DATA pbits<>+96(SB)/8, $0x8040201080402010
DATA pbits<>+104(SB)/8, $0x8040201080402010
DATA pbits<>+112(SB)/8, $0x8040201080402010
DATA pbits<>+120(SB)/8, $0x8040201080402010
GLOBL pbits<>(SB), RODATA|NOPTR, $128

DATA p16s<>+0(SB)/8, $0x1010101010101010
DATA p16s<>+8(SB)/8, $0x1010101010101010
DATA p16s<>+16(SB)/8, $0x1010101010101010
DATA p16s<>+24(SB)/8, $0x1010101010101010
DATA p16s<>+32(SB)/8, $0x1010101010101010
DATA p16s<>+40(SB)/8, $0x1010101010101010
DATA p16s<>+48(SB)/8, $0x1010101010101010
DATA p16s<>+56(SB)/8, $0x1010101010101010
GLOBL p16s<>(SB), RODATA|NOPTR, $64
