//go:build amd64 && !purego

#include "textflag.h"
#include "dot_amd64.h"

// AVX2+FMA+F16C dot products of one quantized weight row with up to eight
// activation columns (the Go wrappers in dot_amd64.go split larger n and
// check every length). Each weight block is loaded and unpacked once and
// then applied to every column; column k accumulates in its own register
// (Y8+k) with the same instruction sequence whatever n is, so out[k] is
// bit-identical to a run with that column alone.
//
// Register use in every dot kernel:
//	DI out, SI weight block, DX block of column 0, R8 column stride,
//	CX blocks left, BX n (1..8), R9 current column's block,
//	Y8..Y15 the column accumulators (8 float32 lanes each).

DATA nib<>+0(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA nib<>+8(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA nib<>+16(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA nib<>+24(SB)/8, $0x0f0f0f0f0f0f0f0f
GLOBL nib<>(SB), RODATA|NOPTR, $32

DATA eights<>+0(SB)/8, $0x0808080808080808
DATA eights<>+8(SB)/8, $0x0808080808080808
DATA eights<>+16(SB)/8, $0x0808080808080808
DATA eights<>+24(SB)/8, $0x0808080808080808
GLOBL eights<>(SB), RODATA|NOPTR, $32

DATA sixteens<>+0(SB)/8, $0x1010101010101010
DATA sixteens<>+8(SB)/8, $0x1010101010101010
DATA sixteens<>+16(SB)/8, $0x1010101010101010
DATA sixteens<>+24(SB)/8, $0x1010101010101010
GLOBL sixteens<>(SB), RODATA|NOPTR, $32

DATA ones16<>+0(SB)/8, $0x0001000100010001
DATA ones16<>+8(SB)/8, $0x0001000100010001
DATA ones16<>+16(SB)/8, $0x0001000100010001
DATA ones16<>+24(SB)/8, $0x0001000100010001
GLOBL ones16<>(SB), RODATA|NOPTR, $32

// bitShuf spreads a broadcast 32-bit word so that byte i holds byte i/8.
DATA bitShuf<>+0(SB)/8, $0x0000000000000000
DATA bitShuf<>+8(SB)/8, $0x0101010101010101
DATA bitShuf<>+16(SB)/8, $0x0202020202020202
DATA bitShuf<>+24(SB)/8, $0x0303030303030303
GLOBL bitShuf<>(SB), RODATA|NOPTR, $32

// bitMask has every bit but bit i%8 set in byte i.
DATA bitMask<>+0(SB)/8, $0x7fbfdfeff7fbfdfe
DATA bitMask<>+8(SB)/8, $0x7fbfdfeff7fbfdfe
DATA bitMask<>+16(SB)/8, $0x7fbfdfeff7fbfdfe
DATA bitMask<>+24(SB)/8, $0x7fbfdfeff7fbfdfe
GLOBL bitMask<>(SB), RODATA|NOPTR, $32

// shr4hi: dword shift counts 0 in the low 128-bit lane, 4 in the high one
// (a broadcast 16-byte nibble row becomes low nibbles | high nibbles).
DATA shr4hi<>+0(SB)/8, $0
DATA shr4hi<>+8(SB)/8, $0
DATA shr4hi<>+16(SB)/8, $0x0000000400000004
DATA shr4hi<>+24(SB)/8, $0x0000000400000004
GLOBL shr4hi<>(SB), RODATA|NOPTR, $32

// k4Shuf picks byte 0 into the low byte of every word, zero above.
DATA k4Shuf<>+0(SB)/8, $0x8000800080008000
DATA k4Shuf<>+8(SB)/8, $0x8000800080008000
DATA k4Shuf<>+16(SB)/8, $0x8000800080008000
DATA k4Shuf<>+24(SB)/8, $0x8000800080008000
GLOBL k4Shuf<>(SB), RODATA|NOPTR, $32

// k6Shuf picks byte 0 into the low 128-bit lane and byte 1 into the high one.
DATA k6Shuf<>+0(SB)/8, $0x0000000000000000
DATA k6Shuf<>+8(SB)/8, $0x0000000000000000
DATA k6Shuf<>+16(SB)/8, $0x0101010101010101
DATA k6Shuf<>+24(SB)/8, $0x0101010101010101
GLOBL k6Shuf<>(SB), RODATA|NOPTR, $32

DATA twos<>+0(SB)/8, $0x0202020202020202
DATA twos<>+8(SB)/8, $0x0202020202020202
DATA twos<>+16(SB)/8, $0x0202020202020202
DATA twos<>+24(SB)/8, $0x0202020202020202
GLOBL twos<>(SB), RODATA|NOPTR, $32

DATA m03<>+0(SB)/8, $0x0303030303030303
DATA m03<>+8(SB)/8, $0x0303030303030303
DATA m03<>+16(SB)/8, $0x0303030303030303
DATA m03<>+24(SB)/8, $0x0303030303030303
GLOBL m03<>(SB), RODATA|NOPTR, $32

DATA m0c<>+0(SB)/8, $0x0c0c0c0c0c0c0c0c
DATA m0c<>+8(SB)/8, $0x0c0c0c0c0c0c0c0c
DATA m0c<>+16(SB)/8, $0x0c0c0c0c0c0c0c0c
DATA m0c<>+24(SB)/8, $0x0c0c0c0c0c0c0c0c
GLOBL m0c<>(SB), RODATA|NOPTR, $32

DATA m30<>+0(SB)/8, $0x3030303030303030
DATA m30<>+8(SB)/8, $0x3030303030303030
DATA m30<>+16(SB)/8, $0x3030303030303030
DATA m30<>+24(SB)/8, $0x3030303030303030
GLOBL m30<>(SB), RODATA|NOPTR, $32

DATA mc0<>+0(SB)/8, $0xc0c0c0c0c0c0c0c0
DATA mc0<>+8(SB)/8, $0xc0c0c0c0c0c0c0c0
DATA mc0<>+16(SB)/8, $0xc0c0c0c0c0c0c0c0
DATA mc0<>+24(SB)/8, $0xc0c0c0c0c0c0c0c0
GLOBL mc0<>(SB), RODATA|NOPTR, $32

// The 32-value block kernels (Q4_0, Q5_0, Q8_0) equal the generic code bit
// for bit: each block's integer sum is exact, its float factor is formed
// with the generic code's roundings ((sumi*dx)*dy for Q4_0, (dx*dy)*sumi
// for Q5_0 and Q8_0) and the blocks are added to a float32 sum in block
// order. Full groups of 8 blocks are unpacked once into a 32-byte aligned
// scratch area (R13); per column the 8 block sums are reduced into the 8
// lanes of one vector, the factors are formed in 8 lanes at once and the
// lanes are added in order to the column's sum (X8+k). The nb%8 blocks
// after the last group go one at a time.
//
// The integer sums are exact for any bytes. Q4_0/Q5_0 weights x = q-8 or
// q-16 are signed and the activations are made unsigned, y^0x80 = y+128:
// maddubs(y+128, x) has pair sums of at most 255*16*2 (no saturation), and
// the block's 128*sum(x), shared by all columns, is subtracted once per
// group. Q8_0 sign-extends both sides to 16 bits.
//
// Scratch: 0..255 the group's signed weights (Q8_0: 0..511 as int16),
// 512..543 the 8 blocks' 128*sum(x).

DATA x80<>+0(SB)/8, $0x8080808080808080
DATA x80<>+8(SB)/8, $0x8080808080808080
DATA x80<>+16(SB)/8, $0x8080808080808080
DATA x80<>+24(SB)/8, $0x8080808080808080
GLOBL x80<>(SB), RODATA|NOPTR, $32

DATA allOnes<>+0(SB)/8, $-1
DATA allOnes<>+8(SB)/8, $-1
DATA allOnes<>+16(SB)/8, $-1
DATA allOnes<>+24(SB)/8, $-1
GLOBL allOnes<>(SB), RODATA|NOPTR, $32

// 128*8*32 and 128*16*32 in every dword: 128*sum(x) = 128*sum(q) - bias.
DATA bias4<>+0(SB)/8, $0x0000800000008000
DATA bias4<>+8(SB)/8, $0x0000800000008000
DATA bias4<>+16(SB)/8, $0x0000800000008000
DATA bias4<>+24(SB)/8, $0x0000800000008000
GLOBL bias4<>(SB), RODATA|NOPTR, $32

DATA bias5<>+0(SB)/8, $0x0001000000010000
DATA bias5<>+8(SB)/8, $0x0001000000010000
DATA bias5<>+16(SB)/8, $0x0001000000010000
DATA bias5<>+24(SB)/8, $0x0001000000010000
GLOBL bias5<>(SB), RODATA|NOPTR, $32

// XBLK leaves in dst the int32 lanes of sum (y+128)*x of group block g
// (signed weights at 32g(R13), 0x80 bytes in Y5, ones16 in Y6).
#define XBLK(g, dst) \
	VPXOR      (2+34*(g))(R9), Y5, Y0; \
	VPMADDUBSW (32*(g))(R13), Y0, Y0;  \
	VPMADDWD   Y6, Y0, dst

// SBLK: sum x*y of Q8_0 group block g (16-bit weights at 64g(R13)).
#define SBLK(g, dst) \
	VPMOVSXBW (2+34*(g))(R9), Y0;       \
	VPMADDWD  (64*(g))(R13), Y0, Y0;    \
	VPMOVSXBW (18+34*(g))(R9), Y1;      \
	VPMADDWD  (64*(g)+32)(R13), Y1, Y1; \
	VPADDD    Y1, Y0, dst

// TREE8 leaves in Y0 the sums of the int32 lanes of BLK(0..7, reg), block
// g in lane g (uses Y0..Y4 and the odd register t).
#define TREE8(BLK, t) \
	BLK(0, Y2);                    \
	BLK(1, t);                     \
	VPHADDD    t, Y2, Y3;          \
	BLK(2, Y2);                    \
	BLK(3, t);                     \
	VPHADDD    t, Y2, Y4;          \
	VPHADDD    Y4, Y3, Y3;         \
	BLK(4, Y2);                    \
	BLK(5, t);                     \
	VPHADDD    t, Y2, Y4;          \
	BLK(6, Y2);                    \
	BLK(7, t);                     \
	VPHADDD    t, Y2, Y2;          \
	VPHADDD    Y2, Y4, Y4;         \
	VPERM2I128 $0x20, Y4, Y3, Y0;  \
	VPERM2I128 $0x31, Y4, Y3, Y1;  \
	VPADDD     Y1, Y0, Y0

// DY8 gathers the F16 scales of the column's 8 group blocks into Y1.
#define DY8 \
	MOVWLZX (R9), AX;            \
	VMOVD   AX, X1;              \
	VPINSRW $1, 34(R9), X1, X1;  \
	VPINSRW $2, 68(R9), X1, X1;  \
	VPINSRW $3, 102(R9), X1, X1; \
	VPINSRW $4, 136(R9), X1, X1; \
	VPINSRW $5, 170(R9), X1, X1; \
	VPINSRW $6, 204(R9), X1, X1; \
	VPINSRW $7, 238(R9), X1, X1; \
	VCVTPH2PS X1, Y1

// ADD8 adds the 8 float lanes of Y0 to acc in lane order.
#define ADD8(acc) \
	VADDSS       X0, acc, acc;   \
	VMOVSHDUP    X0, X1;         \
	VADDSS       X1, acc, acc;   \
	VMOVHLPS     X0, X0, X1;     \
	VADDSS       X1, acc, acc;   \
	VPSHUFD      $0xff, X0, X1;  \
	VADDSS       X1, acc, acc;   \
	VEXTRACTF128 $1, Y0, X0;     \
	VADDSS       X0, acc, acc;   \
	VMOVSHDUP    X0, X1;         \
	VADDSS       X1, acc, acc;   \
	VMOVHLPS     X0, X0, X1;     \
	VADDSS       X1, acc, acc;   \
	VPSHUFD      $0xff, X0, X1;  \
	VADDSS       X1, acc, acc

// Float factors, 8 lanes (dx in Y7, dy in Y1, float sums in Y0) or one
// (X7, X1, X0): Q4_0 rounds (sumi*dx)*dy, Q5_0 and Q8_0 (dx*dy)*sumi.
#define FAC_Q4 \
	VMULPS Y7, Y0, Y0; \
	VMULPS Y1, Y0, Y0

#define FAC_DD \
	VMULPS Y1, Y7, Y1; \
	VMULPS Y1, Y0, Y0

#define FAC1_Q4 \
	VMULSS X7, X0, X0; \
	VMULSS X1, X0, X0

#define FAC1_DD \
	VMULSS X1, X7, X1; \
	VMULSS X1, X0, X0

// Group columns.
#define GCOL_X(FAC, acc) \
	TREE8(XBLK, Y0);          \
	VPSUBD 512(R13), Y0, Y0;  \
	VCVTDQ2PS Y0, Y0;         \
	DY8;                      \
	FAC;                      \
	ADD8(acc);                \
	ADDQ R8, R9

#define GCOL_Q4(acc) GCOL_X(FAC_Q4, acc)
#define GCOL_Q5(acc) GCOL_X(FAC_DD, acc)

#define GCOL_Q8(acc) \
	TREE8(SBLK, Y0);   \
	VCVTDQ2PS Y0, Y0;  \
	DY8;               \
	FAC_DD;            \
	ADD8(acc);         \
	ADDQ R8, R9

// INTSUM leaves in X0 lane 0 the sum of the int32 lanes of Y0.
#define INTSUM \
	VEXTRACTI128 $1, Y0, X1;    \
	VPADDD       X1, X0, X0;    \
	VPSHUFD      $0x4e, X0, X1; \
	VPADDD       X1, X0, X0;    \
	VPSHUFD      $0xb1, X0, X1; \
	VPADDD       X1, X0, X0

// DY1 loads the column block's F16 scale into X1 as float32.
#define DY1 \
	VPBROADCASTW (R9), X1; \
	VCVTPH2PS    X1, X1

// Single-block columns: signed weights in Y2 and 128*sum(x) in X3 (Q4_0,
// Q5_0), or 16-bit weights in Y2:Y3 (Q8_0).
#define TCOL_X(FAC, acc) \
	VPXOR      2(R9), Y5, Y0; \
	VPMADDUBSW Y2, Y0, Y0;    \
	VPMADDWD   Y6, Y0, Y0;    \
	INTSUM;                   \
	VPSUBD     X3, X0, X0;    \
	VCVTDQ2PS  X0, X0;        \
	DY1;                      \
	FAC;                      \
	VADDSS X0, acc, acc;      \
	ADDQ R8, R9

#define TCOL_Q4(acc) TCOL_X(FAC1_Q4, acc)
#define TCOL_Q5(acc) TCOL_X(FAC1_DD, acc)

#define TCOL_Q8(acc) \
	VPMOVSXBW 2(R9), Y0;      \
	VPMADDWD  Y2, Y0, Y0;     \
	VPMOVSXBW 18(R9), Y1;     \
	VPMADDWD  Y3, Y1, Y1;     \
	VPADDD    Y1, Y0, Y0;     \
	INTSUM;                   \
	VCVTDQ2PS X0, X0;         \
	DY1;                      \
	FAC1_DD;                  \
	VADDSS X0, acc, acc;      \
	ADDQ R8, R9

// STORE8 writes the n column sums X8.. to out.
#define STORE8(done) \
	VMOVSS X8, 0(DI);   \
	CMPQ   BX, $1;      \
	JEQ    done;        \
	VMOVSS X9, 4(DI);   \
	CMPQ   BX, $2;      \
	JEQ    done;        \
	VMOVSS X10, 8(DI);  \
	CMPQ   BX, $3;      \
	JEQ    done;        \
	VMOVSS X11, 12(DI); \
	CMPQ   BX, $4;      \
	JEQ    done;        \
	VMOVSS X12, 16(DI); \
	CMPQ   BX, $5;      \
	JEQ    done;        \
	VMOVSS X13, 20(DI); \
	CMPQ   BX, $6;      \
	JEQ    done;        \
	VMOVSS X14, 24(DI); \
	CMPQ   BX, $7;      \
	JEQ    done;        \
	VMOVSS X15, 28(DI)

// DX8 gathers the F16 scales of the 8 group weight blocks (size bytes
// apart) into Y7 as float32.
#define DX8(size) \
	MOVWLZX (SI), AX;                   \
	VMOVD   AX, X7;                     \
	VPINSRW $1, (1*(size))(SI), X7, X7; \
	VPINSRW $2, (2*(size))(SI), X7, X7; \
	VPINSRW $3, (3*(size))(SI), X7, X7; \
	VPINSRW $4, (4*(size))(SI), X7, X7; \
	VPINSRW $5, (5*(size))(SI), X7, X7; \
	VPINSRW $6, (6*(size))(SI), X7, X7; \
	VPINSRW $7, (7*(size))(SI), X7, X7; \
	VCVTPH2PS X7, Y7

// LOADQ4 / LOADQ5 leave in Y0 the 32 unsigned quants of the Q4_0 / Q5_0
// block at off(SI).
#define LOADQ4(off) \
	VBROADCASTI128 (off+2)(SI), Y0;     \
	VPSRLVD        shr4hi<>(SB), Y0, Y0; \
	VPAND          nib<>(SB), Y0, Y0

#define LOADQ5(off) \
	VBROADCASTI128 (off+6)(SI), Y0;     \
	VPSRLVD      shr4hi<>(SB), Y0, Y0;  \
	VPAND        nib<>(SB), Y0, Y0;     \
	VPBROADCASTD (off+2)(SI), Y1;       \
	VPSHUFB      bitShuf<>(SB), Y1, Y1; \
	VPOR         bitMask<>(SB), Y1, Y1; \
	VPCMPEQB     allOnes<>(SB), Y1, Y1; \
	VPAND        sixteens<>(SB), Y1, Y1; \
	VPOR         Y1, Y0, Y0

// GU_Q4 / GU_Q5 unpack group block g: x = q - offset to the scratch, and
// the partial sums of q (VPSADBW against the zero Y7) to S.
#define GU_Q4(g, S) \
	LOADQ4(18*(g));                \
	VPSADBW Y7, Y0, S;             \
	VPSUBB  eights<>(SB), Y0, Y0;  \
	VMOVDQU Y0, (32*(g))(R13)

#define GU_Q5(g, S) \
	LOADQ5(22*(g));                  \
	VPSADBW Y7, Y0, S;               \
	VPSUBB  sixteens<>(SB), Y0, Y0;  \
	VMOVDQU Y0, (32*(g))(R13)

#define GU_Q8(g) \
	VPMOVSXBW (34*(g)+2)(SI), Y0;  \
	VMOVDQU   Y0, (64*(g))(R13);   \
	VPMOVSXBW (34*(g)+18)(SI), Y0; \
	VMOVDQU   Y0, (64*(g)+32)(R13)

// GUNPACKX unpacks a Q4_0/Q5_0 group: weights, 128*sum(x) per block at
// 512(R13), dx in Y7, and the column constants in Y5 and Y6.
#define GUNPACKX(GU, bias, size) \
	VPXOR   Y7, Y7, Y7;            \
	TREE8(GU, Y5);                 \
	VPSLLD  $7, Y0, Y0;            \
	VPSUBD  bias, Y0, Y0;          \
	VMOVDQU Y0, 512(R13);          \
	DX8(size);                     \
	VMOVDQU x80<>(SB), Y5;         \
	VMOVDQU ones16<>(SB), Y6

// UNPACK1X unpacks one Q4_0/Q5_0 block: x in Y2, 128*sum(x) in X3, dx in
// X7, the column constants in Y5 and Y6.
#define UNPACK1X(LOADQ, off, bias) \
	VPXOR        Y7, Y7, Y7;      \
	LOADQ(0);                     \
	VPSADBW      Y7, Y0, Y3;      \
	VEXTRACTI128 $1, Y3, X1;      \
	VPADDD       X1, X3, X3;      \
	VPSHUFD      $0x4e, X3, X1;   \
	VPADDD       X1, X3, X3;      \
	VPSLLD       $7, X3, X3;      \
	VPSUBD       bias, X3, X3;    \
	VPSUBB       off, Y0, Y2;     \
	VPBROADCASTW (SI), X7;        \
	VCVTPH2PS    X7, X7;          \
	VMOVDQU      x80<>(SB), Y5;   \
	VMOVDQU      ones16<>(SB), Y6

#define BLOCKPROLOGUE \
	ARGS;             \
	ZERO8;            \
	LEAQ 31(SP), R13; \
	ANDQ $-32, R13

// func dotQ4_0Q8_0AVX2(out *float32, w, a *byte, aStride, nb, n int)
TEXT ·dotQ4_0Q8_0AVX2(SB), NOSPLIT, $576-48
	BLOCKPROLOGUE
	SHRQ $3, CX
	JZ   q40tail

	PCALIGN $16
q40group:
	GUNPACKX(GU_Q4, bias4<>(SB), 18)
	EACHCOLX(GCOL_Q4, q40gnext)

q40gnext:
	ADDQ $(8*18), SI
	ADDQ $(8*34), DX
	DECQ CX
	JNZ  q40group

q40tail:
	MOVQ nb+32(FP), CX
	ANDQ $7, CX
	JZ   q40done

q40one:
	UNPACK1X(LOADQ4, eights<>(SB), bias4<>(SB))
	EACHCOLX(TCOL_Q4, q40onext)

q40onext:
	ADDQ $18, SI
	ADDQ $34, DX
	DECQ CX
	JNZ  q40one

q40done:
	STORE8(q40ret)

q40ret:
	VZEROUPPER
	RET

// func dotQ5_0Q8_0AVX2(out *float32, w, a *byte, aStride, nb, n int)
TEXT ·dotQ5_0Q8_0AVX2(SB), NOSPLIT, $576-48
	BLOCKPROLOGUE
	SHRQ $3, CX
	JZ   q50tail

	PCALIGN $16
q50group:
	GUNPACKX(GU_Q5, bias5<>(SB), 22)
	EACHCOLX(GCOL_Q5, q50gnext)

q50gnext:
	ADDQ $(8*22), SI
	ADDQ $(8*34), DX
	DECQ CX
	JNZ  q50group

q50tail:
	MOVQ nb+32(FP), CX
	ANDQ $7, CX
	JZ   q50done

q50one:
	UNPACK1X(LOADQ5, sixteens<>(SB), bias5<>(SB))
	EACHCOLX(TCOL_Q5, q50onext)

q50onext:
	ADDQ $22, SI
	ADDQ $34, DX
	DECQ CX
	JNZ  q50one

q50done:
	STORE8(q50ret)

q50ret:
	VZEROUPPER
	RET

// func dotQ8_0Q8_0AVX2(out *float32, w, a *byte, aStride, nb, n int)
TEXT ·dotQ8_0Q8_0AVX2(SB), NOSPLIT, $576-48
	BLOCKPROLOGUE
	SHRQ $3, CX
	JZ   q80tail

	PCALIGN $16
q80group:
	GU_Q8(0)
	GU_Q8(1)
	GU_Q8(2)
	GU_Q8(3)
	GU_Q8(4)
	GU_Q8(5)
	GU_Q8(6)
	GU_Q8(7)
	DX8(34)
	EACHCOLX(GCOL_Q8, q80gnext)

q80gnext:
	ADDQ $(8*34), SI
	ADDQ $(8*34), DX
	DECQ CX
	JNZ  q80group

q80tail:
	MOVQ nb+32(FP), CX
	ANDQ $7, CX
	JZ   q80done

q80one:
	VPMOVSXBW    2(SI), Y2
	VPMOVSXBW    18(SI), Y3
	VPBROADCASTW (SI), X7
	VCVTPH2PS    X7, X7
	EACHCOLX(TCOL_Q8, q80onext)

q80onext:
	ADDQ $34, SI
	ADDQ $34, DX
	DECQ CX
	JNZ  q80one

q80done:
	STORE8(q80ret)

q80ret:
	VZEROUPPER
	RET

// The one-column kernels compute the same float operations on the same
// values as the kernels above (so the same bits), without the scratch:
// each block is unpacked into registers and used at once. Unsigned weights
// q take the offset through the activations: sum (q-o)*y =
// maddubs(q, y) - maddubs(o, y), exact in int16 (Y15 nibble mask, Y14 the
// offset bytes, Y13 ones16).

// B1_Q4 / B1_Q5 / B1_Q8 leave in dst the int32 lanes of block g's sum
// (weights at SI, activations at DX; temporaries Y0, Y1 and Y5).
#define B1_Q4(g, dst) \
	VBROADCASTI128 (18*(g)+2)(SI), Y0;   \
	VPSRLVD     shr4hi<>(SB), Y0, Y0;    \
	VPAND       Y15, Y0, Y0;             \
	VPMADDUBSW  (34*(g)+2)(DX), Y14, Y1; \
	VPMADDUBSW  (34*(g)+2)(DX), Y0, Y0;  \
	VPSUBW      Y1, Y0, Y0;              \
	VPMADDWD    Y13, Y0, dst

#define B1_Q5(g, dst) \
	LOADQ5(22*(g));                      \
	VPMADDUBSW  (34*(g)+2)(DX), Y14, Y1; \
	VPMADDUBSW  (34*(g)+2)(DX), Y0, Y0;  \
	VPSUBW      Y1, Y0, Y0;              \
	VPMADDWD    Y13, Y0, dst

#define B1_Q8(g, dst) \
	VPMOVSXBW (34*(g)+2)(SI), Y0;  \
	VPMOVSXBW (34*(g)+2)(DX), Y1;  \
	VPMADDWD  Y1, Y0, Y0;          \
	VPMOVSXBW (34*(g)+18)(SI), Y1; \
	VPMOVSXBW (34*(g)+18)(DX), Y5; \
	VPMADDWD  Y5, Y1, Y1;          \
	VPADDD    Y1, Y0, dst

#define ONEPROLOGUE \
	MOVQ    out+0(FP), DI;        \
	MOVQ    w+8(FP), SI;          \
	MOVQ    a+16(FP), DX;         \
	MOVQ    nb+32(FP), CX;        \
	VXORPS  X8, X8, X8;           \
	VMOVDQU nib<>(SB), Y15;       \
	VMOVDQU ones16<>(SB), Y13

// ONEGROUP: 8 blocks of one column.
#define ONEGROUP(B1, FAC, size) \
	TREE8(B1, Y0);        \
	VCVTDQ2PS Y0, Y0;     \
	DX8(size);            \
	MOVQ DX, R9;          \
	DY8;                  \
	FAC;                  \
	ADD8(X8)

// ONEBLOCK: a single block.
#define ONEBLOCK(B1, FAC1) \
	B1(0, Y0);               \
	INTSUM;                  \
	VCVTDQ2PS X0, X0;        \
	VPBROADCASTW (SI), X7;   \
	VCVTPH2PS    X7, X7;     \
	MOVQ DX, R9;             \
	DY1;                     \
	FAC1;                    \
	VADDSS X0, X8, X8

// func dotQ4_0Q8_0x1AVX2(out *float32, w, a *byte, aStride, nb, n int)
TEXT ·dotQ4_0Q8_0x1AVX2(SB), NOSPLIT, $0-48
	ONEPROLOGUE
	VMOVDQU eights<>(SB), Y14
	SHRQ    $3, CX
	JZ      q41tail

	PCALIGN $16
q41group:
	ONEGROUP(B1_Q4, FAC_Q4, 18)
	ADDQ $(8*18), SI
	ADDQ $(8*34), DX
	DECQ CX
	JNZ  q41group

q41tail:
	MOVQ nb+32(FP), CX
	ANDQ $7, CX
	JZ   q41done

q41one:
	ONEBLOCK(B1_Q4, FAC1_Q4)
	ADDQ $18, SI
	ADDQ $34, DX
	DECQ CX
	JNZ  q41one

q41done:
	VMOVSS X8, (DI)
	VZEROUPPER
	RET

// func dotQ5_0Q8_0x1AVX2(out *float32, w, a *byte, aStride, nb, n int)
TEXT ·dotQ5_0Q8_0x1AVX2(SB), NOSPLIT, $0-48
	ONEPROLOGUE
	VMOVDQU sixteens<>(SB), Y14
	SHRQ    $3, CX
	JZ      q51tail

	PCALIGN $16
q51group:
	ONEGROUP(B1_Q5, FAC_DD, 22)
	ADDQ $(8*22), SI
	ADDQ $(8*34), DX
	DECQ CX
	JNZ  q51group

q51tail:
	MOVQ nb+32(FP), CX
	ANDQ $7, CX
	JZ   q51done

q51one:
	ONEBLOCK(B1_Q5, FAC1_DD)
	ADDQ $22, SI
	ADDQ $34, DX
	DECQ CX
	JNZ  q51one

q51done:
	VMOVSS X8, (DI)
	VZEROUPPER
	RET

// func dotQ8_0Q8_0x1AVX2(out *float32, w, a *byte, aStride, nb, n int)
TEXT ·dotQ8_0Q8_0x1AVX2(SB), NOSPLIT, $0-48
	ONEPROLOGUE
	SHRQ    $3, CX
	JZ      q81tail

	PCALIGN $16
q81group:
	ONEGROUP(B1_Q8, FAC_DD, 34)
	ADDQ $(8*34), SI
	ADDQ $(8*34), DX
	DECQ CX
	JNZ  q81group

q81tail:
	MOVQ nb+32(FP), CX
	ANDQ $7, CX
	JZ   q81done

q81one:
	ONEBLOCK(B1_Q8, FAC1_DD)
	ADDQ $34, SI
	ADDQ $34, DX
	DECQ CX
	JNZ  q81one

q81done:
	VMOVSS X8, (DI)
	VZEROUPPER
	RET

// The k-quant kernels unpack each 256-value super-block once into a
// 32-byte aligned scratch area (R13) and then run every column over it:
//	0..255:   the 256 weights as unsigned bytes, 32 per sub-block k
//	256..511: per sub-block k, the int16 scale vector applied by VPMADDWD
//	512..543: the int16 vector applied to the Q8_K bsums

// MADDK adds the scaled products of sub-block k (weights at k*32(R13), q8 at
// 4+k*32(R9), scale vector at 256+k*32(R13)) to the int32 lanes of Y0.
#define MADDK(k) \
	VMOVDQU    ((k)*32)(R13), Y1;       \
	VPMADDUBSW (4+(k)*32)(R9), Y1, Y1;  \
	VPMADDWD   (256+(k)*32)(R13), Y1, Y1; \
	VPADDD     Y1, Y0, Y0

// SUMK leaves in Y0 the int32 lanes of sum scale*q*q8 over a super-block.
#define SUMK \
	VMOVDQU    0(R13), Y0;       \
	VPMADDUBSW 4(R9), Y0, Y0;    \
	VPMADDWD   256(R13), Y0, Y0; \
	MADDK(1);                    \
	MADDK(2);                    \
	MADDK(3);                    \
	MADDK(4);                    \
	MADDK(5);                    \
	MADDK(6);                    \
	MADDK(7)

// COLQ4K: acc += (d*yd) * sum - (dmin*yd) * (mins · bsums); Y6 = d, Y7 = dmin.
#define COLQ4K(acc) \
	SUMK;                       \
	VMOVDQU  260(R9), Y2;       \
	VPMADDWD 512(R13), Y2, Y2;  \
	VCVTDQ2PS Y0, Y0;           \
	VCVTDQ2PS Y2, Y2;           \
	VBROADCASTSS (R9), Y3;      \
	VMULPS Y6, Y3, Y4;          \
	VMULPS Y7, Y3, Y3;          \
	VFMADD231PS Y4, Y0, acc;    \
	VFNMADD231PS Y3, Y2, acc;   \
	ADDQ R8, R9

// func dotQ4_KQ8_KAVX2(out *float32, w, a *byte, aStride, nb, n int)
TEXT ·dotQ4_KQ8_KAVX2(SB), 0, $576-48
	ARGS
	ZERO8
	LEAQ  31(SP), R13
	ANDQ  $-32, R13
	TESTQ CX, CX
	JZ    q4kdone

	PCALIGN $16
q4kloop:
	// The 6-bit scales and mins (ggml's utmp shuffle): scales 0..3 in AX,
	// 4..7 in R10; mins 0..3 in R9, 4..7 in R11.
	MOVL 4(SI), AX
	MOVL 8(SI), R9
	MOVL 12(SI), R10
	MOVL R10, R11
	SHRL $4, R11
	ANDL $0x0f0f0f0f, R11
	MOVL R9, R12
	SHRL $6, R12
	ANDL $0x03030303, R12
	SHLL $4, R12
	ORL  R12, R11
	ANDL $0x3f3f3f3f, R9
	ANDL $0x0f0f0f0f, R10
	MOVL AX, R12
	SHRL $6, R12
	ANDL $0x03030303, R12
	SHLL $4, R12
	ORL  R12, R10
	ANDL $0x3f3f3f3f, AX
	SHLQ $32, R10
	ORQ  AX, R10
	SHLQ $32, R11
	ORQ  R9, R11

	// Scale vectors: scale k zero-extended into all 16 words.
	VMOVQ        R10, X1
	VPBROADCASTQ X1, Y1
	VMOVDQU      k4Shuf<>(SB), Y3
	VMOVDQU      ones16<>(SB), Y4
	VPSHUFB      Y3, Y1, Y0
	VMOVDQU      Y0, 256(R13)
	VPADDW       Y4, Y3, Y3
	VPSHUFB      Y3, Y1, Y0
	VMOVDQU      Y0, 288(R13)
	VPADDW       Y4, Y3, Y3
	VPSHUFB      Y3, Y1, Y0
	VMOVDQU      Y0, 320(R13)
	VPADDW       Y4, Y3, Y3
	VPSHUFB      Y3, Y1, Y0
	VMOVDQU      Y0, 352(R13)
	VPADDW       Y4, Y3, Y3
	VPSHUFB      Y3, Y1, Y0
	VMOVDQU      Y0, 384(R13)
	VPADDW       Y4, Y3, Y3
	VPSHUFB      Y3, Y1, Y0
	VMOVDQU      Y0, 416(R13)
	VPADDW       Y4, Y3, Y3
	VPSHUFB      Y3, Y1, Y0
	VMOVDQU      Y0, 448(R13)
	VPADDW       Y4, Y3, Y3
	VPSHUFB      Y3, Y1, Y0
	VMOVDQU      Y0, 480(R13)

	// Mins: min j in words 2j and 2j+1, against bsums 2j and 2j+1.
	VMOVQ       R11, X2
	VPMOVZXBW   X2, X2
	VPUNPCKLWD  X2, X2, X3
	VPUNPCKHWD  X2, X2, X4
	VINSERTI128 $1, X4, Y3, Y3
	VMOVDQU     Y3, 512(R13)

	// Weights: the low nibbles of 32 bytes are sub-block 2j, the high
	// nibbles sub-block 2j+1.
	VMOVDQU nib<>(SB), Y5
	VMOVDQU 16(SI), Y1
	VPAND   Y5, Y1, Y2
	VMOVDQU Y2, 0(R13)
	VPSRLW  $4, Y1, Y1
	VPAND   Y5, Y1, Y1
	VMOVDQU Y1, 32(R13)
	VMOVDQU 48(SI), Y1
	VPAND   Y5, Y1, Y2
	VMOVDQU Y2, 64(R13)
	VPSRLW  $4, Y1, Y1
	VPAND   Y5, Y1, Y1
	VMOVDQU Y1, 96(R13)
	VMOVDQU 80(SI), Y1
	VPAND   Y5, Y1, Y2
	VMOVDQU Y2, 128(R13)
	VPSRLW  $4, Y1, Y1
	VPAND   Y5, Y1, Y1
	VMOVDQU Y1, 160(R13)
	VMOVDQU 112(SI), Y1
	VPAND   Y5, Y1, Y2
	VMOVDQU Y2, 192(R13)
	VPSRLW  $4, Y1, Y1
	VPAND   Y5, Y1, Y1
	VMOVDQU Y1, 224(R13)

	VPBROADCASTW (SI), X6
	VCVTPH2PS    X6, Y6
	VPBROADCASTW 2(SI), X7
	VCVTPH2PS    X7, Y7

	EACHCOL(COLQ4K, q4knext)

q4knext:
	ADDQ $144, SI
	ADDQ $292, DX
	DECQ CX
	JNZ  q4kloop

q4kdone:
	STOREALL(q4kret)

q4kret:
	VZEROUPPER
	RET

// COLQ6K: acc += (d*yd) * (sum scale*q*q8 - 32 * scales · bsums); Y6 = d.
#define COLQ6K(acc) \
	SUMK;                       \
	VMOVDQU  260(R9), Y2;       \
	VPMADDWD 512(R13), Y2, Y2;  \
	VPSLLD   $5, Y2, Y2;        \
	VPSUBD   Y2, Y0, Y0;        \
	VCVTDQ2PS Y0, Y0;           \
	VBROADCASTSS (R9), Y3;      \
	VMULPS Y6, Y3, Y3;          \
	VFMADD231PS Y3, Y0, acc;    \
	ADDQ R8, R9

// Q6HI makes sub-block (k) of a 128-value half: low bits from Y(lo) shifted
// right by lsh, two high bits from qh (Y2) masked by mask and moved to bits
// 4..5 by SHIFT $sh.
#define Q6SUB(lo, lsh, mask, SHIFT, sh, off) \
	VPSRLW  $lsh, lo, Y3;      \
	VPAND   Y5, Y3, Y3;        \
	VPAND   mask, Y2, Y4;      \
	SHIFT   $sh, Y4, Y4;       \
	VPOR    Y4, Y3, Y3;        \
	VMOVDQU Y3, off(R13)

// Q6HALF unpacks one 128-value half: ql at qoff(SI), qh at hoff(SI), into
// scratch sub-blocks at off..off+127.
#define Q6HALF(qoff, hoff, off) \
	VMOVDQU qoff(SI), Y0;          \
	VMOVDQU (qoff+32)(SI), Y1;     \
	VMOVDQU hoff(SI), Y2;          \
	Q6SUB(Y0, 0, m03<>(SB), VPSLLW, 4, off);      \
	Q6SUB(Y1, 0, m0c<>(SB), VPSLLW, 2, off+32);   \
	Q6SUB(Y0, 4, m30<>(SB), VPSRLW, 0, off+64);   \
	Q6SUB(Y1, 4, mc0<>(SB), VPSRLW, 2, off+96)

// func dotQ6_KQ8_KAVX2(out *float32, w, a *byte, aStride, nb, n int)
TEXT ·dotQ6_KQ8_KAVX2(SB), 0, $576-48
	ARGS
	ZERO8
	LEAQ  31(SP), R13
	ANDQ  $-32, R13
	TESTQ CX, CX
	JZ    q6kdone

	PCALIGN $16
q6kloop:
	VMOVDQU nib<>(SB), Y5
	Q6HALF(0, 128, 0)
	Q6HALF(64, 160, 128)

	// Scale vectors: sub-block k covers scales 2k (low lane) and 2k+1
	// (high lane), sign-extended to words.
	VBROADCASTI128 192(SI), Y1
	VMOVDQU        k6Shuf<>(SB), Y3
	VMOVDQU        twos<>(SB), Y4
	VPSHUFB        Y3, Y1, Y0
	VPSRAW         $8, Y0, Y0
	VMOVDQU        Y0, 256(R13)
	VPADDB         Y4, Y3, Y3
	VPSHUFB        Y3, Y1, Y0
	VPSRAW         $8, Y0, Y0
	VMOVDQU        Y0, 288(R13)
	VPADDB         Y4, Y3, Y3
	VPSHUFB        Y3, Y1, Y0
	VPSRAW         $8, Y0, Y0
	VMOVDQU        Y0, 320(R13)
	VPADDB         Y4, Y3, Y3
	VPSHUFB        Y3, Y1, Y0
	VPSRAW         $8, Y0, Y0
	VMOVDQU        Y0, 352(R13)
	VPADDB         Y4, Y3, Y3
	VPSHUFB        Y3, Y1, Y0
	VPSRAW         $8, Y0, Y0
	VMOVDQU        Y0, 384(R13)
	VPADDB         Y4, Y3, Y3
	VPSHUFB        Y3, Y1, Y0
	VPSRAW         $8, Y0, Y0
	VMOVDQU        Y0, 416(R13)
	VPADDB         Y4, Y3, Y3
	VPSHUFB        Y3, Y1, Y0
	VPSRAW         $8, Y0, Y0
	VMOVDQU        Y0, 448(R13)
	VPADDB         Y4, Y3, Y3
	VPSHUFB        Y3, Y1, Y0
	VPSRAW         $8, Y0, Y0
	VMOVDQU        Y0, 480(R13)

	// The -32 offset through the bsums: scale i against bsum i.
	VPMOVSXBW 192(SI), Y0
	VMOVDQU   Y0, 512(R13)

	VPBROADCASTW 208(SI), X6
	VCVTPH2PS    X6, Y6

	EACHCOL(COLQ6K, q6knext)

q6knext:
	ADDQ $210, SI
	ADDQ $292, DX
	DECQ CX
	JNZ  q6kloop

q6kdone:
	STOREALL(q6kret)

q6kret:
	VZEROUPPER
	RET
