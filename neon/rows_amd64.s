//go:build amd64 && !purego

#include "textflag.h"
#include "rows_amd64.h"

// AVX2+F16C row-group kernels: RowGroup = 8 weight rows (wStride bytes
// apart) times n activation columns (aStride bytes apart) of 32-value
// blocks, out[j*ldo+r] (the Go wrappers in rows_amd64.go check every
// length). Blocks outer, columns inner: each block of the 8 rows is
// unpacked once and applied to every column; the column's 8 integer sums
// end up in the 8 int32 lanes of one vector (lane r = row r), are
// converted, scaled by the rows' dw (Y6, gathered once per block) and the
// column's da, and added to the column's 8 outputs, which accumulate in
// out itself (zeroed first).
//
// Every output is bit-identical to the generic one-row dot: the integer
// sums are exact for any input bytes; the float factor is rounded like
// the generic code ((sumi*dw)*da for Q4_0, (dw*da)*sumi for Q5_0 and
// Q8_0) with separate multiplies and adds (no FMA); the blocks are added
// to each output in block order.
//
// Q4_0 and Q5_0 transpose the 8 rows' quants once per block so that lane
// r of chunk c (c < 8) holds row r's 4 unsigned quants of values 4c..4c+3
// (Y8+c). The column's activation dword c is broadcast from memory and
// VPMADDUBSW(chunk, broadcast) summed over the chunks gives, per lane,
// two int16 word sums of q*a; o*sum(a) (o = 8 or 16, the quant offset,
// the same for every row) is formed from VPMADDUBSW(o, a) with the same
// word pairing and subtracted in int16. Each word then holds sum (q-o)*a
// over at most 16 (Q4_0) or 8 (Q5_0, two halves) values, at most
// 16*8*128 = 8*16*128 = 16384 in magnitude, so the int16 arithmetic
// (exact modulo 2^16) gives the right values, and VPMADDWD with ones
// widens to int32. No per-column horizontal reduction. Q8_0 (below) uses
// the same transposition with VPSIGNB; its one-column kernel
// (rowsQ8_0Q8_0x1AVX2) sign-extends the rows to int16 instead and reduces
// them with a VPHADDD tree (cheaper when the unpacking is not shared).
//
// Registers: DI out, SI row 0's block, AX row 4's block (unpack) or the
// columns left, R10 wStride, R11 3*wStride, DX column 0's block, R8
// aStride, CX ldo*4, BX n, R12 blocks left, R9 the column's block, R14 the
// column's outputs, R13 scratch (Q8_0).

// CORR8 leaves in Y3 (every dword) the word pair sums of maddubs(o, a) of
// the column block at R9 over its 8 dwords (o bytes in Y7).
#define CORR8 \
	VPMADDUBSW 2(R9), Y7, Y3;        \
	VPSHUFD    $0x4e, Y3, Y2;        \
	VPADDW     Y2, Y3, Y3;           \
	VPSHUFD    $0xb1, Y3, Y2;        \
	VPADDW     Y2, Y3, Y3;           \
	VPERM2I128 $0x01, Y3, Y3, Y2;    \
	VPADDW     Y2, Y3, Y3

// func rowsQ4_0Q8_0AVX2(out *float32, ldo int, w *byte, wStride int, a *byte, aStride, nb, n int)
TEXT ·rowsQ4_0Q8_0AVX2(SB), NOSPLIT, $8-64
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
	VMOVDQU rones16<>(SB), Y5
	MOVQ    DX, R9
	MOVQ    DI, R14
	MOVQ    BX, AX

	PCALIGN $16
q4col:
	VPBROADCASTD 2(R9), Y0
	VPMADDUBSW   Y0, Y8, Y0
	VPBROADCASTD 6(R9), Y1
	VPMADDUBSW   Y1, Y9, Y1
	VPADDW       Y1, Y0, Y0
	VPBROADCASTD 10(R9), Y1
	VPMADDUBSW   Y1, Y10, Y1
	VPBROADCASTD 14(R9), Y2
	VPMADDUBSW   Y2, Y11, Y2
	VPADDW       Y2, Y1, Y1
	VPADDW       Y1, Y0, Y0
	VPBROADCASTD 18(R9), Y1
	VPMADDUBSW   Y1, Y12, Y1
	VPBROADCASTD 22(R9), Y2
	VPMADDUBSW   Y2, Y13, Y2
	VPADDW       Y2, Y1, Y1
	VPBROADCASTD 26(R9), Y2
	VPMADDUBSW   Y2, Y14, Y2
	VPBROADCASTD 30(R9), Y3
	VPMADDUBSW   Y3, Y15, Y3
	VPADDW       Y3, Y2, Y2
	VPADDW       Y2, Y1, Y1
	VPADDW       Y1, Y0, Y0
	CORR8
	VPSUBW       Y3, Y0, Y0
	VPMADDWD     Y5, Y0, Y1
	FAC_Q4
	RACC
	JNZ q4col

	ADDQ $18, SI
	ADDQ $34, DX
	DECQ R12
	JNZ  q4block
	VZEROUPPER
	RET

// func rowsQ5_0Q8_0AVX2(out *float32, ldo int, w *byte, wStride int, a *byte, aStride, nb, n int)
TEXT ·rowsQ5_0Q8_0AVX2(SB), NOSPLIT, $8-64
	RARGS
	RZERO(q5zero)
	VMOVDQU rsixteens<>(SB), Y7
	PFINIT(R13, R9)

	PCALIGN $16
q5block:
	LEAQ    (SI)(R10*4), AX
	PFNEXT(R13)
	UNPACK_Q5
	RDW
	VMOVDQU rones16<>(SB), Y5
	MOVQ    DX, R9
	MOVQ    DI, R14
	MOVQ    BX, AX

	PCALIGN $16
q5col:
	VPBROADCASTD 2(R9), Y0
	VPMADDUBSW   Y0, Y8, Y0
	VPBROADCASTD 6(R9), Y2
	VPMADDUBSW   Y2, Y9, Y2
	VPADDW       Y2, Y0, Y0
	VPBROADCASTD 10(R9), Y2
	VPMADDUBSW   Y2, Y10, Y2
	VPBROADCASTD 14(R9), Y3
	VPMADDUBSW   Y3, Y11, Y3
	VPADDW       Y3, Y2, Y2
	VPADDW       Y2, Y0, Y0
	VPBROADCASTD 18(R9), Y1
	VPMADDUBSW   Y1, Y12, Y1
	VPBROADCASTD 22(R9), Y2
	VPMADDUBSW   Y2, Y13, Y2
	VPADDW       Y2, Y1, Y1
	VPBROADCASTD 26(R9), Y2
	VPMADDUBSW   Y2, Y14, Y2
	VPBROADCASTD 30(R9), Y3
	VPMADDUBSW   Y3, Y15, Y3
	VPADDW       Y3, Y2, Y2
	VPADDW       Y2, Y1, Y1
	VPMADDUBSW   2(R9), Y7, Y3
	VPSHUFD      $0x4e, Y3, Y2
	VPADDW       Y2, Y3, Y3
	VPSHUFD      $0xb1, Y3, Y2
	VPADDW       Y2, Y3, Y3
	VPERM2I128   $0x00, Y3, Y3, Y2
	VPSUBW       Y2, Y0, Y0
	VPERM2I128   $0x11, Y3, Y3, Y3
	VPSUBW       Y3, Y1, Y1
	VPMADDWD     Y5, Y0, Y0
	VPMADDWD     Y5, Y1, Y1
	VPADDD       Y0, Y1, Y1
	FAC_DD
	RACC
	JNZ q5col

	ADDQ $22, SI
	ADDQ $34, DX
	DECQ R12
	JNZ  q5block
	VZEROUPPER
	RET

DATA rx81<>+0(SB)/8, $0x8181818181818181
DATA rx81<>+8(SB)/8, $0x8181818181818181
DATA rx81<>+16(SB)/8, $0x8181818181818181
DATA rx81<>+24(SB)/8, $0x8181818181818181
GLOBL rx81<>(SB), RODATA|NOPTR, $32

DATA rones8<>+0(SB)/8, $0x0101010101010101
DATA rones8<>+8(SB)/8, $0x0101010101010101
DATA rones8<>+16(SB)/8, $0x0101010101010101
DATA rones8<>+24(SB)/8, $0x0101010101010101
GLOBL rones8<>(SB), RODATA|NOPTR, $32

// Q8_0: both sides signed. The rows are transposed like Q4_0 (chunk c,
// lane r = row r's int8 quants 4c..4c+3): |w| in Y8..Y15, w itself in the
// scratch at 32c(R13). Per column and chunk: VPSIGNB gives a*sign(w),
// VPMADDUBSW(|w|, a*sign(w)) the pair sums w*a (at most 2*128*127, no
// saturation) and VPMADDWD with ones the int32 lanes. This is exact unless
// an activation is -128 (VPSIGNB cannot negate it), so a column block
// holding one takes a slower exact path: a' = max(a, -127), the same sums,
// and sum w over the values where a = -128 (VPMADDUBSW of their 0/1 mask
// with w, at most 2048 per word) subtracted: a*w = a'*w - w there.
// Quantized activations (QuantizeQ8_0) never hold -128.

// SCHUNK leaves in Y the int32 lanes of chunk c's sums with the column
// (|w| chunk W, ones16 in Y5); M is a hook applied to the broadcast
// activations.
#define SCHUNK(c, W, Y, M) \
	VPBROADCASTD (2+4*(c))(R9), Y;     \
	M(Y);                              \
	VPSIGNB      (32*(c))(R13), Y, Y;  \
	VPMADDUBSW   Y, W, Y;              \
	VPMADDWD     Y5, Y, Y

#define NOCLAMP(Y)
#define CLAMP(Y) VPMAXSB rx81<>(SB), Y, Y

// SSUM leaves in Y1 the 8 rows' int32 sums (temporaries Y0, Y2, Y3).
#define SSUM(M) \
	SCHUNK(0, Y8, Y0, M);  \
	SCHUNK(1, Y9, Y1, M);  \
	VPADDD Y1, Y0, Y0;     \
	SCHUNK(2, Y10, Y1, M); \
	SCHUNK(3, Y11, Y2, M); \
	VPADDD Y2, Y1, Y1;     \
	VPADDD Y1, Y0, Y0;     \
	SCHUNK(4, Y12, Y1, M); \
	SCHUNK(5, Y13, Y2, M); \
	VPADDD Y2, Y1, Y1;     \
	SCHUNK(6, Y14, Y2, M); \
	SCHUNK(7, Y15, Y3, M); \
	VPADDD Y3, Y2, Y2;     \
	VPADDD Y2, Y1, Y1;     \
	VPADDD Y0, Y1, Y1

// ECHUNK leaves in Y the int16 pair sums of w over chunk c's values where
// a = -128 (rx80 in Y4).
#define ECHUNK(c, Y) \
	VPBROADCASTD (2+4*(c))(R9), Y;    \
	VPCMPEQB     Y4, Y, Y;            \
	VPAND        rones8<>(SB), Y, Y;  \
	VPMADDUBSW   (32*(c))(R13), Y, Y

// SCHUNKS transposes the 16 bytes at off of the 8 rows (chunks c..c+3)
// to the scratch at 32c(R13) and their absolute values to W0..W3.
#define SCHUNKS(off, c, W0, W1, W2, W3) \
	TRANS4(off);                 \
	VMOVDQU Y2, (32*(c))(R13);   \
	VMOVDQU Y3, (32*(c)+32)(R13); \
	VMOVDQU Y4, (32*(c)+64)(R13); \
	VMOVDQU Y5, (32*(c)+96)(R13); \
	VPABSB  Y2, W0;              \
	VPABSB  Y3, W1;              \
	VPABSB  Y4, W2;              \
	VPABSB  Y5, W3

// func rowsQ8_0Q8_0AVX2(out *float32, ldo int, w *byte, wStride int, a *byte, aStride, nb, n int)
TEXT ·rowsQ8_0Q8_0AVX2(SB), NOSPLIT, $296-64
	RARGS
	RZERO(q8zero)
	PFINIT(R13, R9)
	LEAQ 31(SP), R13
	ANDQ $-32, R13

	PCALIGN $16
q8block:
	LEAQ    (SI)(R10*4), AX
	PFNEXT5(R9)
	SCHUNKS(2, 0, Y8, Y9, Y10, Y11)
	SCHUNKS(18, 4, Y12, Y13, Y14, Y15)
	RDW
	VMOVDQU rones16<>(SB), Y5
	VMOVDQU rx80<>(SB), Y4
	MOVQ    DX, R9
	MOVQ    DI, R14
	MOVQ    BX, AX

	PCALIGN $16
q8col:
	VPCMPEQB 2(R9), Y4, Y0
	VPTEST   Y0, Y0
	JNZ      q8slow
	SSUM(NOCLAMP)

q8fac:
	FAC_DD
	RACC
	JNZ q8col

	ADDQ $34, SI
	ADDQ $34, DX
	DECQ R12
	JNZ  q8block
	VZEROUPPER
	RET

q8slow:
	SSUM(CLAMP)
	ECHUNK(0, Y0)
	ECHUNK(1, Y2)
	VPADDW   Y2, Y0, Y0
	ECHUNK(2, Y2)
	ECHUNK(3, Y3)
	VPADDW   Y3, Y2, Y2
	VPADDW   Y2, Y0, Y0
	ECHUNK(4, Y2)
	ECHUNK(5, Y3)
	VPADDW   Y3, Y2, Y2
	VPADDW   Y2, Y0, Y0
	ECHUNK(6, Y2)
	ECHUNK(7, Y3)
	VPADDW   Y3, Y2, Y2
	VPADDW   Y2, Y0, Y0
	VPMADDWD Y5, Y0, Y0
	VPSUBD   Y0, Y1, Y1
	JMP      q8fac

// Q8R1 leaves in Y the int32 lanes of one row's sum with the column
// (activations as int16 in Y0:Y1), the weights sign-extended on the fly.
#define Q8R1(m1, m2, Y, T) \
	VPMOVSXBW m1, Y;        \
	VPMADDWD  Y0, Y, Y;     \
	VPMOVSXBW m2, T;        \
	VPMADDWD  Y1, T, T;     \
	VPADDD    T, Y, Y

// func rowsQ8_0Q8_0x1AVX2(out *float32, ldo int, w *byte, wStride int, a *byte, aStride, nb, n int)
//
// The one-column case (n == 1): the integer sums of the 8 rows (int16
// VPMADDWD, exact for any bytes) reduced with a VPHADDD tree, the same
// float operations as rowsQ8_0Q8_0AVX2 (the sum in Y15).
TEXT ·rowsQ8_0Q8_0x1AVX2(SB), NOSPLIT, $8-64
	RARGS
	VXORPS Y15, Y15, Y15
	PFINIT(R13, R9)

	PCALIGN $16
q81block:
	LEAQ       (SI)(R10*4), AX
	PFNEXT5(R13)
	VPMOVSXBW  2(DX), Y0
	VPMOVSXBW  18(DX), Y1
	Q8R1(2(SI), 18(SI), Y2, Y7)
	Q8R1(2(SI)(R10*1), 18(SI)(R10*1), Y3, Y8)
	VPHADDD    Y3, Y2, Y2
	Q8R1(2(SI)(R10*2), 18(SI)(R10*2), Y3, Y9)
	Q8R1(2(SI)(R11*1), 18(SI)(R11*1), Y4, Y10)
	VPHADDD    Y4, Y3, Y3
	VPHADDD    Y3, Y2, Y2
	Q8R1(2(AX), 18(AX), Y3, Y11)
	Q8R1(2(AX)(R10*1), 18(AX)(R10*1), Y4, Y12)
	VPHADDD    Y4, Y3, Y3
	Q8R1(2(AX)(R10*2), 18(AX)(R10*2), Y4, Y13)
	Q8R1(2(AX)(R11*1), 18(AX)(R11*1), Y5, Y14)
	VPHADDD    Y5, Y4, Y4
	VPHADDD    Y4, Y3, Y3
	VPERM2I128 $0x21, Y3, Y2, Y4
	VPBLENDD   $0xf0, Y3, Y2, Y1
	VPADDD     Y4, Y1, Y1
	RDW
	MOVQ       DX, R9
	FAC_DD
	VADDPS     Y1, Y15, Y15
	ADDQ       $34, SI
	ADDQ       $34, DX
	DECQ       R12
	JNZ        q81block
	VMOVUPS    Y15, (DI)
	VZEROUPPER
	RET

