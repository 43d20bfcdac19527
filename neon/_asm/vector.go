package main

// vector emits the kernels that need only ARMv8.0 ASIMD, shared by both
// tiers: activation quantization, float dots, RMS sums, attention helpers.
func (a *asm) vector() {
	a.quantQ8_0()
	a.quantQ8_K()
	a.dotF32F16()
	a.axpyF16()
	a.sumSquares()
	a.dotF32()
	a.dotF16()
	a.deltaRow()
	a.ssmStep()
	a.ssmDecay()
}

// ssmStep is one Mamba-2 head's scan step with outputs
// (neon.Kernels.SSMStep) for an even number of rows of n (a multiple of 8,
// > 0) values, two rows at a time: v = src·dA + B·(x·dt) with every product
// rounded (FMUL, then FADD: no FMLA, the generic bits), stored, and acc +=
// v·C in two 4-lane accumulators per row (lanes k mod 8); y = ((l0+l4) +
// (l1+l5)) + ((l2+l6)+(l3+l7)) (FADD of the halves, then pairwise).
func (a *asm) ssmStep() {
	a.text("ssmStepNEON", "func ssmStepNEON(dst, src, x, bv, cv, y *float32, rows, n int, dt, dA float32)", "$0-72")
	a.l("MOVD dst+0(FP), R0")
	a.l("MOVD src+8(FP), R1")
	a.l("MOVD x+16(FP), R2")
	a.l("MOVD bv+24(FP), R3")
	a.l("MOVD cv+32(FP), R4")
	a.l("MOVD y+40(FP), R5")
	a.l("MOVD rows+48(FP), R6")
	a.l("MOVD n+56(FP), R7")
	a.l("LSL $2, R7, R8") // a row's bytes
	a.l("FMOVS dt+64(FP), F28")
	a.l("FMOVS dA+68(FP), F31")
	a.l("rows2:")
	a.l("FMOVS (R2), F29")
	a.l("FMULS F28, F29, F29") // x[p]·dt
	a.l("FMOVS 4(R2), F30")
	a.l("FMULS F28, F30, F30") // x[p+1]·dt
	for k := 16; k < 20; k++ {
		a.l("VEOR V%d.B16, V%d.B16, V%d.B16", k, k, k)
	}
	a.l("ADD R8, R1, R9")  // src row p+1
	a.l("ADD R8, R0, R10") // dst row p+1
	a.l("MOVD R3, R11")
	a.l("MOVD R4, R12")
	a.l("MOVD R7, R13")
	a.l("PCALIGN $16")
	a.l("k8:")
	a.l("VLD1.P 32(R11), [V0.S4, V1.S4]") // B
	a.l("VLD1.P 32(R12), [V2.S4, V3.S4]") // C
	a.l("VLD1.P 32(R1), [V4.S4, V5.S4]")  // src row p
	a.l("VLD1.P 32(R9), [V6.S4, V7.S4]")  // src row p+1
	for r, row := range [2]struct{ s, t, x, acc int }{{4, 8, 29, 16}, {6, 10, 30, 18}} {
		for h := 0; h < 2; h++ {
			a.i(fmulElem(row.s+h, row.s+h, 31, 0))
			a.i(fmulElem(row.t+h, h, row.x, 0))
			a.i(fadd4s(row.s+h, row.s+h, row.t+h))
		}
		dst := []string{"R0", "R10"}[r]
		a.l("VST1.P [V%d.S4, V%d.S4], 32(%s)", row.s, row.s+1, dst)
		for h := 0; h < 2; h++ {
			a.i(fmul4s(row.t+h, row.s+h, 2+h))
			a.i(fadd4s(row.acc+h, row.acc+h, row.t+h))
		}
	}
	a.l("SUBS $8, R13")
	a.l("BNE k8")
	for _, acc := range []int{16, 18} {
		a.i(fadd4s(acc, acc, acc+1))
		a.i(faddp4s(acc, acc, acc))
		a.i(faddpS(acc, acc))
	}
	a.l("FMOVS F16, (R5)")
	a.l("FMOVS F18, 4(R5)")
	// R1 and R0 now point at row p+1; rows p+2 start where R9 and R10 are.
	a.l("MOVD R9, R1")
	a.l("MOVD R10, R0")
	a.l("ADD $8, R2")
	a.l("ADD $8, R5")
	a.l("SUBS $2, R6")
	a.l("BNE rows2")
	a.l("RET")
}

// ssmDecay is SSMStep without outputs (a replay) for rows > 0 of n (a
// multiple of 8, > 0) values: dst = src·dA + B·(x·dt), each product
// rounded.
func (a *asm) ssmDecay() {
	a.text("ssmDecayNEON", "func ssmDecayNEON(dst, src, x, bv *float32, rows, n int, dt, dA float32)", "$0-56")
	a.l("MOVD dst+0(FP), R0")
	a.l("MOVD src+8(FP), R1")
	a.l("MOVD x+16(FP), R2")
	a.l("MOVD bv+24(FP), R3")
	a.l("MOVD rows+32(FP), R6")
	a.l("MOVD n+40(FP), R7")
	a.l("FMOVS dt+48(FP), F28")
	a.l("FMOVS dA+52(FP), F31")
	a.l("row:")
	a.l("FMOVS.P 4(R2), F29")
	a.l("FMULS F28, F29, F29")
	a.l("MOVD R3, R11")
	a.l("MOVD R7, R13")
	a.l("PCALIGN $16")
	a.l("d8:")
	a.l("VLD1.P 32(R11), [V0.S4, V1.S4]")
	a.l("VLD1.P 32(R1), [V4.S4, V5.S4]")
	for h := 0; h < 2; h++ {
		a.i(fmulElem(4+h, 4+h, 31, 0))
		a.i(fmulElem(8+h, h, 29, 0))
		a.i(fadd4s(4+h, 4+h, 8+h))
	}
	a.l("VST1.P [V4.S4, V5.S4], 32(R0)")
	a.l("SUBS $8, R13")
	a.l("BNE d8")
	a.l("SUBS $1, R6")
	a.l("BNE row")
	a.l("RET")
}

// deltaRow is one row of the gated delta rule (neon.Kernels.DeltaRow) for
// n (a multiple of 16, > 0) values: S = decay·R (FMUL by the element)
// while kv = S·k is summed in four FMLA accumulators, delta = (v-kv)·beta,
// then S += delta·k (FMLA) while S·q is summed the same way; the
// accumulators are reduced as dotF32's.
func (a *asm) deltaRow() {
	a.text("deltaRowNEON", "func deltaRowNEON(S, R, q, k *float32, n int, v, beta, decay float32) float32", "$0-60")
	a.l("MOVD S+0(FP), R0")
	a.l("MOVD R+8(FP), R1")
	a.l("MOVD q+16(FP), R2")
	a.l("MOVD k+24(FP), R3")
	a.l("MOVD n+32(FP), R4")
	a.l("FMOVS decay+48(FP), F31")
	a.l("MOVD R0, R5")
	a.l("MOVD R3, R6")
	a.l("MOVD R4, R7")
	for k := 16; k < 20; k++ {
		a.l("VEOR V%d.B16, V%d.B16, V%d.B16", k, k, k)
	}
	a.l("PCALIGN $16")
	a.l("decay:")
	a.l("VLD1.P 64(R1), [V0.S4, V1.S4, V2.S4, V3.S4]")
	for k := 0; k < 4; k++ {
		a.i(fmulElem(k, k, 31, 0))
	}
	a.l("VST1.P [V0.S4, V1.S4, V2.S4, V3.S4], 64(R0)")
	a.l("VLD1.P 64(R3), [V4.S4, V5.S4, V6.S4, V7.S4]")
	for k := 0; k < 4; k++ {
		a.i(fmla4s(16+k, k, 4+k))
	}
	a.l("SUBS $16, R4")
	a.l("BNE decay")
	a.reduce4S(16)
	a.l("FMOVS v+40(FP), F20")
	a.l("FSUBS F16, F20, F20")
	a.l("FMOVS beta+44(FP), F21")
	a.l("FMULS F21, F20, F20")
	a.l("VDUP V20.S[0], V30.S4")
	for k := 16; k < 20; k++ {
		a.l("VEOR V%d.B16, V%d.B16, V%d.B16", k, k, k)
	}
	a.l("PCALIGN $16")
	a.l("update:")
	a.l("VLD1 (R5), [V0.S4, V1.S4, V2.S4, V3.S4]")
	a.l("VLD1.P 64(R6), [V4.S4, V5.S4, V6.S4, V7.S4]")
	for k := 0; k < 4; k++ {
		a.i(fmla4s(k, 4+k, 30))
	}
	a.l("VST1.P [V0.S4, V1.S4, V2.S4, V3.S4], 64(R5)")
	a.l("VLD1.P 64(R2), [V8.S4, V9.S4, V10.S4, V11.S4]")
	for k := 0; k < 4; k++ {
		a.i(fmla4s(16+k, k, 8+k))
	}
	a.l("SUBS $16, R7")
	a.l("BNE update")
	a.reduce4S(16)
	a.l("FMOVS F16, ret+56(FP)")
	a.l("RET")
}

// quantQ8_0 is ggml's quantize_row_q8_0_ref exactly: d = amax/127 (stored
// as F16, round to nearest even), id = 1/d (0 when d is 0), q =
// round-half-away(x*id).
func (a *asm) quantQ8_0() {
	a.text("quantQ8_0NEON", "func quantQ8_0NEON(dst *byte, x *float32, nb int)", "$0-24")
	a.l("MOVD dst+0(FP), R0")
	a.l("MOVD x+8(FP), R1")
	a.l("MOVD nb+16(FP), R2")
	a.l("MOVW $0x42fe0000, R3") // 127.0
	a.l("FMOVS R3, F30")
	a.l("FMOVS $(1.0), F29")
	a.l("VEOR V28.B16, V28.B16, V28.B16")
	a.l("MOVW $0x7fffffff, R3")
	a.l("VDUP R3, V27.S4")
	a.l("PCALIGN $16")
	a.l("loop:")
	a.l("VLD1.P 64(R1), [V0.S4, V1.S4, V2.S4, V3.S4]")
	a.l("VLD1.P 64(R1), [V4.S4, V5.S4, V6.S4, V7.S4]")
	// |x| as integer bits (sign cleared): for finite x their integer
	// maximum is the float maximum.
	for k := 0; k < 8; k++ {
		a.l("VAND V27.B16, V%d.B16, V%d.B16", k, 8+k)
	}
	a.i(umax4s(8, 8, 9))
	a.i(umax4s(10, 10, 11))
	a.i(umax4s(12, 12, 13))
	a.i(umax4s(14, 14, 15))
	a.i(umax4s(8, 8, 10))
	a.i(umax4s(12, 12, 14))
	a.i(umax4s(8, 8, 12))
	a.i(umaxv(8, 8))
	a.l("FDIVS F30, F8, F9")  // d = amax/127
	a.l("FDIVS F9, F29, F10") // 1/d
	a.l("FCMPS $(0.0), F9")
	a.l("FCSELS EQ, F28, F10, F10") // id = d == 0 ? 0 : 1/d
	a.l("FCVTSH F9, F11")
	a.l("FMOVS F11, R4")
	a.l("MOVH R4, (R0)")
	for k := 0; k < 8; k++ {
		a.i(fmulElem(k, k, 10, 0))
		a.i(fcvtas4s(k, k))
	}
	for k := 0; k < 4; k++ {
		a.i(sqxtnH(16+k, 2*k))
		a.i(sqxtn2H(16+k, 2*k+1))
	}
	a.i(sqxtnB(20, 16))
	a.i(sqxtn2B(20, 17))
	a.i(sqxtnB(21, 18))
	a.i(sqxtn2B(21, 19))
	a.l("ADD $2, R0, R5")
	a.l("VST1 [V20.B16, V21.B16], (R5)")
	a.l("ADD $34, R0")
	a.l("SUBS $1, R2")
	a.l("BNE loop")
	a.l("RET")
}

// quantQ8_K is ggml's quantize_row_q8_K_ref exactly: max is the first
// element of largest magnitude, iscale = -127/max, q = nearest-even
// (iscale*x), d = 1/iscale, bsums the sums of 16 quants; an all-zero block
// becomes 292 zero bytes.
func (a *asm) quantQ8_K() {
	a.text("quantQ8_KNEON", "func quantQ8_KNEON(dst *byte, x *float32, nb int)", "$0-24")
	a.l("MOVD dst+0(FP), R0")
	a.l("MOVD x+8(FP), R1")
	a.l("MOVD nb+16(FP), R2")
	a.l("MOVW $0xc2fe0000, R3") // -127.0
	a.l("FMOVS R3, F30")
	a.l("FMOVS $(1.0), F29")
	a.l("MOVW $1, R3")
	a.l("VDUP R3, V31.S4")
	a.l("PCALIGN $16")
	a.l("loop:")
	// Pass 1 on the integer bits: rotl(x, 1) = |x|<<1 | sign orders by
	// magnitude, negative first on ties; with the low bit flipped,
	// positive first. Their maxima give amax and whether +amax and -amax
	// occur (for finite x).
	a.l("MOVD R1, R6")
	for g := 0; g < 16; g++ {
		a.l("VLD1.P 64(R6), [V0.S4, V1.S4, V2.S4, V3.S4]")
		for k := 0; k < 4; k++ {
			a.l("VSHL $1, V%d.S4, V%d.S4", k, 4+k)
			a.i(usra31(4+k, k))
			a.l("VEOR V31.B16, V%d.B16, V%d.B16", 4+k, 8+k)
		}
		if g == 0 {
			a.i(umax4s(16, 4, 5))
			a.i(umax4s(17, 6, 7))
			a.i(umax4s(18, 8, 9))
			a.i(umax4s(19, 10, 11))
			continue
		}
		a.i(umax4s(4, 4, 5))
		a.i(umax4s(6, 6, 7))
		a.i(umax4s(8, 8, 9))
		a.i(umax4s(10, 10, 11))
		a.i(umax4s(16, 16, 4))
		a.i(umax4s(17, 17, 6))
		a.i(umax4s(18, 18, 8))
		a.i(umax4s(19, 19, 10))
	}
	a.i(umax4s(16, 16, 17))
	a.i(umax4s(18, 18, 19))
	a.i(umaxv(16, 16))
	a.i(umaxv(18, 18))
	a.l("FMOVS F16, R8")    // negative-first key
	a.l("FMOVS F18, R9")    // positive-first key
	a.l("LSRW $1, R8, R10") // amax bits
	a.l("CBZW R10, zero")
	a.l("ANDW $1, R8, R11") // a -amax occurs
	a.l("ANDW $1, R9, R12") // a +amax occurs
	a.l("ANDW R11, R12, R13")
	a.l("CBNZW R13, tie")
	a.l("ORRW R11<<31, R10, R10") // the sign of the only one
	a.l("FMOVS R10, F17")
	a.l("B have")
	// +amax and -amax both occur: the first one wins
	a.l("tie:")
	a.l("MOVD R1, R6")
	a.l("scan:")
	a.l("MOVWU.P 4(R6), R8")
	a.l("ANDW $0x7fffffff, R8, R9")
	a.l("CMPW R9, R10")
	a.l("BNE scan")
	a.l("FMOVS R8, F17")
	a.l("have:")
	a.l("FDIVS F17, F30, F20") // iscale = -127/max
	a.l("FDIVS F20, F29, F21") // d = 1/iscale
	a.l("FMOVS F21, (R0)")
	a.l("MOVD R1, R6")
	a.l("ADD $4, R0, R7")
	for g := 0; g < 16; g++ {
		a.l("VLD1.P 64(R6), [V0.S4, V1.S4, V2.S4, V3.S4]")
		for k := 0; k < 4; k++ {
			a.i(fmulElem(k, k, 20, 0))
			a.i(fcvtns4s(k, k))
		}
		a.i(sqxtnH(4, 0))
		a.i(sqxtn2H(4, 1))
		a.i(sqxtnH(5, 2))
		a.i(sqxtn2H(5, 3))
		a.i(sqxtnB(6, 4))
		a.i(sqxtn2B(6, 5))
		a.l("VST1.P [V6.B16], 16(R7)")
		a.i(saddlv16b(7, 6))
		a.i(insH(24+g/8, g%8, 7))
	}
	a.l("VST1 [V24.H8, V25.H8], (R7)")
	a.l("B next")
	a.l("zero:")
	a.l("MOVD R0, R7")
	a.l("MOVD $73, R8")
	a.l("zl:")
	a.l("MOVW.P ZR, 4(R7)")
	a.l("SUBS $1, R8")
	a.l("BNE zl")
	a.l("next:")
	a.l("ADD $1024, R1")
	a.l("ADD $292, R0")
	a.l("SUBS $1, R2")
	a.l("BNE loop")
	a.l("RET")
}

// dotF32F16: 16 lanes of float32 FMLA over n (a multiple of 16, > 0)
// elements, lanes summed pairwise at the end.
func (a *asm) dotF32F16() {
	a.text("dotF32F16NEON", "func dotF32F16NEON(a *float32, b *uint16, n int) float32", "$0-28")
	a.l("MOVD a+0(FP), R0")
	a.l("MOVD b+8(FP), R1")
	a.l("MOVD n+16(FP), R2")
	for k := 16; k < 20; k++ {
		a.l("VEOR V%d.B16, V%d.B16, V%d.B16", k, k, k)
	}
	a.l("PCALIGN $16")
	a.l("loop:")
	a.l("VLD1.P 64(R0), [V0.S4, V1.S4, V2.S4, V3.S4]")
	a.l("VLD1.P 32(R1), [V4.H8, V5.H8]")
	a.i(fcvtl(6, 4))
	a.i(fcvtl2(7, 4))
	a.i(fcvtl(8, 5))
	a.i(fcvtl2(9, 5))
	for k := 0; k < 4; k++ {
		a.i(fmla4s(16+k, k, 6+k))
	}
	a.l("SUBS $16, R2")
	a.l("BNE loop")
	a.reduce4S(16)
	a.l("FMOVS F16, ret+24(FP)")
	a.l("RET")
}

// reduce4S sums V(r)..V(r+3) (4S each) into S(r) in a fixed order.
func (a *asm) reduce4S(r int) {
	a.i(fadd4s(r, r, r+1))
	a.i(fadd4s(r+2, r+2, r+3))
	a.i(fadd4s(r, r, r+2))
	a.i(faddp4s(r, r, r))
	a.i(faddpS(r, r))
}

// axpyF16: out[i] += float32(alpha*b[i]) for n (a multiple of 8, > 0)
// elements: the product rounded, then added, as the generic code.
func (a *asm) axpyF16() {
	a.text("axpyF16NEON", "func axpyF16NEON(out *float32, alpha float32, b *uint16, n int)", "$0-32")
	a.l("MOVD out+0(FP), R0")
	a.l("FMOVS alpha+8(FP), F31")
	a.l("MOVD b+16(FP), R1")
	a.l("MOVD n+24(FP), R2")
	a.l("PCALIGN $16")
	a.l("loop:")
	a.l("VLD1.P 16(R1), [V4.H8]")
	a.i(fcvtl(6, 4))
	a.i(fcvtl2(7, 4))
	a.i(fmulElem(6, 6, 31, 0))
	a.i(fmulElem(7, 7, 31, 0))
	a.l("VLD1 (R0), [V0.S4, V1.S4]")
	a.i(fadd4s(0, 0, 6))
	a.i(fadd4s(1, 1, 7))
	a.l("VST1.P [V0.S4, V1.S4], 32(R0)")
	a.l("SUBS $8, R2")
	a.l("BNE loop")
	a.l("RET")
}

// sumSquares: 16 float32 lanes of FMLA over n (a multiple of 16, > 0)
// elements, the lanes summed in a fixed order and widened to float64.
func (a *asm) sumSquares() {
	a.text("sumSquaresNEON", "func sumSquaresNEON(x *float32, n int) float64", "$0-24")
	a.l("MOVD x+0(FP), R0")
	a.l("MOVD n+8(FP), R2")
	for k := 16; k < 20; k++ {
		a.l("VEOR V%d.B16, V%d.B16, V%d.B16", k, k, k)
	}
	a.l("PCALIGN $16")
	a.l("loop:")
	a.l("VLD1.P 64(R0), [V0.S4, V1.S4, V2.S4, V3.S4]")
	for k := 0; k < 4; k++ {
		a.i(fmla4s(16+k, k, k))
	}
	a.l("SUBS $16, R2")
	a.l("BNE loop")
	a.reduce4S(16)
	a.l("FCVTSD F16, F16")
	a.l("FMOVD F16, ret+16(FP)")
	a.l("RET")
}

// dotF32: 16 lanes of FMLA over n (a multiple of 16, > 0) elements.
func (a *asm) dotF32() {
	a.text("dotF32NEON", "func dotF32NEON(w, a *float32, n int) float32", "$0-28")
	a.l("MOVD w+0(FP), R0")
	a.l("MOVD a+8(FP), R1")
	a.l("MOVD n+16(FP), R2")
	for k := 16; k < 20; k++ {
		a.l("VEOR V%d.B16, V%d.B16, V%d.B16", k, k, k)
	}
	a.l("PCALIGN $16")
	a.l("loop:")
	a.l("VLD1.P 64(R0), [V0.S4, V1.S4, V2.S4, V3.S4]")
	a.l("VLD1.P 64(R1), [V4.S4, V5.S4, V6.S4, V7.S4]")
	for k := 0; k < 4; k++ {
		a.i(fmla4s(16+k, k, 4+k))
	}
	a.l("SUBS $16, R2")
	a.l("BNE loop")
	a.reduce4S(16)
	a.l("FMOVS F16, ret+24(FP)")
	a.l("RET")
}

// dotF16: both rows F16, widened to float32, 16 lanes of FMLA over n (a
// multiple of 16, > 0) elements.
func (a *asm) dotF16() {
	a.text("dotF16NEON", "func dotF16NEON(w, a *uint16, n int) float32", "$0-28")
	a.l("MOVD w+0(FP), R0")
	a.l("MOVD a+8(FP), R1")
	a.l("MOVD n+16(FP), R2")
	for k := 16; k < 20; k++ {
		a.l("VEOR V%d.B16, V%d.B16, V%d.B16", k, k, k)
	}
	a.l("PCALIGN $16")
	a.l("loop:")
	a.l("VLD1.P 32(R0), [V0.H8, V1.H8]")
	a.l("VLD1.P 32(R1), [V2.H8, V3.H8]")
	a.i(fcvtl(4, 0))
	a.i(fcvtl2(5, 0))
	a.i(fcvtl(6, 1))
	a.i(fcvtl2(7, 1))
	a.i(fcvtl(8, 2))
	a.i(fcvtl2(9, 2))
	a.i(fcvtl(10, 3))
	a.i(fcvtl2(11, 3))
	for k := 0; k < 4; k++ {
		a.i(fmla4s(16+k, 4+k, 8+k))
	}
	a.l("SUBS $16, R2")
	a.l("BNE loop")
	a.reduce4S(16)
	a.l("FMOVS F16, ret+24(FP)")
	a.l("RET")
}
