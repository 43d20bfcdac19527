// Shared by rows_amd64.s (AVX2) and rows_vnni_amd64.s (AVX-512 VNNI): the
// constants, the argument loading, the linear prefetch of the next row
// group, the unpacking of 8 rows' blocks and the float steps of the
// row-group kernels (the DATA symbols are file-local, one copy per file).

DATA rnib<>+0(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA rnib<>+8(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA rnib<>+16(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA rnib<>+24(SB)/8, $0x0f0f0f0f0f0f0f0f
GLOBL rnib<>(SB), RODATA|NOPTR, $32

DATA reights<>+0(SB)/8, $0x0808080808080808
DATA reights<>+8(SB)/8, $0x0808080808080808
DATA reights<>+16(SB)/8, $0x0808080808080808
DATA reights<>+24(SB)/8, $0x0808080808080808
GLOBL reights<>(SB), RODATA|NOPTR, $32

DATA rsixteens<>+0(SB)/8, $0x1010101010101010
DATA rsixteens<>+8(SB)/8, $0x1010101010101010
DATA rsixteens<>+16(SB)/8, $0x1010101010101010
DATA rsixteens<>+24(SB)/8, $0x1010101010101010
GLOBL rsixteens<>(SB), RODATA|NOPTR, $32

DATA rones16<>+0(SB)/8, $0x0001000100010001
DATA rones16<>+8(SB)/8, $0x0001000100010001
DATA rones16<>+16(SB)/8, $0x0001000100010001
DATA rones16<>+24(SB)/8, $0x0001000100010001
GLOBL rones16<>(SB), RODATA|NOPTR, $32

// rrep<k> repeats byte k of every dword 4 times (VPSHUFB control).
DATA rrep<>+0(SB)/8, $0x0404040400000000
DATA rrep<>+8(SB)/8, $0x0c0c0c0c08080808
DATA rrep<>+16(SB)/8, $0x0404040400000000
DATA rrep<>+24(SB)/8, $0x0c0c0c0c08080808
DATA rrep<>+32(SB)/8, $0x0505050501010101
DATA rrep<>+40(SB)/8, $0x0d0d0d0d09090909
DATA rrep<>+48(SB)/8, $0x0505050501010101
DATA rrep<>+56(SB)/8, $0x0d0d0d0d09090909
DATA rrep<>+64(SB)/8, $0x0606060602020202
DATA rrep<>+72(SB)/8, $0x0e0e0e0e0a0a0a0a
DATA rrep<>+80(SB)/8, $0x0606060602020202
DATA rrep<>+88(SB)/8, $0x0e0e0e0e0a0a0a0a
DATA rrep<>+96(SB)/8, $0x0707070703030303
DATA rrep<>+104(SB)/8, $0x0f0f0f0f0b0b0b0b
DATA rrep<>+112(SB)/8, $0x0707070703030303
DATA rrep<>+120(SB)/8, $0x0f0f0f0f0b0b0b0b
GLOBL rrep<>(SB), RODATA|NOPTR, $128

// rbits: byte k of every dword has bit k (low nibble), then bit k+4.
DATA rbits<>+0(SB)/8, $0x0804020108040201
DATA rbits<>+8(SB)/8, $0x0804020108040201
DATA rbits<>+16(SB)/8, $0x0804020108040201
DATA rbits<>+24(SB)/8, $0x0804020108040201
DATA rbits<>+32(SB)/8, $0x8040201080402010
DATA rbits<>+40(SB)/8, $0x8040201080402010
DATA rbits<>+48(SB)/8, $0x8040201080402010
DATA rbits<>+56(SB)/8, $0x8040201080402010
GLOBL rbits<>(SB), RODATA|NOPTR, $64

DATA rx80<>+0(SB)/8, $0x8080808080808080
DATA rx80<>+8(SB)/8, $0x8080808080808080
DATA rx80<>+16(SB)/8, $0x8080808080808080
DATA rx80<>+24(SB)/8, $0x8080808080808080
GLOBL rx80<>(SB), RODATA|NOPTR, $32

#define RARGS \
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

// PFINIT and PFNEXT prefetch the next row group while this one runs: the
// 8 rows are read block by block, 8 streams wStride apart that the
// hardware prefetchers follow badly, so each block step fetches its share
// (8 blocks' worth of bytes, three cache lines) of the next group's
// 8*wStride bytes, linearly. PFINIT keeps 8*wStride - 7*w in the frame so
// that PFNEXT finds the address as 8*SI plus it; prefetches never fault,
// so running past the matrix is harmless.
// (T and U are temporaries.)
#define PFINIT(T, U) \
	LEAQ (R10*8), T; \
	MOVQ SI, U;      \
	SHLQ $3, U;      \
	SUBQ SI, U;      \
	SUBQ U, T;       \
	MOVQ T, pf-8(SP)

#define PFNEXT(T) \
	MOVQ       pf-8(SP), T;  \
	LEAQ       (T)(SI*8), T; \
	PREFETCHT0 (T);          \
	PREFETCHT0 64(T);        \
	PREFETCHT0 128(T)

// PFNEXT5 covers the 8*34 bytes of a Q8_0 block step.
#define PFNEXT5(T) \
	PFNEXT(T);               \
	PREFETCHT0 192(T);       \
	PREFETCHT0 256(T)

// RZERO zeroes the n columns' 8 outputs.
#define RZERO(loop) \
	VXORPS  Y0, Y0, Y0; \
	MOVQ    DI, R14;    \
	MOVQ    BX, AX;     \
loop:                   \
	VMOVUPS Y0, (R14);  \
	ADDQ    CX, R14;    \
	DECQ    AX;         \
	JNZ     loop

// RDW gathers the F16 scales of the 8 rows' blocks into Y6 as float32
// (AX = row 4's block; uses R9; RDWT uses T).
#define RDW RDWT(R9)

#define RDWT(T) \
	MOVWLZX (SI), T;                   \
	VMOVD   T, X6;                     \
	VPINSRW $1, (SI)(R10*1), X6, X6;   \
	VPINSRW $2, (SI)(R10*2), X6, X6;   \
	VPINSRW $3, (SI)(R11*1), X6, X6;   \
	VPINSRW $4, (AX), X6, X6;          \
	VPINSRW $5, (AX)(R10*1), X6, X6;   \
	VPINSRW $6, (AX)(R10*2), X6, X6;   \
	VPINSRW $7, (AX)(R11*1), X6, X6;   \
	VCVTPH2PS X6, Y6

// TRANS4 loads the 16 bytes at off of the 8 rows' blocks and transposes
// them into Y2..Y5: lane r of Yk+2 = row r's dword k (uses Y0..Y5).
#define TRANS4(off) \
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

// NIBS splits D (dword k of every row) into the low nibbles lo (chunk k)
// and the high nibbles hi (chunk k+4), Y6 rnib.
#define NIBS(D, lo, hi) \
	VPAND  Y6, D, lo;  \
	VPSRLW $4, D, D;   \
	VPAND  Y6, D, hi

// The float factors of the column (int sums in Y1, dw in Y6).
#define FAC_Q4 \
	VCVTDQ2PS    Y1, Y1;  \
	VPBROADCASTW (R9), X3; \
	VCVTPH2PS    X3, Y3;  \
	VMULPS       Y6, Y1, Y1; \
	VMULPS       Y3, Y1, Y1

#define FAC_DD \
	VCVTDQ2PS    Y1, Y1;  \
	VPBROADCASTW (R9), X3; \
	VCVTPH2PS    X3, Y3;  \
	VMULPS       Y6, Y3, Y3; \
	VMULPS       Y3, Y1, Y1

// RACC adds Y1 to the column's outputs and steps to the next column.
#define RACC \
	VADDPS  (R14), Y1, Y1; \
	VMOVUPS Y1, (R14);     \
	ADDQ    R8, R9;        \
	ADDQ    CX, R14;       \
	DECQ    AX

// HBIT ors 16 into the bytes of chunk Y whose bit (rbits at off) is set in
// the repeated qh bytes of Y1 (Y7 rsixteens).
#define HBIT(off, Y) \
	VPAND    rbits<>+off(SB), Y1, Y2; \
	VPCMPEQB rbits<>+off(SB), Y2, Y2; \
	VPAND    Y7, Y2, Y2;              \
	VPOR     Y2, Y, Y

// UNPACK_Q4 leaves the 8 rows' Q4_0 quants of the block at SI (AX = row
// 4's block) transposed in Y8..Y15: lane r of Y8+c = row r's 4 unsigned
// quants of values 4c..4c+3 (uses Y0..Y6).
#define UNPACK_Q4 \
	TRANS4(2); \
	VMOVDQU rnib<>(SB), Y6; \
	NIBS(Y2, Y8, Y12); \
	NIBS(Y3, Y9, Y13); \
	NIBS(Y4, Y10, Y14); \
	NIBS(Y5, Y11, Y15)

// UNPACK_Q5 is UNPACK_Q4 for Q5_0 blocks, the fifth bits (qh, gathered from
// the 8 rows and spread by rrep/rbits) ored in as 16 (Y7 rsixteens).
#define UNPACK_Q5 \
	TRANS4(6); \
	VMOVDQU rnib<>(SB), Y6; \
	NIBS(Y2, Y8, Y12); \
	NIBS(Y3, Y9, Y13); \
	NIBS(Y4, Y10, Y14); \
	NIBS(Y5, Y11, Y15); \
	VMOVD 2(SI), X0; \
	VPINSRD $1, 2(SI)(R10*1), X0, X0; \
	VPINSRD $2, 2(SI)(R10*2), X0, X0; \
	VPINSRD $3, 2(SI)(R11*1), X0, X0; \
	VMOVD 2(AX), X1; \
	VPINSRD $1, 2(AX)(R10*1), X1, X1; \
	VPINSRD $2, 2(AX)(R10*2), X1, X1; \
	VPINSRD $3, 2(AX)(R11*1), X1, X1; \
	VINSERTI128 $1, X1, Y0, Y0; \
	VPSHUFB rrep<>+0(SB), Y0, Y1; \
	HBIT(0, Y8); \
	HBIT(32, Y9); \
	VPSHUFB rrep<>+32(SB), Y0, Y1; \
	HBIT(0, Y10); \
	HBIT(32, Y11); \
	VPSHUFB rrep<>+64(SB), Y0, Y1; \
	HBIT(0, Y12); \
	HBIT(32, Y13); \
	VPSHUFB rrep<>+96(SB), Y0, Y1; \
	HBIT(0, Y14); \
	HBIT(32, Y15)

// UNPACK_Q8 transposes the 8 rows' Q8_0 quants into Y8..Y15 as unsigned
// bytes w XOR 0x80 (Y7 rx80): o = 128.
#define UNPACK_Q8 \
	TRANS4(2);          \
	VPXOR Y7, Y2, Y8;   \
	VPXOR Y7, Y3, Y9;   \
	VPXOR Y7, Y4, Y10;  \
	VPXOR Y7, Y5, Y11;  \
	TRANS4(18);         \
	VPXOR Y7, Y2, Y12;  \
	VPXOR Y7, Y3, Y13;  \
	VPXOR Y7, Y4, Y14;  \
	VPXOR Y7, Y5, Y15
