//go:build amd64 && !purego

#include "textflag.h"
#include "dot_amd64.h"

// AVX-512 VNNI (VL, BW) k-quant dots of one weight row with up to eight
// activation columns, the avx512vnni set's DotQ4_KQ8_K and DotQ6_KQ8_K.
// They compute exactly what dotQ4_KQ8_KAVX2 and dotQ6_KQ8_KAVX2 compute,
// bit for bit: the same int32 lanes per super-block and column (integer
// sums are exact, so their order is free), then the same float steps in
// the same order. Two things change:
//
//   - each 256-value super-block is unpacked into registers instead of a
//     scratch area: the eight 32-value sub-blocks of weights (unsigned
//     bytes) into Y16..Y23, their int16 scale vectors into Y24..Y31
//     (the EVEX-only registers), so a column reads only its activations;
//   - per sub-block VPDPWSSD multiplies VPMADDUBSW's int16 pair sums by the
//     scale vector and adds them to the int32 lanes in one instruction
//     (AVX2: VPMADDWD then VPADDD). Two accumulators (even and odd
//     sub-blocks) halve the dependency chain.
//
// Registers: DI out, SI weight block, DX block of column 0, R8 column
// stride, CX blocks left, BX n (1..8), R9 current column's block, Y8..Y15
// the column accumulators (8 float32 lanes each), Y0..Y4 temporaries,
// Y5 the int16 vector applied to the Q8_K bsums, Y6 d, Y7 dmin (Q4_K).

// vq4Shuf row k (32 bytes): VPSHUFB control that zero-extends byte k into
// every word.
DATA vq4Shuf<>+0(SB)/8, $0x8000800080008000
DATA vq4Shuf<>+8(SB)/8, $0x8000800080008000
DATA vq4Shuf<>+16(SB)/8, $0x8000800080008000
DATA vq4Shuf<>+24(SB)/8, $0x8000800080008000
DATA vq4Shuf<>+32(SB)/8, $0x8001800180018001
DATA vq4Shuf<>+40(SB)/8, $0x8001800180018001
DATA vq4Shuf<>+48(SB)/8, $0x8001800180018001
DATA vq4Shuf<>+56(SB)/8, $0x8001800180018001
DATA vq4Shuf<>+64(SB)/8, $0x8002800280028002
DATA vq4Shuf<>+72(SB)/8, $0x8002800280028002
DATA vq4Shuf<>+80(SB)/8, $0x8002800280028002
DATA vq4Shuf<>+88(SB)/8, $0x8002800280028002
DATA vq4Shuf<>+96(SB)/8, $0x8003800380038003
DATA vq4Shuf<>+104(SB)/8, $0x8003800380038003
DATA vq4Shuf<>+112(SB)/8, $0x8003800380038003
DATA vq4Shuf<>+120(SB)/8, $0x8003800380038003
DATA vq4Shuf<>+128(SB)/8, $0x8004800480048004
DATA vq4Shuf<>+136(SB)/8, $0x8004800480048004
DATA vq4Shuf<>+144(SB)/8, $0x8004800480048004
DATA vq4Shuf<>+152(SB)/8, $0x8004800480048004
DATA vq4Shuf<>+160(SB)/8, $0x8005800580058005
DATA vq4Shuf<>+168(SB)/8, $0x8005800580058005
DATA vq4Shuf<>+176(SB)/8, $0x8005800580058005
DATA vq4Shuf<>+184(SB)/8, $0x8005800580058005
DATA vq4Shuf<>+192(SB)/8, $0x8006800680068006
DATA vq4Shuf<>+200(SB)/8, $0x8006800680068006
DATA vq4Shuf<>+208(SB)/8, $0x8006800680068006
DATA vq4Shuf<>+216(SB)/8, $0x8006800680068006
DATA vq4Shuf<>+224(SB)/8, $0x8007800780078007
DATA vq4Shuf<>+232(SB)/8, $0x8007800780078007
DATA vq4Shuf<>+240(SB)/8, $0x8007800780078007
DATA vq4Shuf<>+248(SB)/8, $0x8007800780078007
GLOBL vq4Shuf<>(SB), RODATA|NOPTR, $256

// vq6Shuf row k: VPSHUFB control that puts byte 2k into every byte of the
// low lane and byte 2k+1 into every byte of the high lane (VPSRAW $8 then
// sign-extends it into the words).
DATA vq6Shuf<>+0(SB)/8, $0x0000000000000000
DATA vq6Shuf<>+8(SB)/8, $0x0000000000000000
DATA vq6Shuf<>+16(SB)/8, $0x0101010101010101
DATA vq6Shuf<>+24(SB)/8, $0x0101010101010101
DATA vq6Shuf<>+32(SB)/8, $0x0202020202020202
DATA vq6Shuf<>+40(SB)/8, $0x0202020202020202
DATA vq6Shuf<>+48(SB)/8, $0x0303030303030303
DATA vq6Shuf<>+56(SB)/8, $0x0303030303030303
DATA vq6Shuf<>+64(SB)/8, $0x0404040404040404
DATA vq6Shuf<>+72(SB)/8, $0x0404040404040404
DATA vq6Shuf<>+80(SB)/8, $0x0505050505050505
DATA vq6Shuf<>+88(SB)/8, $0x0505050505050505
DATA vq6Shuf<>+96(SB)/8, $0x0606060606060606
DATA vq6Shuf<>+104(SB)/8, $0x0606060606060606
DATA vq6Shuf<>+112(SB)/8, $0x0707070707070707
DATA vq6Shuf<>+120(SB)/8, $0x0707070707070707
DATA vq6Shuf<>+128(SB)/8, $0x0808080808080808
DATA vq6Shuf<>+136(SB)/8, $0x0808080808080808
DATA vq6Shuf<>+144(SB)/8, $0x0909090909090909
DATA vq6Shuf<>+152(SB)/8, $0x0909090909090909
DATA vq6Shuf<>+160(SB)/8, $0x0a0a0a0a0a0a0a0a
DATA vq6Shuf<>+168(SB)/8, $0x0a0a0a0a0a0a0a0a
DATA vq6Shuf<>+176(SB)/8, $0x0b0b0b0b0b0b0b0b
DATA vq6Shuf<>+184(SB)/8, $0x0b0b0b0b0b0b0b0b
DATA vq6Shuf<>+192(SB)/8, $0x0c0c0c0c0c0c0c0c
DATA vq6Shuf<>+200(SB)/8, $0x0c0c0c0c0c0c0c0c
DATA vq6Shuf<>+208(SB)/8, $0x0d0d0d0d0d0d0d0d
DATA vq6Shuf<>+216(SB)/8, $0x0d0d0d0d0d0d0d0d
DATA vq6Shuf<>+224(SB)/8, $0x0e0e0e0e0e0e0e0e
DATA vq6Shuf<>+232(SB)/8, $0x0e0e0e0e0e0e0e0e
DATA vq6Shuf<>+240(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA vq6Shuf<>+248(SB)/8, $0x0f0f0f0f0f0f0f0f
GLOBL vq6Shuf<>(SB), RODATA|NOPTR, $256

DATA vnib<>+0(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA vnib<>+8(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA vnib<>+16(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA vnib<>+24(SB)/8, $0x0f0f0f0f0f0f0f0f
GLOBL vnib<>(SB), RODATA|NOPTR, $32

// vq6Hi: bits 4 and 5 of every byte, where the two high bits of a Q6_K
// value go.
DATA vq6Hi<>+0(SB)/8, $0x3030303030303030
DATA vq6Hi<>+8(SB)/8, $0x3030303030303030
DATA vq6Hi<>+16(SB)/8, $0x3030303030303030
DATA vq6Hi<>+24(SB)/8, $0x3030303030303030
GLOBL vq6Hi<>(SB), RODATA|NOPTR, $32

// Per-half word shift counts of the 512-bit unpacking (VPSRLVW/VPSLLVW):
// vShr04 0 in the low 256 bits, 4 in the high; vShl42 4 and 2; vShr02 0
// and 2.
DATA vShr04<>+0(SB)/8, $0
DATA vShr04<>+8(SB)/8, $0
DATA vShr04<>+16(SB)/8, $0
DATA vShr04<>+24(SB)/8, $0
DATA vShr04<>+32(SB)/8, $0x0004000400040004
DATA vShr04<>+40(SB)/8, $0x0004000400040004
DATA vShr04<>+48(SB)/8, $0x0004000400040004
DATA vShr04<>+56(SB)/8, $0x0004000400040004
GLOBL vShr04<>(SB), RODATA|NOPTR, $64

DATA vShl42<>+0(SB)/8, $0x0004000400040004
DATA vShl42<>+8(SB)/8, $0x0004000400040004
DATA vShl42<>+16(SB)/8, $0x0004000400040004
DATA vShl42<>+24(SB)/8, $0x0004000400040004
DATA vShl42<>+32(SB)/8, $0x0002000200020002
DATA vShl42<>+40(SB)/8, $0x0002000200020002
DATA vShl42<>+48(SB)/8, $0x0002000200020002
DATA vShl42<>+56(SB)/8, $0x0002000200020002
GLOBL vShl42<>(SB), RODATA|NOPTR, $64

DATA vShr02<>+0(SB)/8, $0
DATA vShr02<>+8(SB)/8, $0
DATA vShr02<>+16(SB)/8, $0
DATA vShr02<>+24(SB)/8, $0
DATA vShr02<>+32(SB)/8, $0x0002000200020002
DATA vShr02<>+40(SB)/8, $0x0002000200020002
DATA vShr02<>+48(SB)/8, $0x0002000200020002
DATA vShr02<>+56(SB)/8, $0x0002000200020002
GLOBL vShr02<>(SB), RODATA|NOPTR, $64

// VSUMKY leaves in Y0 the int32 lanes of sum scale*q*q8 over a super-block
// (weights Y16..Y23, scale vectors Y24..Y31, q8 at 4(R9)): lane i gets
// scale_k * (the 4 products of values 4i..4i+3 of sub-block k), as in the
// avx2 kernels' VPMADDUBSW/VPMADDWD lanes. Even sub-blocks go to Y0, odd
// ones to Y1.
#define VSUMKY \
	VPMADDUBSW 4(R9), Y16, Y0;   \
	VPMADDWD   Y24, Y0, Y0;      \
	VPMADDUBSW 36(R9), Y17, Y1;  \
	VPMADDWD   Y25, Y1, Y1;      \
	VPMADDUBSW 68(R9), Y18, Y2;  \
	VPDPWSSD   Y26, Y2, Y0;      \
	VPMADDUBSW 100(R9), Y19, Y3; \
	VPDPWSSD   Y27, Y3, Y1;      \
	VPMADDUBSW 132(R9), Y20, Y2; \
	VPDPWSSD   Y28, Y2, Y0;      \
	VPMADDUBSW 164(R9), Y21, Y3; \
	VPDPWSSD   Y29, Y3, Y1;      \
	VPMADDUBSW 196(R9), Y22, Y2; \
	VPDPWSSD   Y30, Y2, Y0;      \
	VPMADDUBSW 228(R9), Y23, Y3; \
	VPDPWSSD   Y31, Y3, Y1;      \
	VPADDD     Y1, Y0, Y0

// VQ4TAIL (after VSUMKY/VSUMKZ): acc += (d*yd) * sum - (dmin*yd) * (mins · bsums), the float
// steps of the avx2 kernel.
#define VQ4TAIL(acc) \
	VMOVDQU  260(R9), Y2;       \
	VPMADDWD Y5, Y2, Y2;        \
	VCVTDQ2PS Y0, Y0;           \
	VCVTDQ2PS Y2, Y2;           \
	VBROADCASTSS (R9), Y3;      \
	VMULPS Y6, Y3, Y4;          \
	VMULPS Y7, Y3, Y3;          \
	VFMADD231PS Y4, Y0, acc;    \
	VFNMADD231PS Y3, Y2, acc;   \
	ADDQ R8, R9


// The zmm variants: sub-blocks 2j and 2j+1 side by side in Z16+2j (weights)
// and Z24+2j (scale vectors), so one 512-bit VPMADDUBSW/VPDPWSSD pair
// covers 64 values; the two 256-bit halves of the int32 lanes are added at
// the end (the same integer lanes).
#define VSUMKZ \
	VPMADDUBSW 4(R9), Z16, Z0;   \
	VPMADDWD   Z24, Z0, Z0;      \
	VPMADDUBSW 68(R9), Z18, Z1;  \
	VPDPWSSD   Z26, Z1, Z0;      \
	VPMADDUBSW 132(R9), Z20, Z2; \
	VPDPWSSD   Z28, Z2, Z0;      \
	VPMADDUBSW 196(R9), Z22, Z3; \
	VPDPWSSD   Z30, Z3, Z0;      \
	VEXTRACTI64X4 $1, Z0, Y1;    \
	VPADDD     Y1, Y0, Y0

// VQ4UNPACK unpacks the Q4_K super-block at SI: the 6-bit scales and mins
// (ggml's utmp shuffle: scales 0..3 in AX, 4..7 in R10, mins 0..3 in R9,
// 4..7 in R11); scale k zero-extended into all 16 words of Y24+k; the
// mins (min j in words 2j and 2j+1, against bsums 2j and 2j+1) in Y5; the
// weights (the low nibbles of 32 bytes are sub-block 2j, the high nibbles
// sub-block 2j+1) in Y16..Y23; d in Y6, dmin in Y7.
#define VQ4GPR \
	MOVL 4(SI), AX; \
	MOVL 8(SI), R9; \
	MOVL 12(SI), R10; \
	MOVL R10, R11; \
	SHRL $4, R11; \
	ANDL $0x0f0f0f0f, R11; \
	MOVL R9, R12; \
	SHRL $6, R12; \
	ANDL $0x03030303, R12; \
	SHLL $4, R12; \
	ORL  R12, R11; \
	ANDL $0x3f3f3f3f, R9; \
	ANDL $0x0f0f0f0f, R10; \
	MOVL AX, R12; \
	SHRL $6, R12; \
	ANDL $0x03030303, R12; \
	SHLL $4, R12; \
	ORL  R12, R10; \
	ANDL $0x3f3f3f3f, AX; \
	SHLQ $32, R10; \
	ORQ  AX, R10; \
	SHLQ $32, R11; \
	ORQ  R9, R11

#define VQ4UNPACK \
	VQ4GPR; \
	VMOVQ        R10, X1; \
	VPBROADCASTQ X1, Y1; \
	VPSHUFB      vq4Shuf<>+0(SB), Y1, Y24; \
	VPSHUFB      vq4Shuf<>+32(SB), Y1, Y25; \
	VPSHUFB      vq4Shuf<>+64(SB), Y1, Y26; \
	VPSHUFB      vq4Shuf<>+96(SB), Y1, Y27; \
	VPSHUFB      vq4Shuf<>+128(SB), Y1, Y28; \
	VPSHUFB      vq4Shuf<>+160(SB), Y1, Y29; \
	VPSHUFB      vq4Shuf<>+192(SB), Y1, Y30; \
	VPSHUFB      vq4Shuf<>+224(SB), Y1, Y31; \
	VMOVQ       R11, X2; \
	VPMOVZXBW   X2, X2; \
	VPUNPCKLWD  X2, X2, X3; \
	VPUNPCKHWD  X2, X2, X4; \
	VINSERTI128 $1, X4, Y3, Y5; \
	VMOVDQU vnib<>(SB), Y4; \
	VMOVDQU 16(SI), Y0; \
	VMOVDQU 48(SI), Y1; \
	VMOVDQU 80(SI), Y2; \
	VMOVDQU 112(SI), Y3; \
	VPANDD  Y4, Y0, Y16; \
	VPANDD  Y4, Y1, Y18; \
	VPANDD  Y4, Y2, Y20; \
	VPANDD  Y4, Y3, Y22; \
	VPSRLW  $4, Y0, Y0; \
	VPSRLW  $4, Y1, Y1; \
	VPSRLW  $4, Y2, Y2; \
	VPSRLW  $4, Y3, Y3; \
	VPANDD  Y4, Y0, Y17; \
	VPANDD  Y4, Y1, Y19; \
	VPANDD  Y4, Y2, Y21; \
	VPANDD  Y4, Y3, Y23; \
	VPBROADCASTW (SI), X6; \
	VCVTPH2PS    X6, Y6; \
	VPBROADCASTW 2(SI), X7; \
	VCVTPH2PS    X7, Y7

// VQ6TAIL (after VSUMKY/VSUMKZ): acc += (d*yd) * (sum scale*q*q8 - 32 * scales · bsums), the
// float steps of the avx2 kernel.
#define VQ6TAIL(acc) \
	VMOVDQU  260(R9), Y2;       \
	VPMADDWD Y5, Y2, Y2;        \
	VPSLLD   $5, Y2, Y2;        \
	VPSUBD   Y2, Y0, Y0;        \
	VCVTDQ2PS Y0, Y0;           \
	VBROADCASTSS (R9), Y3;      \
	VMULPS Y6, Y3, Y3;          \
	VFMADD231PS Y3, Y0, acc;    \
	ADDQ R8, R9

// VQ6SUB makes the weights dst of one sub-block: the low four bits from
// lo (Y0 or Y1) shifted right by lsh, the two high bits from qh (Y2)
// shifted by SHIFT $sh into bits 4..5; Y4 = nibble mask, Y5 = bits 4..5.
#define VQ6SUB(lo, lsh, SHIFT, sh, dst) \
	VPSRLW     $lsh, lo, Y3;  \
	SHIFT      $sh, Y2, dst;  \
	VPANDD     Y5, dst, dst;  \
	VPTERNLOGD $0xf8, Y4, Y3, dst

// VQ6HALF unpacks one 128-value half: ql at qoff(SI), qh at hoff(SI),
// into the weights of sub-blocks d0..d3.
#define VQ6HALF(qoff, hoff, d0, d1, d2, d3) \
	VMOVDQU qoff(SI), Y0;          \
	VMOVDQU (qoff+32)(SI), Y1;     \
	VMOVDQU hoff(SI), Y2;          \
	VQ6SUB(Y0, 0, VPSLLW, 4, d0);  \
	VQ6SUB(Y1, 0, VPSLLW, 2, d1);  \
	VQ6SUB(Y0, 4, VPSRLW, 0, d2);  \
	VQ6SUB(Y1, 4, VPSRLW, 2, d3)

// VQ6UNPACK unpacks the Q6_K super-block at SI: the weights in Y16..Y23;
// the scale vectors in Y24..Y31 (sub-block k covers scales 2k in the low
// lane and 2k+1 in the high lane, sign-extended to words); the scales as
// words against the bsums (the -32 offset) in Y5; d in Y6.
#define VQ6UNPACK \
	VMOVDQU vnib<>(SB), Y4; \
	VMOVDQU vq6Hi<>(SB), Y5; \
	VQ6HALF(0, 128, Y16, Y17, Y18, Y19); \
	VQ6HALF(64, 160, Y20, Y21, Y22, Y23); \
	VBROADCASTI128 192(SI), Y1; \
	VPSHUFB        vq6Shuf<>+0(SB), Y1, Y24; \
	VPSHUFB        vq6Shuf<>+32(SB), Y1, Y25; \
	VPSHUFB        vq6Shuf<>+64(SB), Y1, Y26; \
	VPSHUFB        vq6Shuf<>+96(SB), Y1, Y27; \
	VPSHUFB        vq6Shuf<>+128(SB), Y1, Y28; \
	VPSHUFB        vq6Shuf<>+160(SB), Y1, Y29; \
	VPSHUFB        vq6Shuf<>+192(SB), Y1, Y30; \
	VPSHUFB        vq6Shuf<>+224(SB), Y1, Y31; \
	VPSRAW         $8, Y24, Y24; \
	VPSRAW         $8, Y25, Y25; \
	VPSRAW         $8, Y26, Y26; \
	VPSRAW         $8, Y27, Y27; \
	VPSRAW         $8, Y28, Y28; \
	VPSRAW         $8, Y29, Y29; \
	VPSRAW         $8, Y30, Y30; \
	VPSRAW         $8, Y31, Y31; \
	VPMOVSXBW 192(SI), Y5; \
	VPBROADCASTW 208(SI), X6; \
	VCVTPH2PS    X6, Y6

// VQ4UNPACKZ is VQ4UNPACK for the 512-bit variant: sub-blocks 2j and 2j+1
// (the low and high nibbles of 32 bytes) in the halves of Z16+2j, their
// scale vectors in the halves of Z24+2j (rows 2j and 2j+1 of vq4Shuf
// side by side), mins in Y5, d in Y6, dmin in Y7.
#define VQ4UNPACKZ \
	VQ4GPR; \
	VMOVQ        R10, X1; \
	VPBROADCASTQ X1, Z1; \
	VPSHUFB      vq4Shuf<>+0(SB), Z1, Z24; \
	VPSHUFB      vq4Shuf<>+64(SB), Z1, Z26; \
	VPSHUFB      vq4Shuf<>+128(SB), Z1, Z28; \
	VPSHUFB      vq4Shuf<>+192(SB), Z1, Z30; \
	VMOVQ       R11, X2; \
	VPMOVZXBW   X2, X2; \
	VPUNPCKLWD  X2, X2, X3; \
	VPUNPCKHWD  X2, X2, X4; \
	VINSERTI128 $1, X4, Y3, Y5; \
	VPBROADCASTQ vnib<>(SB), Z4; \
	VMOVDQU64    vShr04<>(SB), Z3; \
	VBROADCASTI64X4 16(SI), Z0; \
	VPSRLVW      Z3, Z0, Z0; \
	VPANDD       Z4, Z0, Z16; \
	VBROADCASTI64X4 48(SI), Z1; \
	VPSRLVW      Z3, Z1, Z1; \
	VPANDD       Z4, Z1, Z18; \
	VBROADCASTI64X4 80(SI), Z0; \
	VPSRLVW      Z3, Z0, Z0; \
	VPANDD       Z4, Z0, Z20; \
	VBROADCASTI64X4 112(SI), Z1; \
	VPSRLVW      Z3, Z1, Z1; \
	VPANDD       Z4, Z1, Z22; \
	VPBROADCASTW (SI), X6; \
	VCVTPH2PS    X6, Y6; \
	VPBROADCASTW 2(SI), X7; \
	VCVTPH2PS    X7, Y7

// VQ6HALFZ unpacks one 128-value half of Q6_K for the 512-bit variant: ql
// (64 bytes) at qoff(SI), qh (32 bytes, both halves) at hoff(SI); sub-blocks
// 0 and 1 of the half (low nibbles, qh bits 0..1 and 2..3) into d01, 2 and
// 3 (high nibbles, qh bits 4..5 and 6..7) into d23. Z4 = nibble mask, Z5 =
// bits 4..5.
#define VQ6HALFZ(qoff, hoff, d01, d23) \
	VMOVDQU64       qoff(SI), Z0;           \
	VBROADCASTI64X4 hoff(SI), Z2;           \
	VPSLLVW         vShl42<>(SB), Z2, d01;  \
	VPANDD          Z5, d01, d01;           \
	VPTERNLOGD      $0xf8, Z4, Z0, d01;     \
	VPSRLW          $4, Z0, Z1;             \
	VPSRLVW         vShr02<>(SB), Z2, d23;  \
	VPANDD          Z5, d23, d23;           \
	VPTERNLOGD      $0xf8, Z4, Z1, d23

// VQ6UNPACKZ is VQ6UNPACK for the 512-bit variant: sub-blocks 2j and 2j+1
// in the halves of Z16+2j, their scale vectors (scales 4j..4j+3 in the four
// 128-bit lanes: rows 2j and 2j+1 of vq6Shuf side by side) in Z24+2j.
#define VQ6UNPACKZ \
	VPBROADCASTQ vnib<>(SB), Z4; \
	VPBROADCASTQ vq6Hi<>(SB), Z5; \
	VQ6HALFZ(0, 128, Z16, Z18); \
	VQ6HALFZ(64, 160, Z20, Z22); \
	VBROADCASTI32X4 192(SI), Z1; \
	VPSHUFB        vq6Shuf<>+0(SB), Z1, Z24; \
	VPSHUFB        vq6Shuf<>+64(SB), Z1, Z26; \
	VPSHUFB        vq6Shuf<>+128(SB), Z1, Z28; \
	VPSHUFB        vq6Shuf<>+192(SB), Z1, Z30; \
	VPSRAW         $8, Z24, Z24; \
	VPSRAW         $8, Z26, Z26; \
	VPSRAW         $8, Z28, Z28; \
	VPSRAW         $8, Z30, Z30; \
	VPMOVSXBW 192(SI), Y5; \
	VPBROADCASTW 208(SI), X6; \
	VCVTPH2PS    X6, Y6

#define VCOLQ4KY(acc) VSUMKY; VQ4TAIL(acc)
#define VCOLQ4KZ(acc) VSUMKZ; VQ4TAIL(acc)
#define VCOLQ6KY(acc) VSUMKY; VQ6TAIL(acc)
#define VCOLQ6KZ(acc) VSUMKZ; VQ6TAIL(acc)

// func dotQ4_KQ8_KVNNI(out *float32, w, a *byte, aStride, nb, n int)
TEXT ·dotQ4_KQ8_KVNNI(SB), NOSPLIT, $0-48
	ARGS
	ZERO8
	TESTQ CX, CX
	JZ    q4ydone

	PCALIGN $16
q4yloop:
	VQ4UNPACK
	EACHCOL(VCOLQ4KY, q4ynext)

q4ynext:
	ADDQ $144, SI
	ADDQ $292, DX
	DECQ CX
	JNZ  q4yloop

q4ydone:
	STOREALL(q4yret)

q4yret:
	VZEROUPPER
	RET

// func dotQ4_KQ8_KVNNIZ(out *float32, w, a *byte, aStride, nb, n int)
TEXT ·dotQ4_KQ8_KVNNIZ(SB), NOSPLIT, $0-48
	ARGS
	ZERO8
	TESTQ CX, CX
	JZ    q4zdone

	PCALIGN $16
q4zloop:
	VQ4UNPACKZ
	EACHCOL(VCOLQ4KZ, q4znext)

q4znext:
	ADDQ $144, SI
	ADDQ $292, DX
	DECQ CX
	JNZ  q4zloop

q4zdone:
	STOREALL(q4zret)

q4zret:
	VZEROUPPER
	RET

// func dotQ6_KQ8_KVNNI(out *float32, w, a *byte, aStride, nb, n int)
TEXT ·dotQ6_KQ8_KVNNI(SB), NOSPLIT, $0-48
	ARGS
	ZERO8
	TESTQ CX, CX
	JZ    q6ydone

	PCALIGN $16
q6yloop:
	VQ6UNPACK
	EACHCOL(VCOLQ6KY, q6ynext)

q6ynext:
	ADDQ $210, SI
	ADDQ $292, DX
	DECQ CX
	JNZ  q6yloop

q6ydone:
	STOREALL(q6yret)

q6yret:
	VZEROUPPER
	RET

// func dotQ6_KQ8_KVNNIZ(out *float32, w, a *byte, aStride, nb, n int)
TEXT ·dotQ6_KQ8_KVNNIZ(SB), NOSPLIT, $0-48
	ARGS
	ZERO8
	TESTQ CX, CX
	JZ    q6zdone

	PCALIGN $16
q6zloop:
	VQ6UNPACKZ
	EACHCOL(VCOLQ6KZ, q6znext)

q6znext:
	ADDQ $210, SI
	ADDQ $292, DX
	DECQ CX
	JNZ  q6zloop

q6zdone:
	STOREALL(q6zret)

q6zret:
	VZEROUPPER
	RET
