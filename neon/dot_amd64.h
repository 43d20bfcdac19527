// Used by float_amd64.s (dot_amd64.s and kquant_vnni_amd64.s are generated
// by _asm, whose x86dot.go holds the same pieces): the argument loading of the one-row dots
// (out, w, a, aStride, nb, n), the eight column accumulators Y8..Y15, the
// walk over the n (1..8) columns and the horizontal sums in ggml's
// hsum_float_8 order.

#define ARGS \
	MOVQ out+0(FP), DI;        \
	MOVQ w+8(FP), SI;          \
	MOVQ a+16(FP), DX;         \
	MOVQ aStride+24(FP), R8;   \
	MOVQ nb+32(FP), CX;        \
	MOVQ n+40(FP), BX

#define ZERO8 \
	VXORPS Y8, Y8, Y8;    \
	VXORPS Y9, Y9, Y9;    \
	VXORPS Y10, Y10, Y10; \
	VXORPS Y11, Y11, Y11; \
	VXORPS Y12, Y12, Y12; \
	VXORPS Y13, Y13, Y13; \
	VXORPS Y14, Y14, Y14; \
	VXORPS Y15, Y15, Y15

// HSUM stores the sum of the 8 lanes of acc (accx its low half) to
// off(DI), in ggml's hsum_float_8 order.
#define HSUM(acc, accx, off) \
	VEXTRACTF128 $1, acc, X0; \
	VADDPS accx, X0, X0;      \
	VMOVHLPS X0, X0, X1;      \
	VADDPS X1, X0, X0;        \
	VMOVSHDUP X0, X1;         \
	VADDSS X1, X0, X0;        \
	VMOVSS X0, off(DI)

// EACHCOL runs COL(acc) for acc = Y8.. while fewer than n columns are done,
// then jumps to next.
#define EACHCOL(COL, next) \
	MOVQ DX, R9;      \
	COL(Y8);          \
	CMPQ BX, $1;      \
	JEQ next;         \
	COL(Y9);          \
	CMPQ BX, $2;      \
	JEQ next;         \
	COL(Y10);         \
	CMPQ BX, $3;      \
	JEQ next;         \
	COL(Y11);         \
	CMPQ BX, $4;      \
	JEQ next;         \
	COL(Y12);         \
	CMPQ BX, $5;      \
	JEQ next;         \
	COL(Y13);         \
	CMPQ BX, $6;      \
	JEQ next;         \
	COL(Y14);         \
	CMPQ BX, $7;      \
	JEQ next;         \
	COL(Y15)

// EACHCOLX is EACHCOL with the scalar accumulators X8...
#define EACHCOLX(COL, next) \
	MOVQ DX, R9;      \
	COL(X8);          \
	CMPQ BX, $1;      \
	JEQ next;         \
	COL(X9);          \
	CMPQ BX, $2;      \
	JEQ next;         \
	COL(X10);         \
	CMPQ BX, $3;      \
	JEQ next;         \
	COL(X11);         \
	CMPQ BX, $4;      \
	JEQ next;         \
	COL(X12);         \
	CMPQ BX, $5;      \
	JEQ next;         \
	COL(X13);         \
	CMPQ BX, $6;      \
	JEQ next;         \
	COL(X14);         \
	CMPQ BX, $7;      \
	JEQ next;         \
	COL(X15)

#define STOREALL(done) \
	HSUM(Y8, X8, 0);   \
	CMPQ BX, $1;       \
	JEQ done;          \
	HSUM(Y9, X9, 4);   \
	CMPQ BX, $2;       \
	JEQ done;          \
	HSUM(Y10, X10, 8); \
	CMPQ BX, $3;       \
	JEQ done;          \
	HSUM(Y11, X11, 12); \
	CMPQ BX, $4;       \
	JEQ done;          \
	HSUM(Y12, X12, 16); \
	CMPQ BX, $5;       \
	JEQ done;          \
	HSUM(Y13, X13, 20); \
	CMPQ BX, $6;       \
	JEQ done;          \
	HSUM(Y14, X14, 24); \
	CMPQ BX, $7;       \
	JEQ done;          \
	HSUM(Y15, X15, 28)
