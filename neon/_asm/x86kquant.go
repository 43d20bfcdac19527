package main

import "fmt"

// The avx512vnni set's k-quant one-row dots (kquant_vnni_amd64.s), in a
// 256-bit and a 512-bit variant from one function per type.

const kquantDoc = `AVX-512 VNNI (VL, BW) k-quant dots of one weight row with up to eight
activation columns, the avx512vnni set's DotQ4_KQ8_K and DotQ6_KQ8_K.
They compute exactly what dotQ4_KQ8_KAVX2 and dotQ6_KQ8_KAVX2 compute,
bit for bit: the same int32 lanes per super-block and column (integer
sums are exact, so their order is free), then the same float steps in
the same order. Two things change:

  - each 256-value super-block is unpacked into registers instead of a
    scratch area: the eight 32-value sub-blocks of weights (unsigned
    bytes) into Y16..Y23, their int16 scale vectors into Y24..Y31
    (the EVEX-only registers), so a column reads only its activations;
  - per sub-block VPDPWSSD multiplies VPMADDUBSW's int16 pair sums by the
    scale vector and adds them to the int32 lanes in one instruction
    (AVX2: VPMADDWD then VPADDD). Two accumulators (even and odd
    sub-blocks) halve the dependency chain.

The zmm variants (suffix Z) put sub-blocks 2j and 2j+1 side by side in
Z16+2j (weights) and Z24+2j (scale vectors), so one 512-bit
VPMADDUBSW/VPDPWSSD pair covers 64 values; the two 256-bit halves of the
int32 lanes are added at the end (the same integer lanes).

Registers: DI out, SI weight block, DX block of column 0, R8 column
stride, CX blocks left, BX n (1..8), R9 current column's block, Y8..Y15
the column accumulators (8 float32 lanes each), Y0..Y4 temporaries,
Y5 the int16 vector applied to the Q8_K bsums, Y6 d, Y7 dmin (Q4_K).`

// kqData emits the constants of the k-quant kernels.
func (a *asm) kqData() {
	a.b.WriteString("\n// vq4Shuf row k (32 bytes): VPSHUFB control that zero-extends byte k into\n// every word.\n")
	var w []uint64
	for k := uint64(0); k < 8; k++ {
		for i := 0; i < 4; i++ {
			w = append(w, 0x8000800080008000+k*0x0001000100010001)
		}
	}
	a.data("vq4Shuf", w...)
	a.b.WriteString("\n// vq6Shuf row k: VPSHUFB control that puts byte 2k into every byte of the\n// low lane and byte 2k+1 into every byte of the high lane (VPSRAW $8 then\n// sign-extends it into the words).\n")
	w = nil
	for b := uint64(0); b < 16; b++ {
		w = append(w, b*0x0101010101010101, b*0x0101010101010101)
	}
	a.data("vq6Shuf", w...)
	a.b.WriteString("\n")
	a.splat("vnib", 0x0f0f0f0f0f0f0f0f, 32)
	a.b.WriteString("\n// vq6Hi: bits 4 and 5 of every byte, where the two high bits of a Q6_K\n// value go.\n")
	a.splat("vq6Hi", 0x3030303030303030, 32)
	a.b.WriteString("\n// Per-half word shift counts of the 512-bit unpacking (VPSRLVW/VPSLLVW):\n// vShr04 0 in the low 256 bits, 4 in the high; vShl42 4 and 2; vShr02 0\n// and 2.\n")
	halves := func(name string, lo, hi uint64) {
		a.data(name, lo, lo, lo, lo, hi, hi, hi, hi)
	}
	halves("vShr04", 0, 0x0004000400040004)
	a.b.WriteString("\n")
	halves("vShl42", 0x0004000400040004, 0x0002000200020002)
	a.b.WriteString("\n")
	halves("vShr02", 0, 0x0002000200020002)
}

// vsumk leaves in Y0 the int32 lanes of sum scale*q*q8 over a
// super-block (weights V16..V23, scale vectors V24..V31, q8 at 4(R9)):
// lane i gets scale_k * (the 4 products of values 4i..4i+3 of sub-block
// k), as in the avx2 kernels' VPMADDUBSW/VPMADDWD lanes. In ymm even
// sub-blocks go to Y0, odd ones to Y1; in zmm one chain over the pairs,
// its halves added.
func (a *asm) vsumk(w int) {
	if w == 512 {
		for j := 0; j < 4; j++ {
			a.l("VPMADDUBSW %d(R9), %s, %s", 4+64*j, z(16+2*j), z(j))
			if j == 0 {
				a.l("VPMADDWD Z24, Z0, Z0")
			} else {
				a.l("VPDPWSSD %s, %s, Z0", z(24+2*j), z(j))
			}
		}
		a.l("VEXTRACTI64X4 $1, Z0, Y1")
		a.l("VPADDD Y1, Y0, Y0")
		return
	}
	for k := 0; k < 8; k++ {
		t, acc := y(k%2), y(k%2)
		if k >= 2 {
			t = y(2 + k%2)
		}
		a.l("VPMADDUBSW %d(R9), %s, %s", 4+32*k, y(16+k), t)
		if k < 2 {
			a.l("VPMADDWD %s, %s, %s", y(24+k), t, t)
		} else {
			a.l("VPDPWSSD %s, %s, %s", y(24+k), t, acc)
		}
	}
	a.l("VPADDD Y1, Y0, Y0")
}

// vq4tail (after vsumk or sumk): acc += (d*yd) * sum - (dmin*yd) *
// (mins · bsums) (bs the mins vector), the float steps of every set; then
// the next column.
func (a *asm) vq4tail(acc int, bs string) { a.kqTail(acc, bs, false) }

// vq6tail (after vsumk or sumk): acc += (d*yd) * (sum scale*q*q8 - 32 *
// scales · bsums) (bs the scales vector), the float steps of every set;
// then the next column.
func (a *asm) vq6tail(acc int, bs string) { a.kqTail(acc, bs, true) }

func (a *asm) kqTail(acc int, bs string, q6 bool) {
	a.l("VMOVDQU 260(R9), Y2")
	a.l("VPMADDWD %s, Y2, Y2", bs)
	if q6 {
		a.l("VPSLLD $5, Y2, Y2")
		a.l("VPSUBD Y2, Y0, Y0")
		a.l("VCVTDQ2PS Y0, Y0")
		a.l("VBROADCASTSS (R9), Y3")
		a.l("VMULPS Y6, Y3, Y3")
		a.l("VFMADD231PS Y3, Y0, Y%d", acc)
	} else {
		a.l("VCVTDQ2PS Y0, Y0")
		a.l("VCVTDQ2PS Y2, Y2")
		a.l("VBROADCASTSS (R9), Y3")
		a.l("VMULPS Y6, Y3, Y4")
		a.l("VMULPS Y7, Y3, Y3")
		a.l("VFMADD231PS Y4, Y0, Y%d", acc)
		a.l("VFNMADD231PS Y3, Y2, Y%d", acc)
	}
	a.l("ADDQ R8, R9")
}

// q4kGPR computes the 6-bit scales and mins of the Q4_K super-block at
// SI (ggml's utmp shuffle): scales 0..7 in R10, mins 0..7 in R11.
func (a *asm) q4kGPR() {
	for _, s := range []string{
		"MOVL 4(SI), AX", "MOVL 8(SI), R9", "MOVL 12(SI), R10", "MOVL R10, R11",
		"SHRL $4, R11", "ANDL $0x0f0f0f0f, R11", "MOVL R9, R12", "SHRL $6, R12",
		"ANDL $0x03030303, R12", "SHLL $4, R12", "ORL R12, R11", "ANDL $0x3f3f3f3f, R9",
		"ANDL $0x0f0f0f0f, R10", "MOVL AX, R12", "SHRL $6, R12", "ANDL $0x03030303, R12",
		"SHLL $4, R12", "ORL R12, R10", "ANDL $0x3f3f3f3f, AX", "SHLQ $32, R10",
		"ORQ AX, R10", "SHLQ $32, R11", "ORQ R9, R11",
	} {
		a.l("%s", s)
	}
}

// vq4unpack unpacks the Q4_K super-block at SI: scale k zero-extended
// into all 16 words of the scale vector of sub-block k; the mins (min j
// in words 2j and 2j+1, against bsums 2j and 2j+1) in Y5; the weights
// (the low nibbles of 32 bytes are sub-block 2j, the high nibbles
// sub-block 2j+1); d in Y6, dmin in Y7. In zmm sub-blocks 2j and 2j+1 go
// to the halves of Z16+2j and Z24+2j.
func (a *asm) vq4unpack(w int) {
	a.q4kGPR()
	a.l("VMOVQ R10, X1")
	a.l("VPBROADCASTQ X1, %s", vreg(w, 1))
	step := w / 256
	for k := 0; k < 8; k += step {
		a.l("VPSHUFB vq4Shuf<>+%d(SB), %s, %s", 32*k, vreg(w, 1), vreg(w, 24+k))
	}
	a.l("VMOVQ R11, X2")
	a.l("VPMOVZXBW X2, X2")
	a.l("VPUNPCKLWD X2, X2, X3")
	a.l("VPUNPCKHWD X2, X2, X4")
	a.l("VINSERTI128 $1, X4, Y3, Y5")
	if w == 512 {
		a.l("VPBROADCASTQ vnib<>(SB), Z4")
		a.l("VMOVDQU64 vShr04<>(SB), Z3")
		for j := 0; j < 4; j++ {
			t := z(j % 2)
			a.l("VBROADCASTI64X4 %d(SI), %s", 16+32*j, t)
			a.l("VPSRLVW Z3, %s, %s", t, t)
			a.l("VPANDD Z4, %s, %s", t, z(16+2*j))
		}
	} else {
		a.l("VMOVDQU vnib<>(SB), Y4")
		for j := 0; j < 4; j++ {
			a.l("VMOVDQU %d(SI), %s", 16+32*j, y(j))
		}
		for j := 0; j < 4; j++ {
			a.l("VPANDD Y4, %s, %s", y(j), y(16+2*j))
		}
		for j := 0; j < 4; j++ {
			a.l("VPSRLW $4, %s, %s", y(j), y(j))
		}
		for j := 0; j < 4; j++ {
			a.l("VPANDD Y4, %s, %s", y(j), y(17+2*j))
		}
	}
	a.l("VPBROADCASTW (SI), X6")
	a.l("VCVTPH2PS X6, Y6")
	a.l("VPBROADCASTW 2(SI), X7")
	a.l("VCVTPH2PS X7, Y7")
}

// vq6unpack unpacks the Q6_K super-block at SI: the weights (the low four
// bits from ql, the two high ones from qh into bits 4..5, combined by
// VPTERNLOGD; Y4/Z4 the nibble mask, Y5/Z5 bits 4..5); the scale vectors
// (sub-block k covers scales 2k in the low lane and 2k+1 in the high
// lane, sign-extended to words); the scales as words against the bsums
// (the -32 offset) in Y5; d in Y6. In zmm as vq4unpack.
func (a *asm) vq6unpack(w int) {
	if w == 512 {
		a.l("VPBROADCASTQ vnib<>(SB), Z4")
		a.l("VPBROADCASTQ vq6Hi<>(SB), Z5")
		for h := 0; h < 2; h++ {
			// ql (64 bytes) at 64h, qh (32 bytes) at 128+32h; sub-blocks 0
			// and 1 of the half (low nibbles, qh bits 0..1 and 2..3), 2 and
			// 3 (high nibbles, qh bits 4..5 and 6..7).
			d01, d23 := z(16+4*h), z(18+4*h)
			a.l("VMOVDQU64 %d(SI), Z0", 64*h)
			a.l("VBROADCASTI64X4 %d(SI), Z2", 128+32*h)
			a.l("VPSLLVW vShl42<>(SB), Z2, %s", d01)
			a.l("VPANDD Z5, %s, %s", d01, d01)
			a.l("VPTERNLOGD $0xf8, Z4, Z0, %s", d01)
			a.l("VPSRLW $4, Z0, Z1")
			a.l("VPSRLVW vShr02<>(SB), Z2, %s", d23)
			a.l("VPANDD Z5, %s, %s", d23, d23)
			a.l("VPTERNLOGD $0xf8, Z4, Z1, %s", d23)
		}
		a.l("VBROADCASTI32X4 192(SI), Z1")
	} else {
		a.l("VMOVDQU vnib<>(SB), Y4")
		a.l("VMOVDQU vq6Hi<>(SB), Y5")
		for h := 0; h < 2; h++ {
			a.l("VMOVDQU %d(SI), Y0", 64*h)
			a.l("VMOVDQU %d(SI), Y1", 64*h+32)
			a.l("VMOVDQU %d(SI), Y2", 128+32*h)
			for s, sub := range []struct {
				lo    string
				lsh   int
				shift string
				sh    int
			}{{"Y0", 0, "VPSLLW", 4}, {"Y1", 0, "VPSLLW", 2}, {"Y0", 4, "VPSRLW", 0}, {"Y1", 4, "VPSRLW", 2}} {
				d := y(16 + 4*h + s)
				a.l("VPSRLW $%d, %s, Y3", sub.lsh, sub.lo)
				a.l("%s $%d, Y2, %s", sub.shift, sub.sh, d)
				a.l("VPANDD Y5, %s, %s", d, d)
				a.l("VPTERNLOGD $0xf8, Y4, Y3, %s", d)
			}
		}
		a.l("VBROADCASTI128 192(SI), Y1")
	}
	step := w / 256
	for k := 0; k < 8; k += step {
		a.l("VPSHUFB vq6Shuf<>+%d(SB), %s, %s", 32*k, vreg(w, 1), vreg(w, 24+k))
	}
	for k := 0; k < 8; k += step {
		a.l("VPSRAW $8, %s, %s", vreg(w, 24+k), vreg(w, 24+k))
	}
	a.l("VPMOVSXBW 192(SI), Y5")
	a.l("VPBROADCASTW 208(SI), X6")
	a.l("VCVTPH2PS X6, Y6")
}

// genKQuant writes kquant_vnni_amd64.s.
func genKQuant(a *asm) {
	a.b.WriteString("\n")
	a.doc(kquantDoc)
	a.kqData()
	for _, q := range []struct {
		name string
		bsz  int
		tail func(acc int, bs string)
		un   func(w int)
	}{{"Q4_K", 144, a.vq4tail, a.vq4unpack}, {"Q6_K", 210, a.vq6tail, a.vq6unpack}} {
		for _, w := range []int{256, 512} {
			suffix, l := "", "y"
			if w == 512 {
				suffix, l = "Z", "z"
			}
			a.textX86("dot"+q.name+"Q8_KVNNI"+suffix, dotSigX86, "NOSPLIT", "$0-48")
			prefix := fmt.Sprintf("q%c%s", q.name[1], l)
			a.dotLoop(prefix, q.bsz, 292, false, func() { q.un(w) }, func(acc int) {
				a.vsumk(w)
				q.tail(acc, "Y5")
			})
		}
	}
}

// The avx2 k-quant kernels unpack each 256-value super-block once into a
// 32-byte aligned scratch area (R13) and then run every column over it:
// 0..255 the 256 weights as unsigned bytes, 32 per sub-block k; 256..511
// per sub-block k the int16 scale vector applied by VPMADDWD; 512..543 the
// int16 vector applied to the Q8_K bsums.

// sumk leaves in Y0 the int32 lanes of sum scale*q*q8 over a super-block
// (the scratch's sub-blocks, q8 at 4(R9)).
func (a *asm) sumk() {
	a.l("VMOVDQU 0(R13), Y0")
	a.l("VPMADDUBSW 4(R9), Y0, Y0")
	a.l("VPMADDWD 256(R13), Y0, Y0")
	for k := 1; k < 8; k++ {
		a.l("VMOVDQU %d(R13), Y1", 32*k)
		a.l("VPMADDUBSW %d(R9), Y1, Y1", 4+32*k)
		a.l("VPMADDWD %d(R13), Y1, Y1", 256+32*k)
		a.l("VPADDD Y1, Y0, Y0")
	}
}

// q4kAVX2 unpacks the Q4_K super-block at SI into the scratch; d in Y6,
// dmin in Y7.
func (a *asm) q4kAVX2() {
	a.q4kGPR()
	// Scale vectors: scale k zero-extended into all 16 words.
	a.l("VMOVQ R10, X1")
	a.l("VPBROADCASTQ X1, Y1")
	a.l("VMOVDQU k4Shuf<>(SB), Y3")
	a.l("VMOVDQU ones16<>(SB), Y4")
	for k := 0; k < 8; k++ {
		if k > 0 {
			a.l("VPADDW Y4, Y3, Y3")
		}
		a.l("VPSHUFB Y3, Y1, Y0")
		a.l("VMOVDQU Y0, %d(R13)", 256+32*k)
	}
	// Mins: min j in words 2j and 2j+1, against bsums 2j and 2j+1.
	a.l("VMOVQ R11, X2")
	a.l("VPMOVZXBW X2, X2")
	a.l("VPUNPCKLWD X2, X2, X3")
	a.l("VPUNPCKHWD X2, X2, X4")
	a.l("VINSERTI128 $1, X4, Y3, Y3")
	a.l("VMOVDQU Y3, 512(R13)")
	// Weights: the low nibbles of 32 bytes are sub-block 2j, the high
	// nibbles sub-block 2j+1.
	a.l("VMOVDQU nib<>(SB), Y5")
	for j := 0; j < 4; j++ {
		a.l("VMOVDQU %d(SI), Y1", 16+32*j)
		a.l("VPAND Y5, Y1, Y2")
		a.l("VMOVDQU Y2, %d(R13)", 64*j)
		a.l("VPSRLW $4, Y1, Y1")
		a.l("VPAND Y5, Y1, Y1")
		a.l("VMOVDQU Y1, %d(R13)", 64*j+32)
	}
	a.l("VPBROADCASTW (SI), X6")
	a.l("VCVTPH2PS X6, Y6")
	a.l("VPBROADCASTW 2(SI), X7")
	a.l("VCVTPH2PS X7, Y7")
}

// q6kAVX2 unpacks the Q6_K super-block at SI into the scratch; d in Y6.
func (a *asm) q6kAVX2() {
	a.l("VMOVDQU nib<>(SB), Y5")
	for h := 0; h < 2; h++ {
		// One 128-value half: ql at 64h, qh at 128+32h; sub-block s gets
		// the low bits of ql shifted right by lsh, the two high bits of qh
		// (mask) moved to bits 4..5.
		a.l("VMOVDQU %d(SI), Y0", 64*h)
		a.l("VMOVDQU %d(SI), Y1", 64*h+32)
		a.l("VMOVDQU %d(SI), Y2", 128+32*h)
		for s, sub := range []struct {
			lo, mask, shift string
			lsh, sh         int
		}{{"Y0", "m03", "VPSLLW", 0, 4}, {"Y1", "m0c", "VPSLLW", 0, 2}, {"Y0", "m30", "VPSRLW", 4, 0}, {"Y1", "mc0", "VPSRLW", 4, 2}} {
			a.l("VPSRLW $%d, %s, Y3", sub.lsh, sub.lo)
			a.l("VPAND Y5, Y3, Y3")
			a.l("VPAND %s<>(SB), Y2, Y4", sub.mask)
			a.l("%s $%d, Y4, Y4", sub.shift, sub.sh)
			a.l("VPOR Y4, Y3, Y3")
			a.l("VMOVDQU Y3, %d(R13)", 128*h+32*s)
		}
	}
	// Scale vectors: sub-block k covers scales 2k (low lane) and 2k+1
	// (high lane), sign-extended to words.
	a.l("VBROADCASTI128 192(SI), Y1")
	a.l("VMOVDQU k6Shuf<>(SB), Y3")
	a.l("VMOVDQU twos<>(SB), Y4")
	for k := 0; k < 8; k++ {
		if k > 0 {
			a.l("VPADDB Y4, Y3, Y3")
		}
		a.l("VPSHUFB Y3, Y1, Y0")
		a.l("VPSRAW $8, Y0, Y0")
		a.l("VMOVDQU Y0, %d(R13)", 256+32*k)
	}
	// The -32 offset through the bsums: scale i against bsum i.
	a.l("VPMOVSXBW 192(SI), Y0")
	a.l("VMOVDQU Y0, 512(R13)")
	a.l("VPBROADCASTW 208(SI), X6")
	a.l("VCVTPH2PS X6, Y6")
}

// kquantAVX2 emits dotQ4_KQ8_KAVX2 and dotQ6_KQ8_KAVX2.
func (a *asm) kquantAVX2() {
	a.textX86("dotQ4_KQ8_KAVX2", dotSigX86, "0", "$576-48")
	a.dotLoop("q4k", 144, 292, true, a.q4kAVX2, func(acc int) {
		a.sumk()
		a.vq4tail(acc, "512(R13)")
	})
	a.textX86("dotQ6_KQ8_KAVX2", dotSigX86, "0", "$576-48")
	a.dotLoop("q6k", 210, 292, true, a.q6kAVX2, func(acc int) {
		a.sumk()
		a.vq6tail(acc, "512(R13)")
	})
}
