//go:build amd64 && !purego

#include "textflag.h"

// AVX2 kernels over the avx512vnni set's packed layouts (16-row groups,
// see pack_vnni_amd64.go), for CPUs without AVX-512: each group in two
// halves of 8 rows (the first or last 32 bytes of every 64-byte chunk,
// the first or last 8 scales), one row per int32 lane of a ymm register.
//
// Q4_0 and Q5_0, per block and column: VPMADDUBSW of each chunk (unsigned
// quants) with the activation dword broadcast (signed), the int16 pair
// sums added in int16 (exact: at most 8*2*15*128 for Q4_0, 4*2*31*128 for
// Q5_0 before VPMADDWD widens them to int32), -o*sum a from the prepared
// entry, then the generic float steps ((sumi*dw)*da for Q4_0, sumi*(dw*da)
// for Q5_0): bit-identical to the generic dots. The columns' sums live in
// out (zeroed first, added to block after block), so any number of
// columns runs in one call.
//
// Registers: DI the half-group's outputs (column 0), CX ldo*4, SI the
// half's block, R12 blocks left, DX column 0's entries, R8 aStride, BX
// columns left, R9 the column's entries, R14 the column's outputs, R13 the
// group, R11 halves left, R10 groups left. Y8..Y15 the chunks, Y6 dw.

// A2SUM8 leaves in Y0 the 8 rows' int16-pair sums of the column's entry at
// R9 over chunks Y8..Y15 (temporary Y1).
#define A2SUM8 \
	VPBROADCASTD 0(R9), Y0;    \
	VPMADDUBSW   Y0, Y8, Y0;   \
	VPBROADCASTD 4(R9), Y1;    \
	VPMADDUBSW   Y1, Y9, Y1;   \
	VPADDW       Y1, Y0, Y0;   \
	VPBROADCASTD 8(R9), Y1;    \
	VPMADDUBSW   Y1, Y10, Y1;  \
	VPADDW       Y1, Y0, Y0;   \
	VPBROADCASTD 12(R9), Y1;   \
	VPMADDUBSW   Y1, Y11, Y1;  \
	VPADDW       Y1, Y0, Y0;   \
	VPBROADCASTD 16(R9), Y1;   \
	VPMADDUBSW   Y1, Y12, Y1;  \
	VPADDW       Y1, Y0, Y0;   \
	VPBROADCASTD 20(R9), Y1;   \
	VPMADDUBSW   Y1, Y13, Y1;  \
	VPADDW       Y1, Y0, Y0;   \
	VPBROADCASTD 24(R9), Y1;   \
	VPMADDUBSW   Y1, Y14, Y1;  \
	VPADDW       Y1, Y0, Y0;   \
	VPBROADCASTD 28(R9), Y1;   \
	VPMADDUBSW   Y1, Y15, Y1;  \
	VPADDW       Y1, Y0, Y0;   \
	VPMADDWD     a2ones<>(SB), Y0, Y0

// A2SUM44: the same for Q5_0, the int16 sums widened after every 4 chunks.
#define A2SUM44 \
	VPBROADCASTD 0(R9), Y0;    \
	VPMADDUBSW   Y0, Y8, Y0;   \
	VPBROADCASTD 4(R9), Y1;    \
	VPMADDUBSW   Y1, Y9, Y1;   \
	VPADDW       Y1, Y0, Y0;   \
	VPBROADCASTD 8(R9), Y1;    \
	VPMADDUBSW   Y1, Y10, Y1;  \
	VPADDW       Y1, Y0, Y0;   \
	VPBROADCASTD 12(R9), Y1;   \
	VPMADDUBSW   Y1, Y11, Y1;  \
	VPADDW       Y1, Y0, Y0;   \
	VPMADDWD     a2ones<>(SB), Y0, Y0; \
	VPBROADCASTD 16(R9), Y1;   \
	VPMADDUBSW   Y1, Y12, Y1;  \
	VPBROADCASTD 20(R9), Y2;   \
	VPMADDUBSW   Y2, Y13, Y2;  \
	VPADDW       Y2, Y1, Y1;   \
	VPBROADCASTD 24(R9), Y2;   \
	VPMADDUBSW   Y2, Y14, Y2;  \
	VPADDW       Y2, Y1, Y1;   \
	VPBROADCASTD 28(R9), Y2;   \
	VPMADDUBSW   Y2, Y15, Y2;  \
	VPADDW       Y2, Y1, Y1;   \
	VPMADDWD     a2ones<>(SB), Y1, Y1; \
	VPADDD       Y1, Y0, Y0

// A2NIB splits the chunk half at off(SI) into low and high nibbles.
#define A2NIB(off, lo, hi) \
	VMOVDQU off(SI), lo;          \
	VPSRLW  $4, lo, hi;           \
	VPAND   a2nib<>(SB), lo, lo;  \
	VPAND   a2nib<>(SB), hi, hi

// A2QH ors 16 into the bytes of chunk Z whose qh bit is set (Y7 the 8
// rows' qh words): byte c/2 of every dword repeated (sh), tested against
// the bit pattern (bits).
#define A2QH(sh, bits, Z) \
	VPSHUFB  sh, Y7, Y0;             \
	VPAND    bits, Y0, Y0;           \
	VPCMPEQB bits, Y0, Y0;           \
	VPAND    a2sixteen<>(SB), Y0, Y0; \
	VPOR     Y0, Z, Z

// The per-block unpacking of a half (SI at the block; AX = 16*half for
// the scales, 32*half for the chunks, added in).
#define A2UNPACK4 \
	VCVTPH2PS (SI)(AX*1), Y6;          \
	LEAQ      (SI)(AX*2), R9;          \
	XCHGQ     SI, R9;                  \
	A2NIB(32, Y8, Y12);                \
	A2NIB(96, Y9, Y13);                \
	A2NIB(160, Y10, Y14);              \
	A2NIB(224, Y11, Y15);              \
	XCHGQ     SI, R9

#define A2UNPACK5 \
	VCVTPH2PS (SI)(AX*1), Y6;          \
	LEAQ      (SI)(AX*2), R9;          \
	XCHGQ     SI, R9;                  \
	A2NIB(96, Y8, Y12);                \
	A2NIB(160, Y9, Y13);               \
	A2NIB(224, Y10, Y14);              \
	A2NIB(288, Y11, Y15);              \
	VMOVDQU 32(SI), Y7;                \
	XCHGQ     SI, R9;                  \
	A2QH(a2qh<>+0(SB), a2bits<>+0(SB), Y8);    \
	A2QH(a2qh<>+0(SB), a2bits<>+32(SB), Y9);   \
	A2QH(a2qh<>+32(SB), a2bits<>+0(SB), Y10);  \
	A2QH(a2qh<>+32(SB), a2bits<>+32(SB), Y11); \
	A2QH(a2qh<>+64(SB), a2bits<>+0(SB), Y12);  \
	A2QH(a2qh<>+64(SB), a2bits<>+32(SB), Y13); \
	A2QH(a2qh<>+96(SB), a2bits<>+0(SB), Y14);  \
	A2QH(a2qh<>+96(SB), a2bits<>+32(SB), Y15)

// The float step of a column (int sums in Y0, the entry at R9): add to the
// 8 outputs at R14.
#define A2FAC4 \
	VPBROADCASTD 32(R9), Y1;       \
	VPADDD       Y1, Y0, Y0;       \
	VCVTDQ2PS    Y0, Y0;           \
	VMULPS       Y6, Y0, Y0;       \
	VBROADCASTSS 36(R9), Y1;       \
	VMULPS       Y1, Y0, Y0;       \
	VADDPS       (R14), Y0, Y0;    \
	VMOVUPS      Y0, (R14)

#define A2FACD \
	VPBROADCASTD 32(R9), Y1;       \
	VPADDD       Y1, Y0, Y0;       \
	VCVTDQ2PS    Y0, Y0;           \
	VBROADCASTSS 36(R9), Y1;       \
	VMULPS       Y6, Y1, Y1;       \
	VMULPS       Y1, Y0, Y0;       \
	VADDPS       (R14), Y0, Y0;    \
	VMOVUPS      Y0, (R14)

// A2BODY(UNPACK, SUM, FAC, bsz): every group, half by half: the n
// columns' 8 outputs zeroed, then per block the half unpacked once and
// every column's block added.
#define A2BODY(UNPACK, SUM, FAC, bsz) \
	MOVQ    out+0(FP), DI;         \
	MOVQ    ldo+8(FP), CX;         \
	SHLQ    $2, CX;                \
	MOVQ    w+16(FP), R13;         \
	MOVQ    groups+24(FP), R10;    \
	MOVQ    aStride+40(FP), R8;    \
group:                             \
	XORQ    AX, AX;                \
half:                              \
	MOVQ    n+56(FP), BX;          \
	MOVQ    DI, R14;               \
	VXORPS  Y0, Y0, Y0;            \
zero:                              \
	VMOVUPS Y0, (R14);             \
	ADDQ    CX, R14;               \
	DECQ    BX;                    \
	JNZ     zero;                  \
	MOVQ    R13, SI;               \
	MOVQ    a+32(FP), DX;          \
	MOVQ    nb+48(FP), R12;        \
blk:                               \
	PREFETCHT0 1024(SI);           \
	PREFETCHT0 1088(SI);           \
	UNPACK;                        \
	MOVQ    DX, R9;                \
	MOVQ    DI, R14;               \
	MOVQ    n+56(FP), BX;          \
col:                               \
	SUM;                           \
	FAC;                           \
	ADDQ    R8, R9;                \
	ADDQ    CX, R14;               \
	DECQ    BX;                    \
	JNZ     col;                   \
	ADDQ    $40, DX;               \
	ADDQ    $bsz, SI;              \
	DECQ    R12;                   \
	JNZ     blk;                   \
	ADDQ    $32, DI;               \
	ADDQ    $16, AX;               \
	CMPQ    AX, $32;               \
	JLT     half;                  \
	MOVQ    SI, R13;               \
	DECQ    R10;                   \
	JNZ     group;                 \
	VZEROUPPER;                    \
	RET

// func mulQ4_0x16AVX2(out *float32, ldo int, w *byte, groups int, a *byte, aStride, nb, n int)
TEXT ·mulQ4_0x16AVX2(SB), NOSPLIT, $0-64
	A2BODY(A2UNPACK4, A2SUM8, A2FAC4, 288)

// func mulQ5_0x16AVX2(out *float32, ldo int, w *byte, groups int, a *byte, aStride, nb, n int)
TEXT ·mulQ5_0x16AVX2(SB), NOSPLIT, $0-64
	A2BODY(A2UNPACK5, A2SUM44, A2FACD, 352)

DATA a2ones<>+0(SB)/8, $0x0001000100010001
DATA a2ones<>+8(SB)/8, $0x0001000100010001
DATA a2ones<>+16(SB)/8, $0x0001000100010001
DATA a2ones<>+24(SB)/8, $0x0001000100010001
GLOBL a2ones<>(SB), RODATA|NOPTR, $32

DATA a2nib<>+0(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA a2nib<>+8(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA a2nib<>+16(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA a2nib<>+24(SB)/8, $0x0f0f0f0f0f0f0f0f
GLOBL a2nib<>(SB), RODATA|NOPTR, $32

DATA a2sixteen<>+0(SB)/8, $0x1010101010101010
DATA a2sixteen<>+8(SB)/8, $0x1010101010101010
DATA a2sixteen<>+16(SB)/8, $0x1010101010101010
DATA a2sixteen<>+24(SB)/8, $0x1010101010101010
GLOBL a2sixteen<>(SB), RODATA|NOPTR, $32

// a2qh: VPSHUFB controls repeating byte c of every dword (c = 0..3).
DATA a2qh<>+0(SB)/8, $0x0404040400000000
DATA a2qh<>+8(SB)/8, $0x0c0c0c0c08080808
DATA a2qh<>+16(SB)/8, $0x0404040400000000
DATA a2qh<>+24(SB)/8, $0x0c0c0c0c08080808
DATA a2qh<>+32(SB)/8, $0x0505050501010101
DATA a2qh<>+40(SB)/8, $0x0d0d0d0d09090909
DATA a2qh<>+48(SB)/8, $0x0505050501010101
DATA a2qh<>+56(SB)/8, $0x0d0d0d0d09090909
DATA a2qh<>+64(SB)/8, $0x0606060602020202
DATA a2qh<>+72(SB)/8, $0x0e0e0e0e0a0a0a0a
DATA a2qh<>+80(SB)/8, $0x0606060602020202
DATA a2qh<>+88(SB)/8, $0x0e0e0e0e0a0a0a0a
DATA a2qh<>+96(SB)/8, $0x0707070703030303
DATA a2qh<>+104(SB)/8, $0x0f0f0f0f0b0b0b0b
DATA a2qh<>+112(SB)/8, $0x0707070703030303
DATA a2qh<>+120(SB)/8, $0x0f0f0f0f0b0b0b0b
GLOBL a2qh<>(SB), RODATA|NOPTR, $128

// a2bits: byte k of every dword holds bit k, then bit k+4.
DATA a2bits<>+0(SB)/8, $0x0804020108040201
DATA a2bits<>+8(SB)/8, $0x0804020108040201
DATA a2bits<>+16(SB)/8, $0x0804020108040201
DATA a2bits<>+24(SB)/8, $0x0804020108040201
DATA a2bits<>+32(SB)/8, $0x8040201080402010
DATA a2bits<>+40(SB)/8, $0x8040201080402010
DATA a2bits<>+48(SB)/8, $0x8040201080402010
DATA a2bits<>+56(SB)/8, $0x8040201080402010
GLOBL a2bits<>(SB), RODATA|NOPTR, $64

// K-quants on AVX2: per half-group (8 rows) tiles of 2 columns (1 for an
// odd last one, T in t-8(SP)), their int32 totals in Y2, Y3 and float
// sums in Y4, Y5 for the whole row. Per sub-block the quants' VPMADDUBSW
// pair sums are added in int16 while exact (Q4_K 8 chunks, Q5_K 4, Q6_K
// 2), then VPMADDWD multiplies them by the rows' sub-block scales given as
// (scale, scale) int16 pairs: scale*sum in int32. The mins (Q4_K, Q5_K)
// and Q6_K's -32 offset through the Q8_K bsums, the float step per
// super-block with FMA, all as the avx512vnni kernels: the same integers
// and the same float operations, so the same bits.
//
// Registers: DI the tile's outputs, CX ldo*4, R13 the group, AX the half
// (0 or 1), SI the super-block, R12 super-blocks left, DX the tile's
// first column, R8 aStride, BX columns left, R9/R10 the tile's columns,
// R11 the quants, R14 the scales; t-8(SP) T, hout-16(SP) the half's
// outputs, ng-24(SP) groups left, pc-32(SP) a loop count, hh-40(SP) the
// half. Y8..Y15 the quants (later the mins or
// scale pairs), Y7 the sub-block scale pairs, Y0, Y1, Y6 temporaries.

// K2DOT8 adds to ISUM scale*sum over the 8 chunks Y8..Y15 of the column's
// act dwords at off(R) (VPMADDUBSW pairs summed in int16, Y7 the scale
// pairs).
#define K2DOT8(R, off, ISUM) \
	VPBROADCASTD off+0(R), Y0;    \
	VPMADDUBSW   Y0, Y8, Y0;      \
	VPBROADCASTD off+4(R), Y1;    \
	VPMADDUBSW   Y1, Y9, Y1;      \
	VPADDW       Y1, Y0, Y0;      \
	VPBROADCASTD off+8(R), Y1;    \
	VPMADDUBSW   Y1, Y10, Y1;     \
	VPADDW       Y1, Y0, Y0;      \
	VPBROADCASTD off+12(R), Y1;   \
	VPMADDUBSW   Y1, Y11, Y1;     \
	VPADDW       Y1, Y0, Y0;      \
	VPBROADCASTD off+16(R), Y1;   \
	VPMADDUBSW   Y1, Y12, Y1;     \
	VPADDW       Y1, Y0, Y0;      \
	VPBROADCASTD off+20(R), Y1;   \
	VPMADDUBSW   Y1, Y13, Y1;     \
	VPADDW       Y1, Y0, Y0;      \
	VPBROADCASTD off+24(R), Y1;   \
	VPMADDUBSW   Y1, Y14, Y1;     \
	VPADDW       Y1, Y0, Y0;      \
	VPBROADCASTD off+28(R), Y1;   \
	VPMADDUBSW   Y1, Y15, Y1;     \
	VPADDW       Y1, Y0, Y0;      \
	VPMADDWD     Y7, Y0, Y0;      \
	VPADDD       Y0, ISUM, ISUM

// K2DOT44: the same widened after every 4 chunks (Q5_K's 5-bit quants).
#define K2DOT44(R, off, ISUM) \
	VPBROADCASTD off+0(R), Y0;    \
	VPMADDUBSW   Y0, Y8, Y0;      \
	VPBROADCASTD off+4(R), Y1;    \
	VPMADDUBSW   Y1, Y9, Y1;      \
	VPADDW       Y1, Y0, Y0;      \
	VPBROADCASTD off+8(R), Y1;    \
	VPMADDUBSW   Y1, Y10, Y1;     \
	VPADDW       Y1, Y0, Y0;      \
	VPBROADCASTD off+12(R), Y1;   \
	VPMADDUBSW   Y1, Y11, Y1;     \
	VPADDW       Y1, Y0, Y0;      \
	VPMADDWD     Y7, Y0, Y0;      \
	VPADDD       Y0, ISUM, ISUM;  \
	VPBROADCASTD off+16(R), Y0;   \
	VPMADDUBSW   Y0, Y12, Y0;     \
	VPBROADCASTD off+20(R), Y1;   \
	VPMADDUBSW   Y1, Y13, Y1;     \
	VPADDW       Y1, Y0, Y0;      \
	VPBROADCASTD off+24(R), Y1;   \
	VPMADDUBSW   Y1, Y14, Y1;     \
	VPADDW       Y1, Y0, Y0;      \
	VPBROADCASTD off+28(R), Y1;   \
	VPMADDUBSW   Y1, Y15, Y1;     \
	VPADDW       Y1, Y0, Y0;      \
	VPMADDWD     Y7, Y0, Y0;      \
	VPADDD       Y0, ISUM, ISUM

// K2COLS runs DOT for the tile's column 0 and, unless T == 1, column 1.
#define K2COLS(DOT, off, skip) \
	DOT(R9, off, Y2);        \
	CMPQ t-8(SP), $1;        \
	JEQ  skip;               \
	DOT(R10, off, Y3);       \
skip:

// K2SCALE: the 8 rows' scales of sub-block j (bytes at sc(R14)) as
// (scale, scale) int16 pairs in Y7.
#define K2SCALE(sc) \
	VPMOVZXBD sc(R14), Y7;          \
	VPAND     k2x3f<>(SB), Y7, Y7;  \
	VPSLLD    $16, Y7, Y0;          \
	VPOR      Y0, Y7, Y7

// K2MIN: sub-block j's mins of the 8 rows as (m, m) int16 pairs in Z
// (the low 2 bits on top of the bytes at scoff(R14), the high 4 in nibble
// sh of the bytes at nboff(R14)).
#define K2MIN(scoff, nboff, sh, Z) \
	VPMOVZXBD scoff(R14), Z;         \
	VPSRLD    $6, Z, Z;              \
	VPMOVZXBD nboff(R14), Y0;        \
	VPSRLD    $sh, Y0, Y0;           \
	VPAND     k2x0f<>(SB), Y0, Y0;   \
	VPSLLD    $2, Y0, Y0;            \
	VPOR      Y0, Z, Z;              \
	VPSLLD    $16, Z, Y0;            \
	VPOR      Y0, Z, Z

// K2MSUM: the column's min (or scale) sums with the bsum pair dwords at
// off(R) into Y0 (Y8..Y15 the pairs), int32.
#define K2MSUM(R, off) \
	VPBROADCASTD off+0(R), Y0;  \
	VPMADDWD     Y0, Y8, Y0;    \
	VPBROADCASTD off+4(R), Y1;  \
	VPMADDWD     Y1, Y9, Y1;    \
	VPADDD       Y1, Y0, Y0;    \
	VPBROADCASTD off+8(R), Y1;  \
	VPMADDWD     Y1, Y10, Y1;   \
	VPADDD       Y1, Y0, Y0;    \
	VPBROADCASTD off+12(R), Y1; \
	VPMADDWD     Y1, Y11, Y1;   \
	VPADDD       Y1, Y0, Y0;    \
	VPBROADCASTD off+16(R), Y1; \
	VPMADDWD     Y1, Y12, Y1;   \
	VPADDD       Y1, Y0, Y0;    \
	VPBROADCASTD off+20(R), Y1; \
	VPMADDWD     Y1, Y13, Y1;   \
	VPADDD       Y1, Y0, Y0;    \
	VPBROADCASTD off+24(R), Y1; \
	VPMADDWD     Y1, Y14, Y1;   \
	VPADDD       Y1, Y0, Y0;    \
	VPBROADCASTD off+28(R), Y1; \
	VPMADDWD     Y1, Y15, Y1;   \
	VPADDD       Y1, Y0, Y0

// K2FIN4: Q4_K's (and Q5_K's) float step for one column (R at the block
// + 256; Y6 d, Y7 dmin as float): acc = fma(d*yd, isum, acc), then
// acc = fnma(dmin*yd, msum, acc); the total cleared.
#define K2FIN4(R, ACC, ISUM) \
	K2MSUM(R, 4);                  \
	VCVTDQ2PS    Y0, Y0;           \
	VCVTDQ2PS    ISUM, ISUM;       \
	VBROADCASTSS -256(R), Y1;      \
	VMULPS       Y6, Y1, Y1;       \
	VFMADD231PS  ISUM, Y1, ACC;    \
	VBROADCASTSS -256(R), Y1;      \
	VMULPS       Y7, Y1, Y1;       \
	VFNMADD231PS Y0, Y1, ACC;      \
	VPXOR        ISUM, ISUM, ISUM

// K2TILE: T = min(BX, 2) and the tile's column pointers and sums.
#define K2TILE \
	MOVQ    $2, R11;          \
	CMPQ    BX, R11;          \
	CMOVQLT BX, R11;          \
	MOVQ    R11, t-8(SP);     \
	MOVQ    DX, R9;           \
	LEAQ    (DX)(R8*1), R10;  \
	VPXOR   Y2, Y2, Y2;       \
	VPXOR   Y3, Y3, Y3;       \
	VPXOR   Y4, Y4, Y4;       \
	VPXOR   Y5, Y5, Y5

// K2LOOPS: per group the half from 0 (hh-40(SP)), per half its outputs
// and the columns from the start, per tile the tile set up and the
// group's super-blocks from the start (labels group, half, tile).
#define K2LOOPS \
group:                        \
	MOVQ $0, hh-40(SP);       \
half:                         \
	MOVQ DI, hout-16(SP);     \
	MOVQ a+32(FP), DX;        \
	MOVQ n+56(FP), BX;        \
tile:                         \
	K2TILE;                   \
	MOVQ R13, SI;             \
	MOVQ nb+48(FP), R12

// K2STORE stores the tile's sums and moves on to the next tile, half,
// group or the end.
#define K2STORE \
	VMOVUPS Y4, (DI);        \
	ADDQ    CX, DI;          \
	CMPQ    t-8(SP), $1;     \
	JEQ     3(PC);           \
	VMOVUPS Y5, (DI);        \
	ADDQ    CX, DI;          \
	MOVQ    t-8(SP), R11;    \
	IMULQ   R8, R11;         \
	ADDQ    R11, DX;         \
	SUBQ    t-8(SP), BX;     \
	JNZ     tile;            \
	MOVQ    hout-16(SP), DI; \
	ADDQ    $32, DI;         \
	INCQ    hh-40(SP);       \
	CMPQ    hh-40(SP), $2;   \
	JLT     half;            \
	MOVQ    SI, R13;         \
	DECQ    ng-24(SP);       \
	JNZ     group;           \
	VZEROUPPER;              \
	RET

// K2MINS: the half's mins (Y8..Y15, scales at R14), d (Y6) and dmin (Y7)
// of the super-block at SI.
#define K2MINS \
	K2MIN(64, 192, 0, Y8);    \
	K2MIN(80, 192, 4, Y9);    \
	K2MIN(96, 208, 0, Y10);   \
	K2MIN(112, 208, 4, Y11);  \
	K2MIN(128, 224, 0, Y12);  \
	K2MIN(144, 224, 4, Y13);  \
	K2MIN(160, 240, 0, Y14);  \
	K2MIN(176, 240, 4, Y15);  \
	MOVQ hh-40(SP), R11;      \
	SHLQ $4, R11;             \
	VCVTPH2PS (SI)(R11*1), Y6; \
	VCVTPH2PS 32(SI)(R11*1), Y7

// K2FINS4: K2FIN4 for the tile's columns (the pointers moved 256 into
// their blocks by the caller; label l).
#define K2FINS4(l) \
	K2FIN4(R9, Y4, Y2);       \
	CMPQ t-8(SP), $1;         \
	JEQ  l;                   \
	K2FIN4(R10, Y5, Y3);      \
l:

// K2START: the arguments; per group and half the columns from the start.
#define K2START \
	MOVQ out+0(FP), DI;         \
	MOVQ ldo+8(FP), CX;         \
	SHLQ $2, CX;                \
	MOVQ w+16(FP), R13;         \
	MOVQ groups+24(FP), R11;    \
	MOVQ R11, ng-24(SP);        \
	MOVQ aStride+40(FP), R8

// func mulQ4_Kx16AVX2(out *float32, ldo int, w *byte, groups int, a *byte, aStride, nb, n int)
TEXT ·mulQ4_Kx16AVX2(SB), NOSPLIT, $40-64
	K2START

	K2LOOPS

sblk:
	PREFETCHT0 2304(SI)
	// The half's quants: 32 bytes into every 64-byte chunk; its scales:
	// 8 bytes into every 16.
	MOVQ hh-40(SP), AX
	MOVQ AX, R11
	SHLQ $5, R11
	LEAQ 256(SI)(R11*1), R11
	MOVQ AX, R14
	SHLQ $3, R14
	ADDQ SI, R14
	MOVQ $4, pc-32(SP)

pair:
	VMOVDQU (R11), Y8
	VPAND   k2x0f<>(SB), Y8, Y8
	VMOVDQU 64(R11), Y9
	VPAND   k2x0f<>(SB), Y9, Y9
	VMOVDQU 128(R11), Y10
	VPAND   k2x0f<>(SB), Y10, Y10
	VMOVDQU 192(R11), Y11
	VPAND   k2x0f<>(SB), Y11, Y11
	VMOVDQU 256(R11), Y12
	VPAND   k2x0f<>(SB), Y12, Y12
	VMOVDQU 320(R11), Y13
	VPAND   k2x0f<>(SB), Y13, Y13
	VMOVDQU 384(R11), Y14
	VPAND   k2x0f<>(SB), Y14, Y14
	VMOVDQU 448(R11), Y15
	VPAND   k2x0f<>(SB), Y15, Y15
	K2SCALE(64)
	K2COLS(K2DOT8, 4, p0)
	VPSRLW $4, (R11), Y8
	VPAND  k2x0f<>(SB), Y8, Y8
	VPSRLW $4, 64(R11), Y9
	VPAND  k2x0f<>(SB), Y9, Y9
	VPSRLW $4, 128(R11), Y10
	VPAND  k2x0f<>(SB), Y10, Y10
	VPSRLW $4, 192(R11), Y11
	VPAND  k2x0f<>(SB), Y11, Y11
	VPSRLW $4, 256(R11), Y12
	VPAND  k2x0f<>(SB), Y12, Y12
	VPSRLW $4, 320(R11), Y13
	VPAND  k2x0f<>(SB), Y13, Y13
	VPSRLW $4, 384(R11), Y14
	VPAND  k2x0f<>(SB), Y14, Y14
	VPSRLW $4, 448(R11), Y15
	VPAND  k2x0f<>(SB), Y15, Y15
	K2SCALE(80)
	K2COLS(K2DOT8, 36, p1)
	ADDQ $512, R11
	ADDQ $32, R14
	ADDQ $64, R9
	ADDQ $64, R10
	DECQ pc-32(SP)
	JNZ  pair

	// R14 is 128 past the half's scales: the mins, d, dmin.
	SUBQ $128, R14
	K2MINS
	K2FINS4(f1)
	ADDQ $36, R9
	ADDQ $36, R10
	ADDQ $2304, SI
	DECQ R12
	JNZ  sblk
	K2STORE

DATA k2x0f<>+0(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA k2x0f<>+8(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA k2x0f<>+16(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA k2x0f<>+24(SB)/8, $0x0f0f0f0f0f0f0f0f
GLOBL k2x0f<>(SB), RODATA|NOPTR, $32

DATA k2x3f<>+0(SB)/8, $0x0000003f0000003f
DATA k2x3f<>+8(SB)/8, $0x0000003f0000003f
DATA k2x3f<>+16(SB)/8, $0x0000003f0000003f
DATA k2x3f<>+24(SB)/8, $0x0000003f0000003f
GLOBL k2x3f<>(SB), RODATA|NOPTR, $32

// Q6_K: K2DOT6 adds to ISUM the column's sums of sub-blocks over chunks
// W0..W3 (act dwords at off(R)), the pair sums widened after every 2
// chunks, times the scale pairs SC.
#define K2DOT6(R, off, W0, W1, W2, W3, SC, ISUM) \
	VPBROADCASTD off+0(R), Y0;    \
	VPMADDUBSW   Y0, W0, Y0;      \
	VPBROADCASTD off+4(R), Y1;    \
	VPMADDUBSW   Y1, W1, Y1;      \
	VPADDW       Y1, Y0, Y0;      \
	VPMADDWD     SC, Y0, Y0;      \
	VPADDD       Y0, ISUM, ISUM;  \
	VPBROADCASTD off+8(R), Y0;    \
	VPMADDUBSW   Y0, W2, Y0;      \
	VPBROADCASTD off+12(R), Y1;   \
	VPMADDUBSW   Y1, W3, Y1;      \
	VPADDW       Y1, Y0, Y0;      \
	VPMADDWD     SC, Y0, Y0;      \
	VPADDD       Y0, ISUM, ISUM

// K2TWO6: sub-blocks s (Y8..Y11, scale pairs Y7) and s+2 (Y12..Y15, Y6)
// of one column.
#define K2TWO6(R, offa, offb, ISUM) \
	K2DOT6(R, offa, Y8, Y9, Y10, Y11, Y7, ISUM); \
	K2DOT6(R, offb, Y12, Y13, Y14, Y15, Y6, ISUM)

// K2Q6LO and K2Q6HI: a chunk's 6-bit quants of the half into Z (R11 the
// half's quad: 32 bytes into its chunks): the ql nibbles (low, or high)
// ored with the two qh bits shifted into bits 4-5.
#define K2Q6LO(qoff, hoff, hsl, Z) \
	VPSLLW  $hsl, hoff(R11), Z;       \
	VPAND   k2x30<>(SB), Z, Z;        \
	VMOVDQU qoff(R11), Y0;            \
	VPAND   k2x0f<>(SB), Y0, Y0;      \
	VPOR    Y0, Z, Z

#define K2Q6HI(qoff, hoff, hsr, Z) \
	VPSRLW  $hsr, hoff(R11), Z;       \
	VPAND   k2x30<>(SB), Z, Z;        \
	VPSRLW  $4, qoff(R11), Y0;        \
	VPAND   k2x0f<>(SB), Y0, Y0;      \
	VPOR    Y0, Z, Z

// K2SC6: the 8 rows' scales of a sub-block as (s, s) int16 pairs in Z,
// from the (even, odd) byte pairs at off(R14): the even (imm 0xa0) or the
// odd (0xf5) one repeated.
#define K2SC6(off, imm, Z) \
	VPMOVSXBW off(R14), Z;  \
	VPSHUFLW  $imm, Z, Z;   \
	VPSHUFHW  $imm, Z, Z

// K2Q6PHASE: one half of a quad: 8 chunks unpacked (LO or HI with shifts
// sa for the first sub-block, sb for the second), their scales (sca, scb
// off R14, imm), both columns (labels l).
#define K2Q6PHASE(Q, sa, sb, sca, scb, imm, offa, offb, l) \
	Q(0, 512, sa, Y8);          \
	Q(64, 576, sa, Y9);         \
	Q(128, 640, sa, Y10);       \
	Q(192, 704, sa, Y11);       \
	Q(256, 512, sb, Y12);       \
	Q(320, 576, sb, Y13);       \
	Q(384, 640, sb, Y14);       \
	Q(448, 704, sb, Y15);       \
	K2SC6(sca, imm, Y7);        \
	K2SC6(scb, imm, Y6);        \
	K2TWO6(R9, offa, offb, Y2); \
	CMPQ t-8(SP), $1;           \
	JEQ  l;                     \
	K2TWO6(R10, offa, offb, Y3); \
l:

// func mulQ6_Kx16AVX2(out *float32, ldo int, w *byte, groups int, a *byte, aStride, nb, n int)
TEXT ·mulQ6_Kx16AVX2(SB), NOSPLIT, $40-64
	K2START

	K2LOOPS

sblk:
	PREFETCHT0 3360(SI)
	// R11: quad 0's chunks, 32 bytes in for the half; R14: the scale
	// pairs, 16 bytes in.
	MOVQ hh-40(SP), AX
	MOVQ AX, R11
	SHLQ $5, R11
	LEAQ 288(SI)(R11*1), R11
	MOVQ AX, R14
	SHLQ $4, R14
	ADDQ SI, R14
	// Quad (0,0): s0 = 0 (pair 0 even), s1 = 2 (pair 1 even), then s2 = 4,
	// s3 = 6; acts of s0 at 4.
	K2Q6PHASE(K2Q6LO, 4, 2, 32, 64, 0xa0, 4, 36, qa)
	K2Q6PHASE(K2Q6HI, 0, 2, 96, 128, 0xa0, 68, 100, qb)
	ADDQ $768, R11
	// Quad (0,1): s0 = 1 (odd members), acts at 20.
	K2Q6PHASE(K2Q6LO, 4, 2, 32, 64, 0xf5, 20, 52, qc)
	K2Q6PHASE(K2Q6HI, 0, 2, 96, 128, 0xf5, 84, 116, qd)
	ADDQ $768, R11
	// Quad (1,0): s0 = 8 (pair 4), acts at 132.
	K2Q6PHASE(K2Q6LO, 4, 2, 160, 192, 0xa0, 132, 164, qe)
	K2Q6PHASE(K2Q6HI, 0, 2, 224, 256, 0xa0, 196, 228, qf)
	ADDQ $768, R11
	// Quad (1,1): s0 = 9, acts at 148.
	K2Q6PHASE(K2Q6LO, 4, 2, 160, 192, 0xf5, 148, 180, qg)
	K2Q6PHASE(K2Q6HI, 0, 2, 224, 256, 0xf5, 212, 244, qh)

	// The scale pairs (even, odd) for the bsums; d; each column's end:
	// acc = fma(d*yd, isum - 32*msum, acc).
	VPMOVSXBW 32(R14), Y8
	VPMOVSXBW 64(R14), Y9
	VPMOVSXBW 96(R14), Y10
	VPMOVSXBW 128(R14), Y11
	VPMOVSXBW 160(R14), Y12
	VPMOVSXBW 192(R14), Y13
	VPMOVSXBW 224(R14), Y14
	VPMOVSXBW 256(R14), Y15
	MOVQ AX, R11
	SHLQ $4, R11
	VCVTPH2PS (SI)(R11*1), Y6
	K2MSUM(R9, 260)
	VPSLLD       $5, Y0, Y0
	VPSUBD       Y0, Y2, Y2
	VCVTDQ2PS    Y2, Y2
	VBROADCASTSS (R9), Y1
	VMULPS       Y6, Y1, Y1
	VFMADD231PS  Y2, Y1, Y4
	VPXOR        Y2, Y2, Y2
	CMPQ t-8(SP), $1
	JEQ  f6
	K2MSUM(R10, 260)
	VPSLLD       $5, Y0, Y0
	VPSUBD       Y0, Y3, Y3
	VCVTDQ2PS    Y3, Y3
	VBROADCASTSS (R10), Y1
	VMULPS       Y6, Y1, Y1
	VFMADD231PS  Y3, Y1, Y5
	VPXOR        Y3, Y3, Y3

f6:
	ADDQ $292, R9
	ADDQ $292, R10
	ADDQ $3360, SI
	DECQ R12
	JNZ  sblk
	K2STORE

DATA k2x30<>+0(SB)/8, $0x3030303030303030
DATA k2x30<>+8(SB)/8, $0x3030303030303030
DATA k2x30<>+16(SB)/8, $0x3030303030303030
DATA k2x30<>+24(SB)/8, $0x3030303030303030
GLOBL k2x30<>(SB), RODATA|NOPTR, $32

// Q5_K: as Q4_K, each chunk's fifth bit (bit j of the half's qh chunk at
// 256+64k(R14'), here hq(R11) with R11 the half's qh) shifted into bit 4
// (SH by s), masked and ored in; the pair sums widened every 4 chunks.
#define K2Q5(SH, s, NIBSH, qoff, hoff, Z) \
	SH      $s, hoff(AX), Z;          \
	VPAND   k2x10<>(SB), Z, Z;        \
	NIBSH(qoff(R11), Y0);             \
	VPAND   k2x0f<>(SB), Y0, Y0;      \
	VPOR    Y0, Z, Z

// The nibble sources: the chunk as loaded, or shifted right by 4.
#define K2LOAD(m, Z) VMOVDQU m, Z
#define K2HI4(m, Z) VPSRLW $4, m, Z

// K2Q5SUB: sub-block j (nibbles NIB of the pair's chunks at R11, qh bit
// by SH s), its scales at sc(R14), both columns (act offset off, label l).
#define K2Q5SUB(NIB, SH, s, sc, off, l) \
	K2Q5(SH, s, NIB, 0, 0, Y8);      \
	K2Q5(SH, s, NIB, 64, 64, Y9);    \
	K2Q5(SH, s, NIB, 128, 128, Y10); \
	K2Q5(SH, s, NIB, 192, 192, Y11); \
	K2Q5(SH, s, NIB, 256, 256, Y12); \
	K2Q5(SH, s, NIB, 320, 320, Y13); \
	K2Q5(SH, s, NIB, 384, 384, Y14); \
	K2Q5(SH, s, NIB, 448, 448, Y15); \
	K2SCALE(sc);                     \
	K2COLS(K2DOT44, off, l)

// func mulQ5_Kx16AVX2(out *float32, ldo int, w *byte, groups int, a *byte, aStride, nb, n int)
TEXT ·mulQ5_Kx16AVX2(SB), NOSPLIT, $40-64
	K2START

	K2LOOPS

sblk:
	PREFETCHT0 2816(SI)
	// R11: the half's nibble chunks (768 + 32*half), AX: its qh chunks
	// (256 + 32*half), R14: its scales (8*half).
	MOVQ hh-40(SP), R14
	MOVQ R14, R11
	SHLQ $5, R11
	LEAQ 256(SI)(R11*1), AX
	LEAQ 768(SI)(R11*1), R11
	SHLQ $3, R14
	ADDQ SI, R14
	K2Q5SUB(K2LOAD, VPSLLW, 4, 64, 4, j0)
	K2Q5SUB(K2HI4, VPSLLW, 3, 80, 36, j1)
	ADDQ $512, R11
	K2Q5SUB(K2LOAD, VPSLLW, 2, 96, 68, j2)
	K2Q5SUB(K2HI4, VPSLLW, 1, 112, 100, j3)
	ADDQ $512, R11
	K2Q5SUB(K2LOAD, VPSRLW, 0, 128, 132, j4)
	K2Q5SUB(K2HI4, VPSRLW, 1, 144, 164, j5)
	ADDQ $512, R11
	K2Q5SUB(K2LOAD, VPSRLW, 2, 160, 196, j6)
	K2Q5SUB(K2HI4, VPSRLW, 3, 176, 228, j7)

	K2MINS
	ADDQ $256, R9
	ADDQ $256, R10
	K2FINS4(f5)
	ADDQ $36, R9
	ADDQ $36, R10
	ADDQ $2816, SI
	DECQ R12
	JNZ  sblk
	K2STORE

DATA k2x10<>+0(SB)/8, $0x1010101010101010
DATA k2x10<>+8(SB)/8, $0x1010101010101010
DATA k2x10<>+16(SB)/8, $0x1010101010101010
DATA k2x10<>+24(SB)/8, $0x1010101010101010
GLOBL k2x10<>(SB), RODATA|NOPTR, $32
