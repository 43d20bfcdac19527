//go:build amd64 && !purego

#include "textflag.h"

// AVX-512 VNNI kernels over the packed k-quant layouts of
// packk_vnni_amd64.go: groups of 16 weight rows, one row per int32 lane,
// against up to 8 activation columns of Q8_K blocks (the rows QuantizeQ8_K
// writes, no preparation) kept in registers for the whole row.
//
// Per super-block and column the integer work is exact: for every
// sub-block (32 values for Q4_K, 16 for Q6_K) one VPDPBUSD chain of the
// unsigned quants with the activation dwords broadcast from memory, the
// sum multiplied by the rows' sub-block scales (VPMULLD) and added to an
// int32 total; the Q4_K mins (or Q6_K's -32 offset) enter through the
// Q8_K bsums (VPDPWSSD with the rows' mins, or scales, as int16 pairs).
// The float step per super-block is fixed: Q4_K acc = fma(d*yd, isum,
// acc) then acc = fnma(dmin*yd, msum, acc); Q6_K acc = fma(d*yd,
// isum-32*msum, acc). The generic dots sum the same exact integers in 8
// float lanes instead, so the outputs differ from them by float rounding
// only (kquantTol), and each output is the same whatever the number of
// columns or the group that computes it.
//
// Tiles of T <= 8 columns take positions 8-T..7 (pointers set back by 8-T
// columns), entered by a jump on T. Registers: DI the tile's outputs, CX
// ldo*4, SI the super-block, R12 super-blocks left, BX columns left, DX
// the tile's first column, R8 aStride, R13 3*aStride, R9 position 0, R10
// position 5, R11 the quants, AX the scales, R14 a counter, t-8(SP) T.
// Z16..Z23 the columns' float sums, Z24..Z31 their int32 totals, Z8..Z15
// the unpacked quants (later the mins or scale pairs), Z0 the sub-block
// scales, Z1..Z7 temporaries.

#define KPOS0 0(R9)
#define KPOS1 0(R9)(R8*1)
#define KPOS2 0(R9)(R8*2)
#define KPOS3 0(R9)(R13*1)
#define KPOS4 0(R9)(R8*4)
#define KPOS5 0(R10)
#define KPOS6 0(R10)(R8*1)
#define KPOS7 0(R10)(R8*2)

// KJUMP jumps to label p<8-T> (T in t-8(SP); lt a local label).
#define KJUMP(p0, p1, p2, p3, p4, p5, p6, p7, lt) \
	CMPQ t-8(SP), $4;  \
	JEQ  p4;           \
	JLT  lt;           \
	CMPQ t-8(SP), $6;  \
	JEQ  p2;           \
	JLT  p3;           \
	CMPQ t-8(SP), $7;  \
	JEQ  p1;           \
	JMP  p0;           \
lt:                    \
	CMPQ t-8(SP), $2;  \
	JEQ  p6;           \
	JLT  p7;           \
	JMP  p5

// Q4_K: one sub-block (32 values: the 8 chunks Z8..Z15, the act dwords
// at off+m) into the column's total.
#define K4SUB(m, off, TC, ISUM) \
	VPXORD        TC, TC, TC;         \
	VPDPBUSD.BCST off+0+m, Z8, TC;    \
	VPDPBUSD.BCST off+4+m, Z9, TC;    \
	VPDPBUSD.BCST off+8+m, Z10, TC;   \
	VPDPBUSD.BCST off+12+m, Z11, TC;  \
	VPDPBUSD.BCST off+16+m, Z12, TC;  \
	VPDPBUSD.BCST off+20+m, Z13, TC;  \
	VPDPBUSD.BCST off+24+m, Z14, TC;  \
	VPDPBUSD.BCST off+28+m, Z15, TC;  \
	VPMULLD       Z0, TC, TC;         \
	VPADDD        TC, ISUM, ISUM

// Q4_K's end of a super-block for one column (the column pointers 256
// bytes into its block): msum from the bsum pairs and the rows' mins
// (Z8..Z15, (m_j, m_j) int16 pairs), then the float step.
#define K4FIN(m, ACC, ISUM) \
	VPXORD        Z1, Z1, Z1;          \
	VPDPWSSD.BCST 4+m, Z8, Z1;         \
	VPDPWSSD.BCST 8+m, Z9, Z1;         \
	VPDPWSSD.BCST 12+m, Z10, Z1;       \
	VPDPWSSD.BCST 16+m, Z11, Z1;       \
	VPDPWSSD.BCST 20+m, Z12, Z1;       \
	VPDPWSSD.BCST 24+m, Z13, Z1;       \
	VPDPWSSD.BCST 28+m, Z14, Z1;       \
	VPDPWSSD.BCST 32+m, Z15, Z1;       \
	VCVTDQ2PS     Z1, Z1;              \
	VCVTDQ2PS     ISUM, Z2;            \
	VMULPS.BCST   -256+m, Z6, Z3;      \
	VFMADD231PS   Z2, Z3, ACC;         \
	VMULPS.BCST   -256+m, Z7, Z3;      \
	VFNMADD231PS  Z1, Z3, ACC;         \
	VPXORD        ISUM, ISUM, ISUM

// K4LO and K4HI load the 8 chunks at R11 into Z8..Z15: their low
// nibbles, or their high ones (Z4 the nibble mask).
#define K4LO \
	VPANDD 0(R11), Z4, Z8;   \
	VPANDD 64(R11), Z4, Z9;  \
	VPANDD 128(R11), Z4, Z10; \
	VPANDD 192(R11), Z4, Z11; \
	VPANDD 256(R11), Z4, Z12; \
	VPANDD 320(R11), Z4, Z13; \
	VPANDD 384(R11), Z4, Z14; \
	VPANDD 448(R11), Z4, Z15

#define K4HI1(off, Z) \
	VPSRLW $4, off(R11), Z; \
	VPANDD Z4, Z, Z

#define K4HI \
	K4HI1(0, Z8);   \
	K4HI1(64, Z9);  \
	K4HI1(128, Z10); \
	K4HI1(192, Z11); \
	K4HI1(256, Z12); \
	K4HI1(320, Z13); \
	K4HI1(384, Z14); \
	K4HI1(448, Z15)

// K4MIN puts sub-block j's mins of the 16 rows as (m, m) int16 pairs in
// Z: the low 2 bits from the top of the scale bytes at 64+16j, the high 4
// from nibble (sh = 0 or 4) of the bytes at 192+16*(j/2).
#define K4MIN(scoff, nboff, sh, Z) \
	VPMOVZXBD scoff(SI), Z1;           \
	VPSRLD    $6, Z1, Z1;              \
	VPMOVZXBD nboff(SI), Z2;           \
	VPSRLD    $sh, Z2, Z2;             \
	VPANDD.BCST k0f<>(SB), Z2, Z2;     \
	VPSLLD    $2, Z2, Z2;              \
	VPORD     Z2, Z1, Z1;              \
	VPSLLD    $16, Z1, Z2;             \
	VPORD     Z2, Z1, Z

// KTILE sets up a tile: T = min(BX, 8), the column pointers, zeroed sums.
#define KTILE \
	MOVQ    $8, AX;                   \
	CMPQ    BX, AX;                   \
	CMOVQLT BX, AX;                   \
	MOVQ    AX, t-8(SP);              \
	NEGQ    AX;                       \
	ADDQ    $8, AX;                   \
	IMULQ   R8, AX;                   \
	MOVQ    DX, R9;                   \
	SUBQ    AX, R9;                   \
	LEAQ    (R9)(R8*4), R10;          \
	ADDQ    R8, R10;                  \
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
	VPXORD  Z31, Z31, Z31

#define KARGS \
	MOVQ out+0(FP), DI;             \
	MOVQ ldo+8(FP), CX;             \
	SHLQ $2, CX;                    \
	MOVQ w+16(FP), SI;              \
	MOVQ aStride+40(FP), R8;        \
	LEAQ (R8)(R8*2), R13;           \
	MOVQ groups+24(FP), AX;         \
	MOVQ AX, ng-32(SP)

// KSTORE stores the tile's T columns (entered at s<8-T>) and moves on to
// the next tile, group or the end.
#define KSTORES(s0, s1, s2, s3, s4, s5, s6, s7, lt) \
	KJUMP(s0, s1, s2, s3, s4, s5, s6, s7, lt); \
s0:                          \
	VMOVUPS Z16, (DI);       \
	ADDQ    CX, DI;          \
s1:                          \
	VMOVUPS Z17, (DI);       \
	ADDQ    CX, DI;          \
s2:                          \
	VMOVUPS Z18, (DI);       \
	ADDQ    CX, DI;          \
s3:                          \
	VMOVUPS Z19, (DI);       \
	ADDQ    CX, DI;          \
s4:                          \
	VMOVUPS Z20, (DI);       \
	ADDQ    CX, DI;          \
s5:                          \
	VMOVUPS Z21, (DI);       \
	ADDQ    CX, DI;          \
s6:                          \
	VMOVUPS Z22, (DI);       \
	ADDQ    CX, DI;          \
s7:                          \
	VMOVUPS Z23, (DI);       \
	ADDQ    CX, DI;          \
	MOVQ    t-8(SP), AX;     \
	IMULQ   R8, AX;          \
	ADDQ    AX, DX;          \
	SUBQ    t-8(SP), BX;     \
	JNZ     tile;            \
	MOVQ    gout-24(SP), DI; \
	ADDQ    $64, DI;         \
	DECQ    ng-32(SP);       \
	JNZ     group;           \
	VZEROUPPER;              \
	RET

// K4COLS runs K4SUB for the tile's columns (act offset off; labels).
#define K4COLS(off, l0, l1, l2, l3, l4, l5, l6, l7, lt) \
	KJUMP(l0, l1, l2, l3, l4, l5, l6, l7, lt); \
l0:                                    \
	K4SUB(KPOS0, off, Z1, Z24);        \
l1:                                    \
	K4SUB(KPOS1, off, Z2, Z25);        \
l2:                                    \
	K4SUB(KPOS2, off, Z1, Z26);        \
l3:                                    \
	K4SUB(KPOS3, off, Z2, Z27);        \
l4:                                    \
	K4SUB(KPOS4, off, Z1, Z28);        \
l5:                                    \
	K4SUB(KPOS5, off, Z2, Z29);        \
l6:                                    \
	K4SUB(KPOS6, off, Z1, Z30);        \
l7:                                    \
	K4SUB(KPOS7, off, Z2, Z31)

// KLOOPS: per group the columns from the start (group label), per tile
// (tile label) the tile set up and the group's super-blocks from the start.
#define KLOOPS \
group:                       \
	MOVQ a+32(FP), DX;       \
	MOVQ n+56(FP), BX;       \
	MOVQ SI, grp-16(SP);     \
	MOVQ DI, gout-24(SP);    \
tile:                        \
	KTILE;                   \
	MOVQ grp-16(SP), SI;     \
	MOVQ nb+48(FP), R12

// K4MINS: the 16 rows' mins (Z8..Z15), d (Z6) and dmin (Z7) of the
// super-block at SI.
#define K4MINS \
	K4MIN(64, 192, 0, Z8);   \
	K4MIN(80, 192, 4, Z9);   \
	K4MIN(96, 208, 0, Z10);  \
	K4MIN(112, 208, 4, Z11); \
	K4MIN(128, 224, 0, Z12); \
	K4MIN(144, 224, 4, Z13); \
	K4MIN(160, 240, 0, Z14); \
	K4MIN(176, 240, 4, Z15); \
	VCVTPH2PS (SI), Z6;      \
	VCVTPH2PS 32(SI), Z7

// KFINS: FIN (a super-block's end) for the tile's columns.
#define KFINS(FIN) \
	KJUMP(f0, f1, f2, f3, f4, f5, f6, f7, flt); \
f0:                          \
	FIN(KPOS0, Z16, Z24);    \
f1:                          \
	FIN(KPOS1, Z17, Z25);    \
f2:                          \
	FIN(KPOS2, Z18, Z26);    \
f3:                          \
	FIN(KPOS3, Z19, Z27);    \
f4:                          \
	FIN(KPOS4, Z20, Z28);    \
f5:                          \
	FIN(KPOS5, Z21, Z29);    \
f6:                          \
	FIN(KPOS6, Z22, Z30);    \
f7:                          \
	FIN(KPOS7, Z23, Z31)

// func mulQ4_Kx16VNNI(out *float32, ldo int, w *byte, groups int, a *byte, aStride, nb, n int)
TEXT ·mulQ4_Kx16VNNI(SB), NOSPLIT, $32-64
	KARGS

	KLOOPS

sblk:
	PREFETCHT0 2304(SI)
	LEAQ 256(SI), R11
	LEAQ 64(SI), AX
	MOVQ $4, R14

	VPBROADCASTD k0f<>(SB), Z4

pair:
	// Sub-block 2p: the low nibbles, its scales.
	K4LO
	VPMOVZXBD   (AX), Z0
	VPANDD.BCST k3f<>(SB), Z0, Z0
	K4COLS(4, a0, a1, a2, a3, a4, a5, a6, a7, alt)

	// Sub-block 2p+1: the high nibbles.
	K4HI
	VPMOVZXBD   16(AX), Z0
	VPANDD.BCST k3f<>(SB), Z0, Z0
	K4COLS(36, b0, b1, b2, b3, b4, b5, b6, b7, blt)

	ADDQ $512, R11
	ADDQ $32, AX
	ADDQ $64, R9
	ADDQ $64, R10
	DECQ R14
	JNZ  pair

	// The mins, d and dmin; each column's float step.
	K4MINS
	KFINS(K4FIN)

	ADDQ $36, R9
	ADDQ $36, R10
	ADDQ $2304, SI
	DECQ R12
	JNZ  sblk
	KSTORES(s0, s1, s2, s3, s4, s5, s6, s7, slt)

// Q6_K: one 16-value sub-block (chunks Z, Z+1, Z+2, Z+3 as W0..W3, act
// dwords at off+m) into the column's total (Z0 the sub-block's scales).
#define K6SUB(m, off, W0, W1, W2, W3, TC, ISUM) \
	VPXORD        TC, TC, TC;        \
	VPDPBUSD.BCST off+0+m, W0, TC;   \
	VPDPBUSD.BCST off+4+m, W1, TC;   \
	VPDPBUSD.BCST off+8+m, W2, TC;   \
	VPDPBUSD.BCST off+12+m, W3, TC;  \
	VPMULLD       Z0, TC, TC;        \
	VPADDD        TC, ISUM, ISUM

// K6TWO: two sub-blocks (chunks Z8..Z11 with scales Z0, then Z12..Z15
// with scales Z7) of one column.
#define K6TWO(m, offa, offb, TC, ISUM) \
	K6SUB(m, offa, Z8, Z9, Z10, Z11, TC, ISUM); \
	VPXORD        TC, TC, TC;        \
	VPDPBUSD.BCST offb+0+m, Z12, TC;  \
	VPDPBUSD.BCST offb+4+m, Z13, TC;  \
	VPDPBUSD.BCST offb+8+m, Z14, TC;  \
	VPDPBUSD.BCST offb+12+m, Z15, TC; \
	VPMULLD       Z7, TC, TC;        \
	VPADDD        TC, ISUM, ISUM

// Q6_K's end of a super-block for one column (pointers at the block):
// msum = sum of scale*bsum (Z8..Z15 the scale pairs), the total minus
// 32*msum, then acc = fma(d*yd, total, acc).
#define K6FIN(m, ACC, ISUM) \
	VPXORD        Z1, Z1, Z1;          \
	VPDPWSSD.BCST 260+m, Z8, Z1;       \
	VPDPWSSD.BCST 264+m, Z9, Z1;       \
	VPDPWSSD.BCST 268+m, Z10, Z1;      \
	VPDPWSSD.BCST 272+m, Z11, Z1;      \
	VPDPWSSD.BCST 276+m, Z12, Z1;      \
	VPDPWSSD.BCST 280+m, Z13, Z1;      \
	VPDPWSSD.BCST 284+m, Z14, Z1;      \
	VPDPWSSD.BCST 288+m, Z15, Z1;      \
	VPSLLD        $5, Z1, Z1;          \
	VPSUBD        Z1, ISUM, ISUM;      \
	VCVTDQ2PS     ISUM, Z2;            \
	VMULPS.BCST   0+m, Z6, Z3;         \
	VFMADD231PS   Z2, Z3, ACC;         \
	VPXORD        ISUM, ISUM, ISUM

// K6LO and K6HI put the 6-bit quants of a quad's chunk into Z: the
// nibbles of the ql chunk at qoff(SI) (low, or high: shifted by 4 into
// Z1), the two bits of the qh chunk at hoff(SI) shifted into bits 4-5
// (left by 4 or 2, or right by 0 or 2), combined by VPTERNLOGD as
// Z | (Z4 & ql) (Z4 the nibble mask).
#define K6LO(qoff, hoff, hsl, Z) \
	VPSLLW      $hsl, hoff(SI), Z;          \
	VPANDD.BCST k30<>(SB), Z, Z;            \
	VPTERNLOGD  $0xf8, qoff(SI), Z4, Z

#define K6HI(qoff, hoff, hsr, Z) \
	VPSRLW      $4, qoff(SI), Z1;           \
	VPSRLW      $hsr, hoff(SI), Z;          \
	VPANDD.BCST k30<>(SB), Z, Z;            \
	VPTERNLOGD  $0xf8, Z1, Z4, Z

// K6SCLO and K6SCHI put sub-block scales in Z as int32: the pair at
// off(SI) sign-extended to int16 pairs, then its even (lo) or odd (hi)
// member.
#define K6SCLO(off, Z) \
	VPMOVSXBW off(SI), Z;  \
	VPSLLD    $16, Z, Z;   \
	VPSRAD    $16, Z, Z

#define K6SCHI(off, Z) \
	VPMOVSXBW off(SI), Z;  \
	VPSRAD    $16, Z, Z

// K6COLS runs K6TWO for the tile's columns (act offsets offa, offb;
// labels l0..l7, lt).
#define K6COLS(offa, offb, l0, l1, l2, l3, l4, l5, l6, l7, lt) \
	KJUMP(l0, l1, l2, l3, l4, l5, l6, l7, lt); \
l0:                                            \
	K6TWO(KPOS0, offa, offb, Z1, Z24);         \
l1:                                            \
	K6TWO(KPOS1, offa, offb, Z2, Z25);         \
l2:                                            \
	K6TWO(KPOS2, offa, offb, Z1, Z26);         \
l3:                                            \
	K6TWO(KPOS3, offa, offb, Z2, Z27);         \
l4:                                            \
	K6TWO(KPOS4, offa, offb, Z1, Z28);         \
l5:                                            \
	K6TWO(KPOS5, offa, offb, Z2, Z29);         \
l6:                                            \
	K6TWO(KPOS6, offa, offb, Z1, Z30);         \
l7:                                            \
	K6TWO(KPOS7, offa, offb, Z2, Z31)

// K6QUAD: quad (h, u) of a super-block, its 12 chunks at q(SI) (4 ql
// chunks A, 4 ql chunks B, 4 qh chunks H), its scale pairs at sc(SI)
// (SCALE: K6SCLO for u = 0, K6SCHI for u = 1), its first sub-block's
// activations at act(m): sub-blocks s0 = 8h+u (A low, qh bits 0-1) and
// s0+2 (B low, bits 2-3), then s0+4 (A high, bits 4-5) and s0+6 (B high,
// bits 6-7), 32 bytes of activations apart.
#define K6QUAD(q, sc, SCALE, act, x0, x1, x2, x3, x4, x5, x6, x7, xt, y0, y1, y2, y3, y4, y5, y6, y7, yt) \
	K6LO(q+0, q+512, 4, Z8);      \
	K6LO(q+64, q+576, 4, Z9);     \
	K6LO(q+128, q+640, 4, Z10);   \
	K6LO(q+192, q+704, 4, Z11);   \
	K6LO(q+256, q+512, 2, Z12);   \
	K6LO(q+320, q+576, 2, Z13);   \
	K6LO(q+384, q+640, 2, Z14);   \
	K6LO(q+448, q+704, 2, Z15);   \
	SCALE(sc, Z0);                \
	SCALE(sc+32, Z7);             \
	K6COLS(act, act+32, x0, x1, x2, x3, x4, x5, x6, x7, xt); \
	K6HI(q+0, q+512, 0, Z8);      \
	K6HI(q+64, q+576, 0, Z9);     \
	K6HI(q+128, q+640, 0, Z10);   \
	K6HI(q+192, q+704, 0, Z11);   \
	K6HI(q+256, q+512, 2, Z12);   \
	K6HI(q+320, q+576, 2, Z13);   \
	K6HI(q+384, q+640, 2, Z14);   \
	K6HI(q+448, q+704, 2, Z15);   \
	SCALE(sc+64, Z0);             \
	SCALE(sc+96, Z7);             \
	K6COLS(act+64, act+96, y0, y1, y2, y3, y4, y5, y6, y7, yt)

// func mulQ6_Kx16VNNI(out *float32, ldo int, w *byte, groups int, a *byte, aStride, nb, n int)
TEXT ·mulQ6_Kx16VNNI(SB), NOSPLIT, $32-64
	KARGS

	KLOOPS
	VPBROADCASTD k0f<>(SB), Z4

sblk:
	PREFETCHT0 3360(SI)
	// Quads (0,0), (0,1), (1,0), (1,1): chunks at 288+768Q, scale
	// pairs 4h.. at 32+128h, activations of s0 = 8h+u at 4+128h+16u.
	K6QUAD(288, 32, K6SCLO, 4, a0, a1, a2, a3, a4, a5, a6, a7, alt, b0, b1, b2, b3, b4, b5, b6, b7, blt)
	K6QUAD(1056, 32, K6SCHI, 20, c0, c1, c2, c3, c4, c5, c6, c7, clt, d0, d1, d2, d3, d4, d5, d6, d7, dlt)
	K6QUAD(1824, 160, K6SCLO, 132, e0, e1, e2, e3, e4, e5, e6, e7, elt, g0, g1, g2, g3, g4, g5, g6, g7, glt)
	K6QUAD(2592, 160, K6SCHI, 148, h0, h1, h2, h3, h4, h5, h6, h7, hlt, i0, i1, i2, i3, i4, i5, i6, i7, ilt)

	// The scale pairs, d; each column's end.
	VPMOVSXBW 32(SI), Z8
	VPMOVSXBW 64(SI), Z9
	VPMOVSXBW 96(SI), Z10
	VPMOVSXBW 128(SI), Z11
	VPMOVSXBW 160(SI), Z12
	VPMOVSXBW 192(SI), Z13
	VPMOVSXBW 224(SI), Z14
	VPMOVSXBW 256(SI), Z15
	VCVTPH2PS (SI), Z6
	KFINS(K6FIN)

	ADDQ $292, R9
	ADDQ $292, R10
	ADDQ $3360, SI
	DECQ R12
	JNZ  sblk
	KSTORES(s0, s1, s2, s3, s4, s5, s6, s7, slt)

// Q5_K: as Q4_K, each sub-block's quants with their fifth bit: bit j of
// the qh chunk k (16 rows' dwords at 256+64k(SI)) shifted into bit 4
// (VPSLLW by 4-j or VPSRLW by j-4, SHIFT), masked (Z5, 0x10) and combined
// with the nibbles (Z4, 0x0F) by VPTERNLOGD as (Z4 & nib) | (~Z4 & bit).
#define K5CHUNK(SHIFT, sh, koff, NIB, Z) \
	SHIFT       $sh, 256+koff(SI), Z;      \
	VPANDD      Z5, Z, Z;                  \
	VPTERNLOGD  $0xb8, NIB, Z4, Z

// K5LO: sub-block j = 2p (low nibbles of the pair's chunks at R11).
#define K5LO(SHIFT, sh) \
	K5CHUNK(SHIFT, sh, 0, 0(R11), Z8);     \
	K5CHUNK(SHIFT, sh, 64, 64(R11), Z9);   \
	K5CHUNK(SHIFT, sh, 128, 128(R11), Z10); \
	K5CHUNK(SHIFT, sh, 192, 192(R11), Z11); \
	K5CHUNK(SHIFT, sh, 256, 256(R11), Z12); \
	K5CHUNK(SHIFT, sh, 320, 320(R11), Z13); \
	K5CHUNK(SHIFT, sh, 384, 384(R11), Z14); \
	K5CHUNK(SHIFT, sh, 448, 448(R11), Z15)

// K5HI: sub-block j = 2p+1 (high nibbles, shifted into Z1 first).
#define K5HI1(SHIFT, sh, koff, Z) \
	VPSRLW $4, koff(R11), Z1;              \
	K5CHUNK(SHIFT, sh, koff, Z1, Z)

#define K5HI(SHIFT, sh) \
	K5HI1(SHIFT, sh, 0, Z8);     \
	K5HI1(SHIFT, sh, 64, Z9);    \
	K5HI1(SHIFT, sh, 128, Z10);  \
	K5HI1(SHIFT, sh, 192, Z11);  \
	K5HI1(SHIFT, sh, 256, Z12);  \
	K5HI1(SHIFT, sh, 320, Z13);  \
	K5HI1(SHIFT, sh, 384, Z14);  \
	K5HI1(SHIFT, sh, 448, Z15)

// K5SC: sub-block j's scales (bytes at 64+16j(SI)) as int32 in Z0.
#define K5SC(j) \
	VPMOVZXBD   64+16*j(SI), Z0;    \
	VPANDD.BCST k3f<>(SB), Z0, Z0

// func mulQ5_Kx16VNNI(out *float32, ldo int, w *byte, groups int, a *byte, aStride, nb, n int)
TEXT ·mulQ5_Kx16VNNI(SB), NOSPLIT, $32-64
	KARGS

	KLOOPS
	VPBROADCASTD k0f<>(SB), Z4
	VPBROADCASTD k10<>(SB), Z5

sblk:
	PREFETCHT0 2816(SI)
	LEAQ 768(SI), R11
	K5LO(VPSLLW, 4)
	K5SC(0)
	K4COLS(4, a0, a1, a2, a3, a4, a5, a6, a7, alt)
	K5HI(VPSLLW, 3)
	K5SC(1)
	K4COLS(36, b0, b1, b2, b3, b4, b5, b6, b7, blt)
	ADDQ $512, R11
	K5LO(VPSLLW, 2)
	K5SC(2)
	K4COLS(68, c0, c1, c2, c3, c4, c5, c6, c7, clt)
	K5HI(VPSLLW, 1)
	K5SC(3)
	K4COLS(100, d0, d1, d2, d3, d4, d5, d6, d7, dlt)
	ADDQ $512, R11
	K5LO(VPSRLW, 0)
	K5SC(4)
	K4COLS(132, e0, e1, e2, e3, e4, e5, e6, e7, elt)
	K5HI(VPSRLW, 1)
	K5SC(5)
	K4COLS(164, g0, g1, g2, g3, g4, g5, g6, g7, glt)
	ADDQ $512, R11
	K5LO(VPSRLW, 2)
	K5SC(6)
	K4COLS(196, h0, h1, h2, h3, h4, h5, h6, h7, hlt)
	K5HI(VPSRLW, 3)
	K5SC(7)
	K4COLS(228, i0, i1, i2, i3, i4, i5, i6, i7, ilt)

	// The mins, d and dmin; each column's float step (K4FIN reads the
	// activations 256 bytes into the block).
	K4MINS
	ADDQ $256, R9
	ADDQ $256, R10
	KFINS(K4FIN)

	ADDQ $36, R9
	ADDQ $36, R10
	ADDQ $2816, SI
	DECQ R12
	JNZ  sblk
	KSTORES(s0, s1, s2, s3, s4, s5, s6, s7, slt)

DATA k10<>+0(SB)/4, $0x10101010
GLOBL k10<>(SB), RODATA|NOPTR, $4

DATA k0f<>+0(SB)/4, $0x0f0f0f0f
GLOBL k0f<>(SB), RODATA|NOPTR, $4

DATA k3f<>+0(SB)/4, $0x0000003f
GLOBL k3f<>(SB), RODATA|NOPTR, $4

DATA k30<>+0(SB)/4, $0x30303030
GLOBL k30<>(SB), RODATA|NOPTR, $4
