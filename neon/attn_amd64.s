//go:build amd64 && !purego

#include "textflag.h"
#include "sum4_amd64.h"

// Tiled attention kernels (AVX2+FMA+F16C). A key block is attnBlock = 64
// keys; the tile converts it once to float32, transposed (kt[d][t]), and
// every query row of the tile then scores all 64 keys with broadcast FMAs
// (no horizontal sums): score t = (sum over d in order of q[d]*kt[d][t],
// fused) * scale, lane t alone, so a score does not depend on the other
// keys or rows.

// func attnKTAVX2(kt *float32, k *uint16, hd8 int)
// kt[d*64+t] = k[t*hd+d] (F16 to float32) for t < 64, d < 8*hd8: 8x8
// squares converted and transposed in registers.
TEXT ·attnKTAVX2(SB), NOSPLIT, $0-24
	MOVQ kt+0(FP), DI
	MOVQ k+8(FP), SI
	MOVQ hd8+16(FP), R8
	MOVQ R8, R9
	SHLQ $4, R9          // bytes per key row (hd*2)
	LEAQ (R9)(R9*2), R10 // 3 rows
	MOVQ R9, R13
	SHLQ $6, R13         // a block of keys (64 rows)
	XORQ CX, CX          // t0 = 0, 8, ..., 56

ktkeys:
	// The same 8 keys of the next block, one line at a time: a cache
	// block's pages are 4 KiB, where the hardware stops its streams (a
	// prefetch does not fault past the cache's end).
	LEAQ (SI)(R13*1), R12
	MOVQ R8, R11
	SHLQ $1, R11 // 8 rows of 16*hd8 bytes: 2*hd8 lines

ktpf:
	PREFETCHT0 (R12)
	ADDQ       $64, R12
	DECQ       R11
	JNZ        ktpf
	MOVQ       SI, DX // k row t0, column d0
	MOVQ       DI, BX // kt[d0*64 + t0]
	MOVQ       R8, AX

ktsq:
	LEAQ         (DX)(R9*4), R11
	VCVTPH2PS    (DX), Y0
	VCVTPH2PS    (DX)(R9*1), Y1
	VCVTPH2PS    (DX)(R9*2), Y2
	VCVTPH2PS    (DX)(R10*1), Y3
	VCVTPH2PS    (R11), Y4
	VCVTPH2PS    (R11)(R9*1), Y5
	VCVTPH2PS    (R11)(R9*2), Y6
	VCVTPH2PS    (R11)(R10*1), Y7
	VUNPCKLPS    Y1, Y0, Y8
	VUNPCKHPS    Y1, Y0, Y9
	VUNPCKLPS    Y3, Y2, Y10
	VUNPCKHPS    Y3, Y2, Y11
	VUNPCKLPS    Y5, Y4, Y12
	VUNPCKHPS    Y5, Y4, Y13
	VUNPCKLPS    Y7, Y6, Y14
	VUNPCKHPS    Y7, Y6, Y15
	VSHUFPS      $0x44, Y10, Y8, Y0
	VSHUFPS      $0xEE, Y10, Y8, Y1
	VSHUFPS      $0x44, Y11, Y9, Y2
	VSHUFPS      $0xEE, Y11, Y9, Y3
	VSHUFPS      $0x44, Y14, Y12, Y4
	VSHUFPS      $0xEE, Y14, Y12, Y5
	VSHUFPS      $0x44, Y15, Y13, Y6
	VSHUFPS      $0xEE, Y15, Y13, Y7
	VPERM2F128   $0x20, Y4, Y0, Y8
	VPERM2F128   $0x20, Y5, Y1, Y9
	VPERM2F128   $0x20, Y6, Y2, Y10
	VPERM2F128   $0x20, Y7, Y3, Y11
	VPERM2F128   $0x31, Y4, Y0, Y12
	VPERM2F128   $0x31, Y5, Y1, Y13
	VPERM2F128   $0x31, Y6, Y2, Y14
	VPERM2F128   $0x31, Y7, Y3, Y15
	VMOVUPS      Y8, (BX)
	VMOVUPS      Y9, 256(BX)
	VMOVUPS      Y10, 512(BX)
	VMOVUPS      Y11, 768(BX)
	VMOVUPS      Y12, 1024(BX)
	VMOVUPS      Y13, 1280(BX)
	VMOVUPS      Y14, 1536(BX)
	VMOVUPS      Y15, 1792(BX)
	ADDQ         $16, DX   // next 8 columns
	ADDQ         $2048, BX // next 8 kt rows
	DECQ         AX
	JNZ          ktsq
	LEAQ         (SI)(R9*8), SI // next 8 keys
	ADDQ         $32, DI
	ADDQ         $8, CX
	CMPQ         CX, $64
	JLT          ktkeys
	VZEROUPPER
	RET

// func attnScoresTAVX2(sc *float32, q *float32, kt *float32, hd int, scale float32)
// sc[t] = (fma over d = 0..hd-1 of q[d]*kt[d*64+t]) * scale, t < 64.
TEXT ·attnScoresTAVX2(SB), NOSPLIT, $0-36
	MOVQ         sc+0(FP), DI
	MOVQ         q+8(FP), SI
	MOVQ         kt+16(FP), DX
	MOVQ         hd+24(FP), CX
	VXORPS       Y0, Y0, Y0
	VXORPS       Y1, Y1, Y1
	VXORPS       Y2, Y2, Y2
	VXORPS       Y3, Y3, Y3
	VXORPS       Y4, Y4, Y4
	VXORPS       Y5, Y5, Y5
	VXORPS       Y6, Y6, Y6
	VXORPS       Y7, Y7, Y7

	PCALIGN $16
stloop:
	VBROADCASTSS (SI), Y8
	VFMADD231PS  (DX), Y8, Y0
	VFMADD231PS  32(DX), Y8, Y1
	VFMADD231PS  64(DX), Y8, Y2
	VFMADD231PS  96(DX), Y8, Y3
	VFMADD231PS  128(DX), Y8, Y4
	VFMADD231PS  160(DX), Y8, Y5
	VFMADD231PS  192(DX), Y8, Y6
	VFMADD231PS  224(DX), Y8, Y7
	ADDQ         $4, SI
	ADDQ         $256, DX
	DECQ         CX
	JNZ          stloop
	VBROADCASTSS scale+32(FP), Y8
	VMULPS       Y8, Y0, Y0
	VMULPS       Y8, Y1, Y1
	VMULPS       Y8, Y2, Y2
	VMULPS       Y8, Y3, Y3
	VMULPS       Y8, Y4, Y4
	VMULPS       Y8, Y5, Y5
	VMULPS       Y8, Y6, Y6
	VMULPS       Y8, Y7, Y7
	VMOVUPS      Y0, (DI)
	VMOVUPS      Y1, 32(DI)
	VMOVUPS      Y2, 64(DI)
	VMOVUPS      Y3, 96(DI)
	VMOVUPS      Y4, 128(DI)
	VMOVUPS      Y5, 160(DI)
	VMOVUPS      Y6, 192(DI)
	VMOVUPS      Y7, 224(DI)
	VZEROUPPER
	RET

// func attnSumFMAAVX2(out *float32, w *float32, v *float32, hd64, rows int)
// out[i] = fma(w[t], v[t*hd+i], out[i]) for t = 0..rows-1 in order
// (hd = 64*hd64): 64 outputs in Y0..Y7 through all rows, then the next 64.
TEXT ·attnSumFMAAVX2(SB), NOSPLIT, $0-40
	MOVQ out+0(FP), DI
	MOVQ v+16(FP), DX
	MOVQ hd64+24(FP), CX
	MOVQ CX, R10
	SHLQ $8, R10 // bytes per v row

sfchunk:
	VMOVUPS (DI), Y0
	VMOVUPS 32(DI), Y1
	VMOVUPS 64(DI), Y2
	VMOVUPS 96(DI), Y3
	VMOVUPS 128(DI), Y4
	VMOVUPS 160(DI), Y5
	VMOVUPS 192(DI), Y6
	VMOVUPS 224(DI), Y7
	MOVQ    w+8(FP), SI
	MOVQ    rows+32(FP), BX
	MOVQ    DX, R9
	TESTQ   BX, BX
	JZ      sfstore

	PCALIGN $16
sfloop:
	VBROADCASTSS (SI), Y8
	VFMADD231PS  (R9), Y8, Y0
	VFMADD231PS  32(R9), Y8, Y1
	VFMADD231PS  64(R9), Y8, Y2
	VFMADD231PS  96(R9), Y8, Y3
	VFMADD231PS  128(R9), Y8, Y4
	VFMADD231PS  160(R9), Y8, Y5
	VFMADD231PS  192(R9), Y8, Y6
	VFMADD231PS  224(R9), Y8, Y7
	ADDQ         $4, SI
	ADDQ         R10, R9
	DECQ         BX
	JNZ          sfloop

sfstore:
	VMOVUPS Y0, (DI)
	VMOVUPS Y1, 32(DI)
	VMOVUPS Y2, 64(DI)
	VMOVUPS Y3, 96(DI)
	VMOVUPS Y4, 128(DI)
	VMOVUPS Y5, 160(DI)
	VMOVUPS Y6, 192(DI)
	VMOVUPS Y7, 224(DI)
	ADDQ    $256, DI
	ADDQ    $256, DX
	DECQ    CX
	JNZ     sfchunk
	VZEROUPPER
	RET

// func f16ToF32AVX2(dst *float32, src *uint16, n8 int)
TEXT ·f16ToF32AVX2(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n8+16(FP), CX

cvloop:
	VCVTPH2PS (SI), Y0
	VMOVUPS   Y0, (DI)
	ADDQ      $16, SI
	ADDQ      $32, DI
	DECQ      CX
	JNZ       cvloop
	VZEROUPPER
	RET

// func attnScoresTAVX512(sc *float32, q *float32, kt *float32, hd int, scale float32)
// attnScoresTAVX2 on 512-bit registers (the same fused multiply-adds per
// lane: the same bits).
TEXT ·attnScoresTAVX512(SB), NOSPLIT, $0-36
	MOVQ         sc+0(FP), DI
	MOVQ         q+8(FP), SI
	MOVQ         kt+16(FP), DX
	MOVQ         hd+24(FP), CX
	VXORPS       Z0, Z0, Z0
	VXORPS       Z1, Z1, Z1
	VXORPS       Z2, Z2, Z2
	VXORPS       Z3, Z3, Z3

	PCALIGN $16
st5loop:
	VBROADCASTSS (SI), Z8
	VFMADD231PS  (DX), Z8, Z0
	VFMADD231PS  64(DX), Z8, Z1
	VFMADD231PS  128(DX), Z8, Z2
	VFMADD231PS  192(DX), Z8, Z3
	ADDQ         $4, SI
	ADDQ         $256, DX
	DECQ         CX
	JNZ          st5loop
	VBROADCASTSS scale+32(FP), Z8
	VMULPS       Z8, Z0, Z0
	VMULPS       Z8, Z1, Z1
	VMULPS       Z8, Z2, Z2
	VMULPS       Z8, Z3, Z3
	VMOVUPS      Z0, (DI)
	VMOVUPS      Z1, 64(DI)
	VMOVUPS      Z2, 128(DI)
	VMOVUPS      Z3, 192(DI)
	VZEROUPPER
	RET

// func attnSumFMAAVX512(out *float32, w *float32, v *float32, hd64, rows int)
// attnSumFMAAVX2 on 512-bit registers.
TEXT ·attnSumFMAAVX512(SB), NOSPLIT, $0-40
	MOVQ out+0(FP), DI
	MOVQ v+16(FP), DX
	MOVQ hd64+24(FP), CX
	MOVQ CX, R10
	SHLQ $8, R10 // bytes per v row

sf5chunk:
	VMOVUPS (DI), Z0
	VMOVUPS 64(DI), Z1
	VMOVUPS 128(DI), Z2
	VMOVUPS 192(DI), Z3
	MOVQ    w+8(FP), SI
	MOVQ    rows+32(FP), BX
	MOVQ    DX, R9
	TESTQ   BX, BX
	JZ      sf5store

	PCALIGN $16
sf5loop:
	VBROADCASTSS (SI), Z8
	VFMADD231PS  (R9), Z8, Z0
	VFMADD231PS  64(R9), Z8, Z1
	VFMADD231PS  128(R9), Z8, Z2
	VFMADD231PS  192(R9), Z8, Z3
	ADDQ         $4, SI
	ADDQ         R10, R9
	DECQ         BX
	JNZ          sf5loop

sf5store:
	VMOVUPS Z0, (DI)
	VMOVUPS Z1, 64(DI)
	VMOVUPS Z2, 128(DI)
	VMOVUPS Z3, 192(DI)
	ADDQ    $256, DI
	ADDQ    $256, DX
	DECQ    CX
	JNZ     sf5chunk
	VZEROUPPER
	RET

// func maxAVX2(x *float32, n8 int) float32
// The largest of 8*n8 values (none NaN).
TEXT ·maxAVX2(SB), NOSPLIT, $0-20
	MOVQ         x+0(FP), SI
	MOVQ         n8+8(FP), CX
	VMOVUPS      (SI), Y0
	VMOVAPS      Y0, Y1
	ADDQ         $32, SI
	DECQ         CX
	JZ           mxdone

mxloop:
	VMAXPS       (SI), Y0, Y0
	ADDQ         $32, SI
	DECQ         CX
	JZ           mxdone
	VMAXPS       (SI), Y1, Y1
	ADDQ         $32, SI
	DECQ         CX
	JNZ          mxloop

mxdone:
	VMAXPS       Y1, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VMAXPS       X1, X0, X0
	VMOVHLPS     X0, X0, X1
	VMAXPS       X1, X0, X0
	VMOVSHDUP    X0, X1
	VMAXSS       X1, X0, X0
	VZEROUPPER
	MOVSS        X0, ret+16(FP)
	RET

// func attnScoresT4AVX512(sc *float32, q *float32, kt *float32, hd int, scale float32)
// attnScoresTAVX512 for four query rows at once (q[r*hd+d], sc[r*64+t]):
// each kt row is loaded once for the four, each lane's fused
// multiply-adds are those of one row alone (the same bits), and sixteen
// independent sums keep both FMA pipes busy.
TEXT ·attnScoresT4AVX512(SB), NOSPLIT, $0-36
	MOVQ   sc+0(FP), DI
	MOVQ   q+8(FP), SI
	MOVQ   kt+16(FP), DX
	MOVQ   hd+24(FP), CX
	MOVQ   CX, R8
	SHLQ   $2, R8             // bytes per q row
	LEAQ   (R8)(R8*2), R9     // 3 rows
	VXORPS Z0, Z0, Z0
	VXORPS Z1, Z1, Z1
	VXORPS Z2, Z2, Z2
	VXORPS Z3, Z3, Z3
	VXORPS Z4, Z4, Z4
	VXORPS Z5, Z5, Z5
	VXORPS Z6, Z6, Z6
	VXORPS Z7, Z7, Z7
	VXORPS Z8, Z8, Z8
	VXORPS Z9, Z9, Z9
	VXORPS Z10, Z10, Z10
	VXORPS Z11, Z11, Z11
	VXORPS Z12, Z12, Z12
	VXORPS Z13, Z13, Z13
	VXORPS Z14, Z14, Z14
	VXORPS Z15, Z15, Z15

	PCALIGN $16
st4loop:
	VMOVUPS      (DX), Z16
	VMOVUPS      64(DX), Z17
	VMOVUPS      128(DX), Z18
	VMOVUPS      192(DX), Z19
	VBROADCASTSS (SI), Z20
	VBROADCASTSS (SI)(R8*1), Z21
	VBROADCASTSS (SI)(R8*2), Z22
	VBROADCASTSS (SI)(R9*1), Z23
	VFMADD231PS  Z16, Z20, Z0
	VFMADD231PS  Z17, Z20, Z1
	VFMADD231PS  Z18, Z20, Z2
	VFMADD231PS  Z19, Z20, Z3
	VFMADD231PS  Z16, Z21, Z4
	VFMADD231PS  Z17, Z21, Z5
	VFMADD231PS  Z18, Z21, Z6
	VFMADD231PS  Z19, Z21, Z7
	VFMADD231PS  Z16, Z22, Z8
	VFMADD231PS  Z17, Z22, Z9
	VFMADD231PS  Z18, Z22, Z10
	VFMADD231PS  Z19, Z22, Z11
	VFMADD231PS  Z16, Z23, Z12
	VFMADD231PS  Z17, Z23, Z13
	VFMADD231PS  Z18, Z23, Z14
	VFMADD231PS  Z19, Z23, Z15
	ADDQ         $4, SI
	ADDQ         $256, DX
	DECQ         CX
	JNZ          st4loop
	VBROADCASTSS scale+32(FP), Z16
	VMULPS       Z16, Z0, Z0
	VMULPS       Z16, Z1, Z1
	VMULPS       Z16, Z2, Z2
	VMULPS       Z16, Z3, Z3
	VMULPS       Z16, Z4, Z4
	VMULPS       Z16, Z5, Z5
	VMULPS       Z16, Z6, Z6
	VMULPS       Z16, Z7, Z7
	VMULPS       Z16, Z8, Z8
	VMULPS       Z16, Z9, Z9
	VMULPS       Z16, Z10, Z10
	VMULPS       Z16, Z11, Z11
	VMULPS       Z16, Z12, Z12
	VMULPS       Z16, Z13, Z13
	VMULPS       Z16, Z14, Z14
	VMULPS       Z16, Z15, Z15
	VMOVUPS      Z0, (DI)
	VMOVUPS      Z1, 64(DI)
	VMOVUPS      Z2, 128(DI)
	VMOVUPS      Z3, 192(DI)
	VMOVUPS      Z4, 256(DI)
	VMOVUPS      Z5, 320(DI)
	VMOVUPS      Z6, 384(DI)
	VMOVUPS      Z7, 448(DI)
	VMOVUPS      Z8, 512(DI)
	VMOVUPS      Z9, 576(DI)
	VMOVUPS      Z10, 640(DI)
	VMOVUPS      Z11, 704(DI)
	VMOVUPS      Z12, 768(DI)
	VMOVUPS      Z13, 832(DI)
	VMOVUPS      Z14, 896(DI)
	VMOVUPS      Z15, 960(DI)
	VZEROUPPER
	RET

// func attnSumFMA4AVX512(out *float32, w *float32, v *float32, hd64, rows int)
// attnSumFMAAVX512 for four rows at once (out[r*hd+i], w[r*64+t]) over
// the same values: each v row is loaded once for the four, each lane's
// fused multiply-adds are those of one row alone (the same bits).
TEXT ·attnSumFMA4AVX512(SB), NOSPLIT, $0-40
	MOVQ out+0(FP), DI
	MOVQ v+16(FP), DX
	MOVQ hd64+24(FP), CX
	MOVQ CX, R10
	SHLQ $8, R10              // bytes per v row and per out row
	LEAQ (R10)(R10*2), R11    // 3 out rows

sf4chunk:
	SUM4_LOAD
	MOVQ    w+8(FP), SI
	MOVQ    rows+32(FP), BX
	MOVQ    DX, R9
	TESTQ   BX, BX
	JZ      sf4store

	PCALIGN $16
sf4loop:
	VMOVUPS      (R9), Z16
	VMOVUPS      64(R9), Z17
	VMOVUPS      128(R9), Z18
	VMOVUPS      192(R9), Z19
	SUM4_FMA
	ADDQ         $4, SI
	ADDQ         R10, R9
	DECQ         BX
	JNZ          sf4loop

sf4store:
	SUM4_STORE
	ADDQ    $256, DI
	ADDQ    $256, DX
	DECQ    CX
	JNZ     sf4chunk
	VZEROUPPER
	RET

// func attnSumF16x4AVX512(out *float32, w *float32, v *uint16, hd64, rows int)
// attnSumFMA4AVX512 over F16 values, each converted (exactly) as it is
// loaded: the bits of converting v to float32 first, without the
// float32 copy (a decode tile's four rows read each value block once).
TEXT ·attnSumF16x4AVX512(SB), NOSPLIT, $0-40
	MOVQ out+0(FP), DI
	MOVQ v+16(FP), DX
	MOVQ hd64+24(FP), CX
	MOVQ CX, R10
	SHLQ $8, R10              // bytes per out row
	MOVQ CX, R12
	SHLQ $7, R12              // bytes per v row (F16)
	LEAQ (R10)(R10*2), R11    // 3 out rows
	MOVQ R12, R13
	SHLQ $6, R13              // a block of values (64 rows): the next one is prefetched

sh4chunk:
	SUM4_LOAD
	MOVQ    w+8(FP), SI
	MOVQ    rows+32(FP), BX
	MOVQ    DX, R9
	TESTQ   BX, BX
	JZ      sh4store

	PCALIGN $16
sh4loop:
	PREFETCHT0   (R9)(R13*1)
	PREFETCHT0   64(R9)(R13*1)
	VCVTPH2PS    (R9), Z16
	VCVTPH2PS    32(R9), Z17
	VCVTPH2PS    64(R9), Z18
	VCVTPH2PS    96(R9), Z19
	SUM4_FMA
	ADDQ         $4, SI
	ADDQ         R12, R9
	DECQ         BX
	JNZ          sh4loop

sh4store:
	SUM4_STORE
	ADDQ    $256, DI
	ADDQ    $128, DX
	DECQ    CX
	JNZ     sh4chunk
	VZEROUPPER
	RET

// func attnSumF16AVX512(out *float32, w *float32, v *uint16, hd64, rows int)
// attnSumFMAAVX512 over F16 values converted as they are loaded.
TEXT ·attnSumF16AVX512(SB), NOSPLIT, $0-40
	MOVQ out+0(FP), DI
	MOVQ v+16(FP), DX
	MOVQ hd64+24(FP), CX
	MOVQ CX, R10
	SHLQ $7, R10 // bytes per v row (F16)

sh1chunk:
	VMOVUPS (DI), Z0
	VMOVUPS 64(DI), Z1
	VMOVUPS 128(DI), Z2
	VMOVUPS 192(DI), Z3
	MOVQ    w+8(FP), SI
	MOVQ    rows+32(FP), BX
	MOVQ    DX, R9
	TESTQ   BX, BX
	JZ      sh1store

	PCALIGN $16
sh1loop:
	VBROADCASTSS (SI), Z8
	VCVTPH2PS    (R9), Z16
	VCVTPH2PS    32(R9), Z17
	VCVTPH2PS    64(R9), Z18
	VCVTPH2PS    96(R9), Z19
	VFMADD231PS  Z16, Z8, Z0
	VFMADD231PS  Z17, Z8, Z1
	VFMADD231PS  Z18, Z8, Z2
	VFMADD231PS  Z19, Z8, Z3
	ADDQ         $4, SI
	ADDQ         R10, R9
	DECQ         BX
	JNZ          sh1loop

sh1store:
	VMOVUPS Z0, (DI)
	VMOVUPS Z1, 64(DI)
	VMOVUPS Z2, 128(DI)
	VMOVUPS Z3, 192(DI)
	ADDQ    $256, DI
	ADDQ    $128, DX
	DECQ    CX
	JNZ     sh1chunk
	VZEROUPPER
	RET
