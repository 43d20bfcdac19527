//go:build amd64 && !purego

#include "textflag.h"
#include "sum4_amd64.h"

// func dequantQ8_0AVX2(dst *float32, src *byte, nb int)
//
// dst[32*b+j] = d*float32(int8(q[j])) for the nb >= 1 blocks of src: the
// scale d from fp16Table (ggml.FP16ToFP32's bits for every half), the
// quants sign-extended and converted exactly, one rounded product each.
TEXT ·dequantQ8_0AVX2(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ nb+16(FP), CX
	MOVQ ·fp16Table(SB), R8

	PCALIGN $16
loop:
	MOVWLZX      (SI), AX
	VBROADCASTSS (R8)(AX*4), Y0
	VPMOVSXBD    2(SI), Y1
	VPMOVSXBD    10(SI), Y2
	VPMOVSXBD    18(SI), Y3
	VPMOVSXBD    26(SI), Y4
	VCVTDQ2PS    Y1, Y1
	VCVTDQ2PS    Y2, Y2
	VCVTDQ2PS    Y3, Y3
	VCVTDQ2PS    Y4, Y4
	VMULPS       Y0, Y1, Y1
	VMULPS       Y0, Y2, Y2
	VMULPS       Y0, Y3, Y3
	VMULPS       Y0, Y4, Y4
	VMOVUPS      Y1, (DI)
	VMOVUPS      Y2, 32(DI)
	VMOVUPS      Y3, 64(DI)
	VMOVUPS      Y4, 96(DI)
	ADDQ         $34, SI
	ADDQ         $128, DI
	DECQ         CX
	JNZ          loop
	VZEROUPPER
	RET

// KEY(idx, acc) leaves in acc the int32 lanes of the block sum of the key
// block at idx (AX and a stride register) with the query block in Y0, Y1
// (int16): sign-extended, multiplied in pairs, exact for any bytes.
#define KEY(lo, hi, acc) \
	VPMOVSXBW lo, acc;        \
	VPMADDWD  Y0, acc, acc;   \
	VPMOVSXBW hi, Y10;        \
	VPMADDWD  Y1, Y10, Y10;   \
	VPADDD    Y10, acc, acc

// DK1 stores the float32 scale of the key block at idx to dst.
#define DK1(idx, dst) \
	MOVWLZX idx, R9;        \
	MOVL    (BX)(R9*4), R9; \
	MOVL    R9, dst

// func scoresQ8_0AVX2(sc *float32, k *byte, kStride int, q *byte, qStride, nb, ng, nq int, scale float32, dk, tab *float32)
//
// sc[r*64+t] = dot(key t, row r)*scale for t < 8*ng, r < nq (nb >= 1, ng >=
// 1, nq >= 1): per group of eight keys their scales are looked up once
// (tab, into dk), then each row's block sums of the eight keys are
// reduced into one vector (key per lane) and take the generic float steps
// on the lanes: sumf += float32(sumi)*(dk*dq), block after block from 0.
TEXT ·scoresQ8_0AVX2(SB), NOSPLIT, $0-88
	MOVQ sc+0(FP), DI
	MOVQ k+8(FP), SI
	MOVQ kStride+16(FP), R8
	LEAQ (R8)(R8*2), R10
	LEAQ (R8)(R8*4), R11
	LEAQ (R10)(R10*1), R12
	LEAQ (R12)(R8*1), R13
	VBROADCASTSS scale+64(FP), Y14

group:
	// the eight keys' scales, block after block: dk[8*b+i]
	MOVQ tab+80(FP), BX
	MOVQ SI, AX
	MOVQ dk+72(FP), R14
	MOVQ nb+40(FP), CX

scales:
	DK1((AX), 0(R14))
	DK1((AX)(R8*1), 4(R14))
	DK1((AX)(R8*2), 8(R14))
	DK1((AX)(R10*1), 12(R14))
	DK1((AX)(R8*4), 16(R14))
	DK1((AX)(R11*1), 20(R14))
	DK1((AX)(R12*1), 24(R14))
	DK1((AX)(R13*1), 28(R14))
	ADDQ $34, AX
	ADDQ $32, R14
	DECQ CX
	JNZ  scales

	MOVQ q+24(FP), DX
	MOVQ nq+56(FP), BX
	MOVQ DI, R15

row:
	VXORPS Y15, Y15, Y15
	MOVQ   SI, AX
	MOVQ   DX, R9
	MOVQ   dk+72(FP), R14
	MOVQ   nb+40(FP), CX

	PCALIGN $16
block:
	VPMOVSXBW 2(R9), Y0
	VPMOVSXBW 18(R9), Y1
	KEY(2(AX), 18(AX), Y2)
	KEY(2(AX)(R8*1), 18(AX)(R8*1), Y3)
	KEY(2(AX)(R8*2), 18(AX)(R8*2), Y4)
	KEY(2(AX)(R10*1), 18(AX)(R10*1), Y5)
	KEY(2(AX)(R8*4), 18(AX)(R8*4), Y6)
	KEY(2(AX)(R11*1), 18(AX)(R11*1), Y7)
	KEY(2(AX)(R12*1), 18(AX)(R12*1), Y8)
	KEY(2(AX)(R13*1), 18(AX)(R13*1), Y9)
	VPHADDD    Y3, Y2, Y2
	VPHADDD    Y5, Y4, Y4
	VPHADDD    Y7, Y6, Y6
	VPHADDD    Y9, Y8, Y8
	VPHADDD    Y4, Y2, Y2
	VPHADDD    Y8, Y6, Y6
	VPERM2I128 $0x20, Y6, Y2, Y3
	VPERM2I128 $0x31, Y6, Y2, Y4
	VPADDD     Y4, Y3, Y3
	VCVTDQ2PS  Y3, Y3
	VPBROADCASTW (R9), X4
	VCVTPH2PS  X4, Y4
	VMULPS     (R14), Y4, Y4
	VMULPS     Y4, Y3, Y3
	VADDPS     Y3, Y15, Y15
	ADDQ       $34, AX
	ADDQ       $34, R9
	ADDQ       $32, R14
	DECQ       CX
	JNZ        block

	VMULPS  Y14, Y15, Y15
	VMOVUPS Y15, (R15)
	ADDQ    qStride+32(FP), DX
	ADDQ    $256, R15
	DECQ    BX
	JNZ     row

	LEAQ (SI)(R8*8), SI
	ADDQ $32, DI
	DECQ ng+48(FP)
	JNZ  group
	VZEROUPPER
	RET

// The avx512vnni set's ScoresQ8_0 (on 256-bit registers, AVX-512 VL):
// VPDPBUSD multiplies unsigned by signed bytes, so each block of eight
// keys is transposed in registers into eight vectors of one dword (four
// quants) per key, XORed with 0x80 (u = k + 128, unsigned), and a row's
// query dwords are broadcast from memory as the signed operand: the lanes
// sum u*q = k*q + 128*q, and the chain starts from -128*sum(q) of the
// row's block (computed once per call, with the row's scale, into the
// scratch). The sums are exact, then the generic float steps on the
// lanes: sumf += float32(sumi)*(dk*dq), block after block from 0; sumf
// lives in sc between blocks (set to zero first, scaled at the end).

// U8ROW loads the eight key rows' quants of one block (AX, strides) XORed
// with 0x80 into Y0..Y7.
#define U8ROW(idx, dst) VPXOR idx, Y15, dst

// DK2 stores the float32 scale of the key block at idx to dst (BX the
// table, R15 temporary).
#define DK2(idx, dst) \
	MOVWLZX idx, R15;         \
	MOVL    (BX)(R15*4), R15; \
	MOVL    R15, dst

// func scoresQ8_0VNNI(sc *float32, k *byte, kStride int, q *byte, qStride, nb, ng, nq int, scale float32, scratch, tab *float32)
//
// scratch: 8 floats for a block's key scales, then per row r and block b
// at 64+8*(r*nb+b) the int32 -128*sum(q) and the float32 dq. The argument
// slots of k and kStride hold the blocks left and the scratch's row
// stride once loaded.
TEXT ·scoresQ8_0VNNI(SB), NOSPLIT, $0-88
	MOVL         $0x80808080, AX
	MOVQ         AX, X15
	VPBROADCASTD X15, Y15
	MOVQ         tab+80(FP), BX
	MOVQ         scratch+72(FP), R14
	ADDQ         $64, R14

	// each row's blocks: -128*sum(q) and dq
	MOVQ q+24(FP), DX
	MOVQ nq+56(FP), R8

rowsums:
	MOVQ DX, R9
	MOVQ nb+40(FP), CX

rowsum:
	VPXOR        Y0, Y0, Y0
	VPDPBUSD     2(R9), Y15, Y0
	VEXTRACTI128 $1, Y0, X1
	VPADDD       X1, X0, X0
	VPSHUFD      $0x4e, X0, X1
	VPADDD       X1, X0, X0
	VPSHUFD      $0xb1, X0, X1
	VPADDD       X1, X0, X0
	VPXOR        X1, X1, X1
	VPSUBD       X0, X1, X0
	VMOVD        X0, (R14)
	MOVWLZX      (R9), AX
	MOVL         (BX)(AX*4), AX
	MOVL         AX, 4(R14)
	ADDQ         $8, R14
	ADDQ         $34, R9
	DECQ         CX
	JNZ          rowsum
	ADDQ         qStride+32(FP), DX
	DECQ         R8
	JNZ          rowsums

	MOVQ sc+0(FP), DI
	MOVQ k+8(FP), SI
	MOVQ kStride+16(FP), R8
	LEAQ (R8)(R8*2), R10
	LEAQ (R8)(R8*4), R11
	LEAQ (R10)(R10*1), R12
	LEAQ (R12)(R8*1), R13
	MOVQ nb+40(FP), AX
	SHLQ $3, AX
	MOVQ AX, kStride+16(FP)
	VPXOR Y14, Y14, Y14

group:
	// the group's scores start from zero
	MOVQ DI, R15
	MOVQ nq+56(FP), CX

zero:
	VMOVUPS Y14, (R15)
	ADDQ    $256, R15
	DECQ    CX
	JNZ     zero

	MOVQ SI, AX
	MOVQ q+24(FP), DX
	MOVQ scratch+72(FP), R9
	ADDQ $64, R9
	MOVQ nb+40(FP), CX
	MOVQ CX, k+8(FP)

block:
	// the eight keys' scales, through the scratch into Y8
	MOVQ    tab+80(FP), BX
	MOVQ    scratch+72(FP), R14
	DK2((AX), 0(R14))
	DK2((AX)(R8*1), 4(R14))
	DK2((AX)(R8*2), 8(R14))
	DK2((AX)(R10*1), 12(R14))
	DK2((AX)(R8*4), 16(R14))
	DK2((AX)(R11*1), 20(R14))
	DK2((AX)(R12*1), 24(R14))
	DK2((AX)(R13*1), 28(R14))
	VMOVUPS (R14), Y8

	// the keys' quants + 128, transposed: Y16+c holds dword c of each key
	U8ROW(2(AX), Y0)
	U8ROW(2(AX)(R8*1), Y1)
	U8ROW(2(AX)(R8*2), Y2)
	U8ROW(2(AX)(R10*1), Y3)
	U8ROW(2(AX)(R8*4), Y4)
	U8ROW(2(AX)(R11*1), Y5)
	U8ROW(2(AX)(R12*1), Y6)
	U8ROW(2(AX)(R13*1), Y7)
	VPUNPCKLDQ  Y1, Y0, Y24
	VPUNPCKHDQ  Y1, Y0, Y25
	VPUNPCKLDQ  Y3, Y2, Y26
	VPUNPCKHDQ  Y3, Y2, Y27
	VPUNPCKLDQ  Y5, Y4, Y28
	VPUNPCKHDQ  Y5, Y4, Y29
	VPUNPCKLDQ  Y7, Y6, Y30
	VPUNPCKHDQ  Y7, Y6, Y31
	VPUNPCKLQDQ Y26, Y24, Y0
	VPUNPCKHQDQ Y26, Y24, Y1
	VPUNPCKLQDQ Y27, Y25, Y2
	VPUNPCKHQDQ Y27, Y25, Y3
	VPUNPCKLQDQ Y30, Y28, Y4
	VPUNPCKHQDQ Y30, Y28, Y5
	VPUNPCKLQDQ Y31, Y29, Y6
	VPUNPCKHQDQ Y31, Y29, Y7
	VSHUFI64X2  $0, Y4, Y0, Y16
	VSHUFI64X2  $3, Y4, Y0, Y20
	VSHUFI64X2  $0, Y5, Y1, Y17
	VSHUFI64X2  $3, Y5, Y1, Y21
	VSHUFI64X2  $0, Y6, Y2, Y18
	VSHUFI64X2  $3, Y6, Y2, Y22
	VSHUFI64X2  $0, Y7, Y3, Y19
	VSHUFI64X2  $3, Y7, Y3, Y23

	// every row: sc += float32(sumi)*(dk*dq)
	MOVQ DX, R14
	MOVQ R9, BX
	MOVQ DI, R15
	MOVQ nq+56(FP), CX

	PCALIGN $16
row:
	VPBROADCASTD  (BX), Y9
	VPDPBUSD.BCST 2(R14), Y16, Y9
	VPDPBUSD.BCST 6(R14), Y17, Y9
	VPDPBUSD.BCST 10(R14), Y18, Y9
	VPDPBUSD.BCST 14(R14), Y19, Y9
	VPDPBUSD.BCST 18(R14), Y20, Y9
	VPDPBUSD.BCST 22(R14), Y21, Y9
	VPDPBUSD.BCST 26(R14), Y22, Y9
	VPDPBUSD.BCST 30(R14), Y23, Y9
	VCVTDQ2PS     Y9, Y9
	VMULPS.BCST   4(BX), Y8, Y10
	VMULPS        Y10, Y9, Y9
	VADDPS        (R15), Y9, Y9
	VMOVUPS       Y9, (R15)
	ADDQ          qStride+32(FP), R14
	ADDQ          kStride+16(FP), BX
	ADDQ          $256, R15
	DECQ          CX
	JNZ           row

	ADDQ $34, AX
	ADDQ $34, DX
	ADDQ $8, R9
	DECQ k+8(FP)
	JNZ  block

	// the group's scores times scale
	VBROADCASTSS scale+64(FP), Y9
	MOVQ         DI, R15
	MOVQ         nq+56(FP), CX

scale:
	VMULPS  (R15), Y9, Y10
	VMOVUPS Y10, (R15)
	ADDQ    $256, R15
	DECQ    CX
	JNZ     scale

	LEAQ (SI)(R8*8), SI
	ADDQ $32, DI
	DECQ ng+48(FP)
	JNZ  group
	VZEROUPPER
	RET

// Q8ROW dequantizes the 64 values of two Q8_0 blocks at R9 into Z16..Z19
// as dequantQ8_0AVX2 does (float32(q) times the block's scale, one
// rounded product), the scales through the fp16 table at R13 (AX, Z24 and
// Z25 scratch).
#define Q8ROW \
	MOVWLZX      (R9), AX;            \
	VBROADCASTSS (R13)(AX*4), Z24;    \
	MOVWLZX      34(R9), AX;          \
	VBROADCASTSS (R13)(AX*4), Z25;    \
	VPMOVSXBD    2(R9), Z16;          \
	VPMOVSXBD    18(R9), Z17;         \
	VPMOVSXBD    36(R9), Z18;         \
	VPMOVSXBD    52(R9), Z19;         \
	VCVTDQ2PS    Z16, Z16;            \
	VCVTDQ2PS    Z17, Z17;            \
	VCVTDQ2PS    Z18, Z18;            \
	VCVTDQ2PS    Z19, Z19;            \
	VMULPS       Z24, Z16, Z16;       \
	VMULPS       Z24, Z17, Z17;       \
	VMULPS       Z25, Z18, Z18;       \
	VMULPS       Z25, Z19, Z19

// func sumQ8x4AVX512(out *float32, w *float32, v *byte, hd64, rows, vStride int, tab *float32)
// out[r*64*hd64+i] = fma(w[r*64+t], x[t][i], out[...]) for r < 4, t =
// 0..rows-1 in order, where x[t] is value row t (Q8_0 blocks at
// v+t*vStride) dequantized as dequantQ8_0AVX2 does it (float32(q) times
// the block's scale, one rounded product): the bits of DequantQ8_0 then
// attnSumFMA4AVX512, without the float32 copy of the values.
TEXT ·sumQ8x4AVX512(SB), NOSPLIT, $0-56
	MOVQ out+0(FP), DI
	MOVQ v+16(FP), DX
	MOVQ hd64+24(FP), CX
	MOVQ vStride+40(FP), R12
	MOVQ tab+48(FP), R13
	MOVQ CX, R10
	SHLQ $8, R10              // bytes per out row
	LEAQ (R10)(R10*2), R11    // 3 out rows

sq4chunk:
	SUM4_LOAD
	MOVQ    w+8(FP), SI
	MOVQ    rows+32(FP), BX
	MOVQ    DX, R9
	TESTQ   BX, BX
	JZ      sq4store

	PCALIGN $16
sq4loop:
	Q8ROW
	SUM4_FMA
	ADDQ         $4, SI
	ADDQ         R12, R9
	DECQ         BX
	JNZ          sq4loop

sq4store:
	SUM4_STORE
	ADDQ    $256, DI
	ADDQ    $68, DX               // the next two blocks of each row
	DECQ    CX
	JNZ     sq4chunk
	VZEROUPPER
	RET

// func sumQ8AVX512(out *float32, w *float32, v *byte, hd64, rows, vStride int, tab *float32)
// sumQ8x4AVX512 for one row.
TEXT ·sumQ8AVX512(SB), NOSPLIT, $0-56
	MOVQ out+0(FP), DI
	MOVQ v+16(FP), DX
	MOVQ hd64+24(FP), CX
	MOVQ vStride+40(FP), R12
	MOVQ tab+48(FP), R13

sq1chunk:
	VMOVUPS (DI), Z0
	VMOVUPS 64(DI), Z1
	VMOVUPS 128(DI), Z2
	VMOVUPS 192(DI), Z3
	MOVQ    w+8(FP), SI
	MOVQ    rows+32(FP), BX
	MOVQ    DX, R9
	TESTQ   BX, BX
	JZ      sq1store

	PCALIGN $16
sq1loop:
	Q8ROW
	VBROADCASTSS (SI), Z20
	VFMADD231PS  Z16, Z20, Z0
	VFMADD231PS  Z17, Z20, Z1
	VFMADD231PS  Z18, Z20, Z2
	VFMADD231PS  Z19, Z20, Z3
	ADDQ         $4, SI
	ADDQ         R12, R9
	DECQ         BX
	JNZ          sq1loop

sq1store:
	VMOVUPS Z0, (DI)
	VMOVUPS Z1, 64(DI)
	VMOVUPS Z2, 128(DI)
	VMOVUPS Z3, 192(DI)
	ADDQ    $256, DI
	ADDQ    $68, DX
	DECQ    CX
	JNZ     sq1chunk
	VZEROUPPER
	RET
