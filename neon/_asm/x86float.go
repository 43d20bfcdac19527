package main

import "fmt"

// The avx2 set's float kernels (float_amd64.s): F32/F16 row dots with up
// to two columns and the per-token vector work.

const floatDoc = `AVX2+FMA+F16C float kernels: F32/F16 row dots with up to two columns,
and the per-token vector work. Lengths are in 8-element chunks; the Go
wrappers in dot_amd64.go do the tails.`

const floatDotDoc = `The row dots take at most two columns per call (the wrappers loop), each
with four accumulators: 8-element chunk i goes to accumulator i%4 and the
four are combined as (acc0+acc1)+(acc2+acc3) before the horizontal sum,
the same for every column whatever n is. Column 0 (DX) uses Y8..Y11,
column 1 (R9) Y12..Y15; with n == 1, R9 aliases column 0 and its sums
are not stored.`

// floatDot emits dotF32AVX2 (f16 false) or dotF16AVX2.
func (a *asm) floatDot(f16 bool) {
	name, size, p := "dotF32AVX2", 32, "f32"
	if f16 {
		name, size, p = "dotF16AVX2", 16, "f16"
	}
	a.textX86(name, "(out *float32, w, a *byte, aStride, n8, n int)", "NOSPLIT", "$0-48")
	a.l("MOVQ out+0(FP), DI")
	a.l("MOVQ w+8(FP), SI")
	a.l("MOVQ a+16(FP), DX")
	a.l("MOVQ aStride+24(FP), R8")
	a.l("MOVQ n8+32(FP), CX")
	a.l("MOVQ n+40(FP), BX")
	a.l("LEAQ (DX)(R8*1), R9")
	a.l("CMPQ BX, $1")
	a.l("CMOVQEQ DX, R9")
	a.zero8()
	// Chunk k of the current step into accumulators Y8+k (column 0) and
	// Y12+k (column 1).
	chunk := func(k int) {
		c0, c1 := y(8+k), y(12+k)
		if f16 {
			a.l("VCVTPH2PS %d(SI), Y0", 16*k)
			a.l("VCVTPH2PS %d(DX), Y1", 16*k)
			a.l("VFMADD231PS Y1, Y0, %s", c0)
			a.l("VCVTPH2PS %d(R9), Y2", 16*k)
			a.l("VFMADD231PS Y2, Y0, %s", c1)
			return
		}
		a.l("VMOVUPS %d(SI), Y0", 32*k)
		a.l("VFMADD231PS %d(DX), Y0, %s", 32*k, c0)
		a.l("VFMADD231PS %d(R9), Y0, %s", 32*k, c1)
	}
	a.l("CMPQ CX, $4")
	a.l("JLT %stail", p)
	a.label(p+"loop", false)
	for k := 0; k < 4; k++ {
		chunk(k)
	}
	for _, r := range []string{"SI", "DX", "R9"} {
		a.l("ADDQ $%d, %s", 4*size, r)
	}
	a.l("SUBQ $4, CX")
	a.l("CMPQ CX, $4")
	a.l("JGE %sloop", p)
	a.label(p+"tail", false)
	a.l("TESTQ CX, CX")
	a.l("JZ %sdone", p)
	for k := 0; k < 3; k++ {
		if k > 0 {
			a.l("CMPQ CX, $%d", k)
			a.l("JEQ %sdone", p)
		}
		chunk(k)
	}
	a.label(p+"done", false)
	// (acc0+acc1)+(acc2+acc3), reduced in hsum_float_8 order.
	for c := 0; c < 2; c++ {
		if c == 1 {
			a.l("CMPQ BX, $1")
			a.l("JEQ %sret", p)
		}
		b := 8 + 4*c
		a.l("VADDPS %s, %s, %s", y(b+1), y(b), y(b))
		a.l("VADDPS %s, %s, %s", y(b+3), y(b+2), y(b+2))
		a.l("VADDPS %s, %s, %s", y(b+2), y(b), y(b))
		a.hsum(b, 4*c)
	}
	a.label(p+"ret", false)
	a.l("VZEROUPPER")
	a.l("RET")
}

// f16Dot emits the loop of a dot of the float32 vector at SI with the F16
// one at DX (CX chunks): even chunks into Y8, odd into Y9 (FMA), their
// sum reduced in hsum_float_8 order into X0 (labels prefix...). With
// stepTail the tail chunk advances DX.
func (a *asm) f16Dot(p string, stepTail bool) {
	a.l("VXORPS Y8, Y8, Y8")
	a.l("VXORPS Y9, Y9, Y9")
	a.l("CMPQ CX, $2")
	a.l("JLT %stail", p)
	a.label(p+"loop", true)
	a.l("VCVTPH2PS (DX), Y0")
	a.l("VCVTPH2PS 16(DX), Y1")
	a.l("VFMADD231PS (SI), Y0, Y8")
	a.l("VFMADD231PS 32(SI), Y1, Y9")
	a.l("ADDQ $64, SI")
	a.l("ADDQ $32, DX")
	a.l("SUBQ $2, CX")
	a.l("CMPQ CX, $2")
	a.l("JGE %sloop", p)
	a.b.WriteString("\n")
	a.label(p+"tail", false)
	a.l("TESTQ CX, CX")
	a.l("JZ %ssum", p)
	a.l("VCVTPH2PS (DX), Y0")
	a.l("VFMADD231PS (SI), Y0, Y8")
	if stepTail {
		a.l("ADDQ $16, DX")
	}
	a.b.WriteString("\n")
	a.label(p+"sum", false)
	a.l("VADDPS Y9, Y8, Y8")
	a.hsum0(8)
}

func (a *asm) dotF32F16X86() {
	a.textX86("dotF32F16AVX2", "(a *float32, b *uint16, n8 int) float32", "NOSPLIT", "$0-28",
		"Two accumulators: chunk i goes to Y(i%2); their sum is reduced in\nhsum_float_8 order.")
	a.l("MOVQ a+0(FP), SI")
	a.l("MOVQ b+8(FP), DX")
	a.l("MOVQ n8+16(FP), CX")
	a.f16Dot("dfh", false)
	a.l("VMOVSS X0, ret+24(FP)")
	a.l("VZEROUPPER")
	a.l("RET")
}

func (a *asm) attnScores() {
	a.textX86("attnScoresAVX2", "(sc *float32, q *float32, k *uint16, n8, rows int, scale float32)", "NOSPLIT", "$0-44",
		"sc[t] = dot(q, k row t) * scale for t < rows (rows n8*8 values apart):\neach dot exactly as dotF32F16AVX2 computes it (even chunks into Y8, odd\ninto Y9, FMA, the same horizontal sum), so the scores equal the one-row\nkernel's bit for bit.")
	a.l("MOVQ sc+0(FP), DI")
	a.l("MOVQ k+16(FP), DX")
	a.l("MOVQ rows+32(FP), BX")
	a.l("VBROADCASTSS scale+40(FP), Y7")
	a.l("TESTQ BX, BX")
	a.l("JZ asdone")
	a.b.WriteString("\n")
	a.label("asrow", false)
	a.l("MOVQ q+8(FP), SI")
	a.l("MOVQ n8+24(FP), CX")
	a.f16Dot("as", true)
	a.l("VMULSS X7, X0, X0")
	a.l("VMOVSS X0, (DI)")
	a.l("ADDQ $4, DI")
	a.l("DECQ BX")
	a.l("JNZ asrow")
	a.b.WriteString("\n")
	a.label("asdone", false)
	a.l("VZEROUPPER")
	a.l("RET")
}

func (a *asm) axpyF16X86() {
	a.textX86("axpyF16AVX2", "(out *float32, alpha float32, b *uint16, n8 int)", "NOSPLIT", "$0-32",
		"out[i] += alpha*b[i], the product rounded before the addition (no FMA),\nso the result equals the generic code bit for bit.")
	a.l("MOVQ out+0(FP), DI")
	a.l("VBROADCASTSS alpha+8(FP), Y7")
	a.l("MOVQ b+16(FP), DX")
	a.l("MOVQ n8+24(FP), CX")
	a.l("TESTQ CX, CX")
	a.l("JZ axdone")
	a.label("axloop", true)
	a.l("VCVTPH2PS (DX), Y0")
	a.l("VMULPS Y7, Y0, Y0")
	a.l("VADDPS (DI), Y0, Y0")
	a.l("VMOVUPS Y0, (DI)")
	a.l("ADDQ $32, DI")
	a.l("ADDQ $16, DX")
	a.l("DECQ CX")
	a.l("JNZ axloop")
	a.b.WriteString("\n")
	a.label("axdone", false)
	a.l("VZEROUPPER")
	a.l("RET")
}

func (a *asm) sumSquaresX86() {
	a.textX86("sumSquaresAVX2", "(x *float32, n8 int) float64", "NOSPLIT", "$0-24",
		"Each square rounded to float32 (as the generic code), widened to float64\nand summed in four 4-lane float64 accumulators (the low and high halves\nof even and odd chunks), reduced in a fixed order.")
	a.l("MOVQ x+0(FP), SI")
	a.l("MOVQ n8+8(FP), CX")
	for i := 8; i < 12; i++ {
		a.l("VXORPD %s, %s, %s", y(i), y(i), y(i))
	}
	a.l("CMPQ CX, $2")
	a.l("JLT sstail")
	// square loads chunk k's squares, widened, into Y(t), Y(t+1) and adds
	// them to Y(acc), Y(acc+1).
	square := func(v, t int) {
		a.l("VMULPS %s, %s, %s", y(v), y(v), y(v))
		a.l("VCVTPS2PD X%d, %s", v, y(t))
		a.l("VEXTRACTF128 $1, %s, X%d", y(v), t+1)
		a.l("VCVTPS2PD X%d, %s", t+1, y(t+1))
	}
	a.label("ssloop", true)
	a.l("VMOVUPS (SI), Y0")
	a.l("VMOVUPS 32(SI), Y3")
	a.l("VMULPS Y0, Y0, Y0")
	a.l("VMULPS Y3, Y3, Y3")
	a.l("VCVTPS2PD X0, Y1")
	a.l("VEXTRACTF128 $1, Y0, X2")
	a.l("VCVTPS2PD X2, Y2")
	a.l("VCVTPS2PD X3, Y4")
	a.l("VEXTRACTF128 $1, Y3, X5")
	a.l("VCVTPS2PD X5, Y5")
	a.l("VADDPD Y1, Y8, Y8")
	a.l("VADDPD Y2, Y9, Y9")
	a.l("VADDPD Y4, Y10, Y10")
	a.l("VADDPD Y5, Y11, Y11")
	a.l("ADDQ $64, SI")
	a.l("SUBQ $2, CX")
	a.l("CMPQ CX, $2")
	a.l("JGE ssloop")
	a.b.WriteString("\n")
	a.label("sstail", false)
	a.l("TESTQ CX, CX")
	a.l("JZ ssdone")
	a.l("VMOVUPS (SI), Y0")
	square(0, 1)
	a.l("VADDPD Y1, Y8, Y8")
	a.l("VADDPD Y2, Y9, Y9")
	a.b.WriteString("\n")
	a.label("ssdone", false)
	a.l("VADDPD Y10, Y8, Y8")
	a.l("VADDPD Y11, Y9, Y9")
	a.l("VADDPD Y9, Y8, Y8")
	a.l("VEXTRACTF128 $1, Y8, X0")
	a.l("VADDPD X8, X0, X0")
	a.l("VUNPCKHPD X0, X0, X1")
	a.l("VADDSD X1, X0, X0")
	a.l("VMOVSD X0, ret+16(FP)")
	a.l("VZEROUPPER")
	a.l("RET")
}

func (a *asm) attnSum() {
	a.textX86("attnSumAVX2", "(out *float32, w *float32, v *uint16, n8, rows int)", "NOSPLIT", "$0-40",
		"out[i] += w[t]*v[t][i] for t = 0..rows-1 in order, each product rounded\nbefore its addition (as axpyF16AVX2, once per row): four chunks of out\nin Y8..Y11 through all rows, then the next four.")
	a.l("MOVQ out+0(FP), DI")
	a.l("MOVQ v+16(FP), DX")
	a.l("MOVQ n8+24(FP), CX")
	a.l("MOVQ n8+24(FP), R10")
	a.l("SHLQ $4, R10 // bytes per v row")
	a.l("TESTQ CX, CX")
	a.l("JZ sudone")
	a.b.WriteString("\n")
	a.label("suchunks", false)
	a.l("MOVQ $4, R11")
	a.l("CMPQ CX, R11")
	a.l("CMOVQLT CX, R11")
	a.l("VMOVUPS (DI), Y8")
	a.l("CMPQ R11, $2")
	a.l("JLT su1")
	a.l("VMOVUPS 32(DI), Y9")
	a.l("JEQ su2")
	a.l("VMOVUPS 64(DI), Y10")
	a.l("CMPQ R11, $3")
	a.l("JEQ su3")
	a.l("VMOVUPS 96(DI), Y11")
	// The rows for c = 4, 3, 2, 1 chunks.
	for c := 4; c >= 1; c-- {
		if c < 4 {
			a.b.WriteString("\n")
			a.label(fmt.Sprintf("su%d", c), false)
		}
		a.l("MOVQ w+8(FP), SI")
		a.l("MOVQ rows+32(FP), BX")
		a.l("MOVQ DX, R9")
		a.label(fmt.Sprintf("su%dloop", c), c == 4)
		a.l("VBROADCASTSS (SI), Y7")
		for k := 0; k < c; k++ {
			if k == 0 {
				a.l("VCVTPH2PS (R9), Y0")
			} else {
				a.l("VCVTPH2PS %d(R9), %s", 16*k, y(k))
			}
		}
		for k := 0; k < c; k++ {
			a.l("VMULPS Y7, %s, %s", y(k), y(k))
		}
		for k := 0; k < c; k++ {
			a.l("VADDPS %s, %s, %s", y(k), y(8+k), y(8+k))
		}
		a.l("ADDQ $4, SI")
		a.l("ADDQ R10, R9")
		a.l("DECQ BX")
		a.l("JNZ su%dloop", c)
		for k := 0; k < c; k++ {
			if k == 0 {
				a.l("VMOVUPS Y8, (DI)")
			} else {
				a.l("VMOVUPS %s, %d(DI)", y(8+k), 32*k)
			}
		}
		if c > 1 {
			a.l("JMP sunext")
		}
	}
	a.b.WriteString("\n")
	a.label("sunext", false)
	a.l("MOVQ R11, AX")
	a.l("SHLQ $5, AX")
	a.l("ADDQ AX, DI")
	a.l("SHRQ $1, AX")
	a.l("ADDQ AX, DX")
	a.l("SUBQ R11, CX")
	a.l("JNZ suchunks")
	a.b.WriteString("\n")
	a.label("sudone", false)
	a.l("VZEROUPPER")
	a.l("RET")
}

// expConst loads the constants of expf (Y8..Y13, Y15).
func (a *asm) expConst() {
	for i, off := range []int{0, 4, 8, 12, 16, 44} {
		a.l("VBROADCASTSS silo<>+%d(SB), %s", off, y(8+i))
	}
	a.l("VPBROADCASTD silo<>+52(SB), Y15")
}

// expf sets Y5 = expf(Y1) exactly as expf (silu.go) computes it: 0 below
// the range (and for NaN), the clamp, the rounding to nearest even, every
// product rounded before its addition, 2^n built in the exponent field
// (Y8..Y13, Y15 the constants expConst loads; Y1..Y7 clobbered).
func (a *asm) expf() {
	a.l("VCMPPS $0x1d, Y8, Y1, Y7")
	a.l("VMAXPS Y8, Y1, Y1")
	a.l("VMINPS Y9, Y1, Y1")
	a.l("VMULPS Y10, Y1, Y2")
	a.l("VROUNDPS $0, Y2, Y2")
	a.l("VMULPS Y11, Y2, Y3")
	a.l("VSUBPS Y3, Y1, Y1")
	a.l("VMULPS Y12, Y2, Y3")
	a.l("VSUBPS Y3, Y1, Y1")
	a.l("VMULPS Y1, Y1, Y4")
	// The polynomial P0..P5 by Horner's rule.
	a.l("VBROADCASTSS silo<>+20(SB), Y5")
	for off := 24; off <= 40; off += 4 {
		a.l("VMULPS Y1, Y5, Y5")
		a.l("VBROADCASTSS silo<>+%d(SB), Y6", off)
		a.l("VADDPS Y6, Y5, Y5")
	}
	a.l("VMULPS Y4, Y5, Y5")
	a.l("VADDPS Y1, Y5, Y5")
	a.l("VADDPS Y13, Y5, Y5")
	a.l("VCVTPS2DQ Y2, Y2")
	a.l("VPADDD Y15, Y2, Y2")
	a.l("VPSLLD $23, Y2, Y2")
	a.l("VMULPS Y2, Y5, Y5")
	a.l("VANDPS Y7, Y5, Y5")
}

// expLoop emits a loop over n8 chunks at DI (CX) with the exp constants
// loaded: body per chunk, labels prefix..., pre before the constants.
func (a *asm) expLoop(p string, pre func(), body func()) {
	a.l("TESTQ CX, CX")
	a.l("JZ %sdone", p)
	a.expConst()
	if pre != nil {
		pre()
	}
	a.label(p+"loop", true)
	body()
}

func (a *asm) expKernels() {
	a.textX86("siluMulAVX2", "(gate, up *float32, n8 int)", "NOSPLIT", "$0-24",
		"gate = silu(gate) * up, 8 values at a time, exactly as siluMul\n(silu.go): expf of -gate, then an IEEE division and the product.")
	a.l("MOVQ gate+0(FP), DI")
	a.l("MOVQ up+8(FP), SI")
	a.l("MOVQ n8+16(FP), CX")
	a.expLoop("si", func() { a.l("VBROADCASTSS silo<>+48(SB), Y14 // the sign bit") }, func() {
		a.l("VMOVUPS (DI), Y0")
		a.l("VXORPS Y14, Y0, Y1")
		a.expf()
		a.l("VADDPS Y13, Y5, Y5")
		a.l("VDIVPS Y5, Y0, Y0")
		a.l("VMULPS (SI), Y0, Y0")
		a.l("VMOVUPS Y0, (DI)")
		a.l("ADDQ $32, DI")
		a.l("ADDQ $32, SI")
		a.l("DECQ CX")
		a.l("JNZ siloop")
	})
	a.b.WriteString("\n")
	a.label("sidone", false)
	a.l("VZEROUPPER")
	a.l("RET")

	a.textX86("expSubAVX2", "(x *float32, n8 int, m float32)", "NOSPLIT", "$0-20",
		"x[i] = expf(x[i] - m), 8 values at a time (softmax's exponentials).")
	a.l("MOVQ x+0(FP), DI")
	a.l("MOVQ n8+8(FP), CX")
	a.l("VBROADCASTSS m+16(FP), Y14")
	a.expLoop("ex", nil, func() {
		a.l("VMOVUPS (DI), Y1")
		a.l("VSUBPS Y14, Y1, Y1")
		a.expf()
		a.l("VMOVUPS Y5, (DI)")
		a.l("ADDQ $32, DI")
		a.l("DECQ CX")
		a.l("JNZ exloop")
	})
	a.b.WriteString("\n")
	a.label("exdone", false)
	a.l("VZEROUPPER")
	a.l("RET")

	a.textX86("expSumAVX2", "(x *float32, n8 int, m float32) (s0, s1, s2, s3 float64)", "NOSPLIT", "$0-56",
		"expSubAVX2 that also adds the exponentials up in float64: sj (from 0)\ngets x[j], x[j+4], x[j+8], ... in order, the four running sums of\nthe reference's block sum (attntile.go's sumF64).")
	a.l("MOVQ x+0(FP), DI")
	a.l("MOVQ n8+8(FP), CX")
	a.l("VBROADCASTSS m+16(FP), Y14")
	a.l("VXORPD Y0, Y0, Y0")
	a.expLoop("es", nil, func() {
		a.l("VMOVUPS (DI), Y1")
		a.l("VSUBPS Y14, Y1, Y1")
		a.expf()
		a.l("VMOVUPS Y5, (DI)")
		a.l("VCVTPS2PD X5, Y3")
		a.l("VADDPD Y3, Y0, Y0")
		a.l("VEXTRACTF128 $1, Y5, X4")
		a.l("VCVTPS2PD X4, Y4")
		a.l("VADDPD Y4, Y0, Y0")
		a.l("ADDQ $32, DI")
		a.l("DECQ CX")
		a.l("JNZ esloop")
	})
	a.b.WriteString("\n")
	a.label("esdone", false)
	a.l("LEAQ s0+24(FP), DX")
	a.l("VMOVUPD Y0, (DX)")
	a.l("VZEROUPPER")
	a.l("RET")

	a.expSumX86512()

	a.b.WriteString("\n")
	for i, c := range []struct {
		v    string
		name string
	}{{"0xc2ae0000", "expLo"}, {"0x42b00000", "expHi"}, {"0x3fb8aa3b", "log2e"}, {"0x3f318000", "expC1"},
		{"0xb95e8083", "expC2"}, {"0x39506967", "expP0"}, {"0x3ab743ce", "expP1"}, {"0x3c088908", "expP2"},
		{"0x3d2aa9c1", "expP3"}, {"0x3e2aaaaa", "expP4"}, {"0x3f000000", "expP5"}, {"0x3f800000", "1"},
		{"0x80000000", "sign bit"}, {"127", ""}} {
		line := fmt.Sprintf("DATA silo<>+%d(SB)/4, $%s", 4*i, c.v)
		if c.name != "" {
			line += " // " + c.name
		}
		a.b.WriteString(line + "\n")
	}
	a.b.WriteString("GLOBL silo<>(SB), RODATA|NOPTR, $56\n")
}

// vecKernels emits addAVX2, scaleMulAVX2 and toF16AVX2.
func (a *asm) vecKernels() {
	a.textX86("addAVX2", "(dst, src *float32, n8 int)", "NOSPLIT", "$0-24")
	a.l("MOVQ dst+0(FP), DI")
	a.l("MOVQ src+8(FP), SI")
	a.l("MOVQ n8+16(FP), CX")
	a.b.WriteString("\n")
	a.label("adloop", false)
	a.l("VMOVUPS (DI), Y0")
	a.l("VADDPS (SI), Y0, Y0")
	a.l("VMOVUPS Y0, (DI)")
	a.l("ADDQ $32, DI")
	a.l("ADDQ $32, SI")
	a.l("DECQ CX")
	a.l("JNZ adloop")
	a.l("VZEROUPPER")
	a.l("RET")

	a.textX86("scaleMulAVX2", "(out, x, w *float32, n8 int, scale float32)", "NOSPLIT", "$0-36")
	a.l("MOVQ out+0(FP), DI")
	a.l("MOVQ x+8(FP), SI")
	a.l("MOVQ w+16(FP), DX")
	a.l("MOVQ n8+24(FP), CX")
	a.l("VBROADCASTSS scale+32(FP), Y7")
	a.b.WriteString("\n")
	a.label("smloop", false)
	a.l("VMULPS (SI), Y7, Y0")
	a.l("VMULPS (DX), Y0, Y0")
	a.l("VMOVUPS Y0, (DI)")
	a.l("ADDQ $32, DI")
	a.l("ADDQ $32, SI")
	a.l("ADDQ $32, DX")
	a.l("DECQ CX")
	a.l("JNZ smloop")
	a.l("VZEROUPPER")
	a.l("RET")

	a.textX86("toF16AVX2", "(dst *uint16, src *float32, n8 int)", "NOSPLIT", "$0-24",
		"VCVTPS2PH rounding to nearest even (ggml's conversion for every number);\na NaN becomes the quiet NaN 0x7E00 with its sign, as ggml.FP32ToFP16\ngives, instead of VCVTPS2PH's payload-keeping one.")
	a.l("MOVQ dst+0(FP), DI")
	a.l("MOVQ src+8(FP), SI")
	a.l("MOVQ n8+16(FP), CX")
	a.l("VPBROADCASTD f16nan<>+0(SB), Y6 // 0x7e00 in every dword")
	a.l("VPBROADCASTD f16nan<>+4(SB), Y7 // 0x8000 in every dword")
	a.b.WriteString("\n")
	a.label("f16loop", false)
	a.l("VMOVUPS (SI), Y0")
	a.l("VCVTPS2PH $0, Y0, X1")
	a.l("VCMPPS $3, Y0, Y0, Y2 // NaN lanes")
	a.l("VPSRLD $16, Y0, Y3")
	a.l("VPAND Y7, Y3, Y3 // the sign as a half")
	a.l("VPOR Y6, Y3, Y3 // signed quiet NaN")
	a.l("VPMOVZXWD X1, Y1")
	a.l("VBLENDVPS Y2, Y3, Y1, Y1")
	a.l("VEXTRACTI128 $1, Y1, X4")
	a.l("VPACKUSDW X4, X1, X1")
	a.l("VMOVDQU X1, (DI)")
	a.l("ADDQ $16, DI")
	a.l("ADDQ $32, SI")
	a.l("DECQ CX")
	a.l("JNZ f16loop")
	a.l("VZEROUPPER")
	a.l("RET")
	a.b.WriteString("\nDATA f16nan<>+0(SB)/4, $0x7e00\nDATA f16nan<>+4(SB)/4, $0x8000\nGLOBL f16nan<>(SB), RODATA|NOPTR, $8\n")
}

// genFloat writes float_amd64.s.
func genFloat(a *asm) {
	a.b.WriteString("\n")
	a.doc(floatDoc)
	a.b.WriteString("\n")
	a.doc(floatDotDoc)
	a.floatDot(false)
	a.floatDot(true)
	a.dotF32F16X86()
	a.axpyF16X86()
	a.sumSquaresX86()
	a.attnScores()
	a.attnSum()
	a.expKernels()
	a.vecKernels()
}

// expfRegs returns the lines of expf on registers of width w: out =
// expf(x) as expf (above) computes it, lane by lane with the same
// operations (the clamp, VRNDSCALEPS $0 rounding to nearest even as
// VROUNDPS $0 does, every product rounded before its addition), the
// lanes below the range (or NaN) zeroed through mask k; n, t, z
// temporaries (x clobbered). The constants are in V16..V28 (expSumX86512).
func expfRegs(w, x, n, t, zz, out int, k string) []string {
	r := func(i int) string { return vreg(w, i) }
	l := []string{
		fmt.Sprintf("VCMPPS $0x1d, %s, %s, %s", r(16), r(x), k),
		fmt.Sprintf("VMAXPS %s, %s, %s", r(16), r(x), r(x)),
		fmt.Sprintf("VMINPS %s, %s, %s", r(17), r(x), r(x)),
		fmt.Sprintf("VMULPS %s, %s, %s", r(18), r(x), r(n)),
		fmt.Sprintf("VRNDSCALEPS $0, %s, %s", r(n), r(n)),
		fmt.Sprintf("VMULPS %s, %s, %s", r(19), r(n), r(t)),
		fmt.Sprintf("VSUBPS %s, %s, %s", r(t), r(x), r(x)),
		fmt.Sprintf("VMULPS %s, %s, %s", r(20), r(n), r(t)),
		fmt.Sprintf("VSUBPS %s, %s, %s", r(t), r(x), r(x)),
		fmt.Sprintf("VMULPS %s, %s, %s", r(x), r(x), r(zz)),
		fmt.Sprintf("VMULPS %s, %s, %s", r(x), r(23), r(out)),
	}
	for p := 24; p <= 28; p++ {
		l = append(l, fmt.Sprintf("VADDPS %s, %s, %s", r(p), r(out), r(out)))
		if p < 28 {
			l = append(l, fmt.Sprintf("VMULPS %s, %s, %s", r(x), r(out), r(out)))
		}
	}
	return append(l,
		fmt.Sprintf("VMULPS %s, %s, %s", r(zz), r(out), r(out)),
		fmt.Sprintf("VADDPS %s, %s, %s", r(x), r(out), r(out)),
		fmt.Sprintf("VADDPS %s, %s, %s", r(21), r(out), r(out)),
		fmt.Sprintf("VCVTPS2DQ %s, %s", r(n), r(n)),
		fmt.Sprintf("VPADDD %s, %s, %s", r(22), r(n), r(n)),
		fmt.Sprintf("VPSLLD $23, %s, %s", r(n), r(n)),
		fmt.Sprintf("VMULPS.Z %s, %s, %s, %s", r(n), r(out), k, r(out)))
}

// expSumX86512 emits expSumAVX512: expSumAVX2 on 512-bit registers, two
// chunks of 16 values interleaved (their exponentials are independent),
// then a chunk of 16 and one of 8 as the count needs; the float64 sums
// get the values four at a time in index order, as there (the same bits).
func (a *asm) expSumX86512() {
	a.textX86("expSumAVX512", "(x *float32, n8 int, m float32) (s0, s1, s2, s3 float64)", "NOSPLIT", "$0-56",
		"expSumAVX2 on 512-bit registers, two chunks of 16 values at a time\n(the same operations per lane, the sums in the same order: the same bits).")
	a.l("MOVQ x+0(FP), DI")
	a.l("MOVQ n8+8(FP), CX")
	a.l("VXORPD Y0, Y0, Y0")
	a.l("TESTQ CX, CX")
	a.l("JZ e5done")
	for i, off := range []int{0, 4, 8, 12, 16, 44} {
		a.l("VBROADCASTSS silo<>+%d(SB), %s", off, z(16+i))
	}
	a.l("VPBROADCASTD silo<>+52(SB), Z22")
	for i := 0; i < 6; i++ {
		a.l("VBROADCASTSS silo<>+%d(SB), %s", 20+4*i, z(23+i))
	}
	a.l("VBROADCASTSS m+16(FP), Z29")
	// sum adds the 16 float32 values of register v (temporaries t, u) to
	// the four running sums in Y0, four at a time in order.
	sum := func(v, t, u int) {
		a.l("VCVTPS2PD %s, %s", y(v), z(t))
		a.l("VEXTRACTF64X4 $1, %s, %s", z(v), y(u))
		a.l("VADDPD %s, Y0, Y0", y(t))
		a.l("VEXTRACTF64X4 $1, %s, %s", z(t), y(t))
		a.l("VADDPD %s, Y0, Y0", y(t))
		a.l("VCVTPS2PD %s, %s", y(u), z(u))
		a.l("VADDPD %s, Y0, Y0", y(u))
		a.l("VEXTRACTF64X4 $1, %s, %s", z(u), y(u))
		a.l("VADDPD %s, Y0, Y0", y(u))
	}
	a.l("CMPQ CX, $4")
	a.l("JLT e5one")
	a.label("e5two", true)
	a.l("VMOVUPS (DI), Z1")
	a.l("VMOVUPS 64(DI), Z8")
	a.l("VSUBPS Z29, Z1, Z1")
	a.l("VSUBPS Z29, Z8, Z8")
	ea, eb := expfRegs(512, 1, 2, 3, 4, 5, "K1"), expfRegs(512, 8, 9, 10, 11, 12, "K2")
	for i := range ea {
		a.l("%s", ea[i])
		a.l("%s", eb[i])
	}
	a.l("VMOVUPS Z5, (DI)")
	a.l("VMOVUPS Z12, 64(DI)")
	sum(5, 6, 7)
	sum(12, 13, 14)
	a.l("ADDQ $128, DI")
	a.l("SUBQ $4, CX")
	a.l("CMPQ CX, $4")
	a.l("JGE e5two")
	a.b.WriteString("\n")
	a.label("e5one", false)
	a.l("CMPQ CX, $2")
	a.l("JLT e5eight")
	a.l("VMOVUPS (DI), Z1")
	a.l("VSUBPS Z29, Z1, Z1")
	for _, l := range expfRegs(512, 1, 2, 3, 4, 5, "K1") {
		a.l("%s", l)
	}
	a.l("VMOVUPS Z5, (DI)")
	sum(5, 6, 7)
	a.l("ADDQ $64, DI")
	a.l("SUBQ $2, CX")
	a.b.WriteString("\n")
	a.label("e5eight", false)
	a.l("TESTQ CX, CX")
	a.l("JZ e5done")
	a.l("VMOVUPS (DI), Y1")
	a.l("VSUBPS Y29, Y1, Y1")
	for _, l := range expfRegs(256, 1, 2, 3, 4, 5, "K1") {
		a.l("%s", l)
	}
	a.l("VMOVUPS Y5, (DI)")
	a.l("VCVTPS2PD X5, Y3")
	a.l("VADDPD Y3, Y0, Y0")
	a.l("VEXTRACTF128 $1, Y5, X4")
	a.l("VCVTPS2PD X4, Y4")
	a.l("VADDPD Y4, Y0, Y0")
	a.b.WriteString("\n")
	a.label("e5done", false)
	a.l("LEAQ s0+24(FP), DX")
	a.l("VMOVUPD Y0, (DX)")
	a.l("VZEROUPPER")
	a.l("RET")
}
