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
