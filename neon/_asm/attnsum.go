package main

import "fmt"

// The decode tile's fused value sums (neon's AttnTileKernels.SumRowsF16 and
// SumRowsQ8_0): the weighted values summed straight from the cache, each
// value converted (F16, FCVTL: exact) or dequantized (Q8_0: d*float32(q),
// one rounded product, as DequantQ8_0) as it is loaded, then FMLA by
// element in the reference's order (one fused multiply-add per value, t in
// order). A decoding tile reads each value block once, so the float32 copy
// of the block costs a pass and 16 KiB of first-level cache for nothing.
// The four-row kernels convert each value once for the four query heads of
// a token. Each value row's lines of the next block (64 rows on) are
// prefetched as it is read: a block of a long cache spans pages, where the
// hardware's stream prefetch stops.

// prfm emits PRFM PLDL1KEEP at off(base).
func (a *asm) prfm(off int, base string) {
	a.l("PRFM %d(%s), PLDL1KEEP", off, base)
}

// attnSumF16: out[i] = fma(w[t], float32(v[t*hd+i]), out[i]), t = 0..rows-1
// in order, hd = 64*hd64: 64 outputs in V16..V31 through all rows.
func (a *asm) attnSumF16() {
	a.comment("attnSumF16NEON: out[i] = fma(w[t], float32(v[t*hd+i]), out[i]) for t =\n0..rows-1 in order (hd = 64*hd64, rows > 0), the F16 values converted as\nthey are loaded; the next block's rows prefetched.")
	a.text("attnSumF16NEON", "func attnSumF16NEON(out, w *float32, v *uint16, hd64, rows int)", "$0-40")
	a.l("MOVD out+0(FP), R0")
	a.l("MOVD v+16(FP), R2")
	a.l("MOVD hd64+24(FP), R3")
	a.l("LSL $7, R3, R5")  // bytes per v row
	a.l("SUB $64, R5, R6") // from a row's second load to the next row
	a.l("LSL $6, R5, R13") // a block of rows: the next one is prefetched
	a.l("chunk:")
	a.l("MOVD R0, R7")
	for k := 16; k < 32; k += 4 {
		a.l("VLD1.P 64(R7), [V%d.S4, V%d.S4, V%d.S4, V%d.S4]", k, k+1, k+2, k+3)
	}
	a.l("MOVD w+8(FP), R1")
	a.l("MOVD rows+32(FP), R4")
	a.l("MOVD R2, R8")
	a.l("PCALIGN $16")
	a.l("loop:")
	a.l("FMOVS.P 4(R1), F0")
	a.l("ADD R13, R8, R14")
	a.prfm(0, "R14")
	a.prfm(64, "R14")
	for h := 0; h < 2; h++ {
		if h == 0 {
			a.l("VLD1.P 64(R8), [V1.H8, V2.H8, V3.H8, V4.H8]")
		} else {
			a.l("VLD1.P (R8)(R6), [V1.H8, V2.H8, V3.H8, V4.H8]")
		}
		for j := 0; j < 4; j++ {
			a.i(fcvtl(5+2*j, 1+j))
			a.i(fcvtl2(6+2*j, 1+j))
		}
		for k := 0; k < 8; k++ {
			a.i(fmlaElem(16+8*h+k, 5+k, 0, 0))
		}
	}
	a.l("SUBS $1, R4")
	a.l("BNE loop")
	for k := 16; k < 32; k += 4 {
		a.l("VST1.P [V%d.S4, V%d.S4, V%d.S4, V%d.S4], 64(R0)", k, k+1, k+2, k+3)
	}
	a.l("ADD $128, R2")
	a.l("SUBS $1, R3")
	a.l("BNE chunk")
	a.l("RET")
}

// sum4Chunk emits the four-row loop shape shared by the F16 and Q8_0
// kernels: per chunk of 16 outputs, the four rows' accumulators in
// V16..V31 (row r in V(16+4r)..V(19+4r), out rows R9 bytes apart), loaded,
// then per value row the four weights (w rows 256 bytes apart) into
// S0..S3 and body() leaving the row's 16 converted values in V6..V9, then
// stored. R0 is the chunk's out, R8 the value row, R1 the weights, R4 the
// rows left.
func (a *asm) sum4Chunk(lbl string, body func()) {
	a.l("ADD R9, R0, R10")
	a.l("ADD R9, R10, R11")
	a.l("ADD R9, R11, R12")
	a.l("VLD1 (R0), [V16.S4, V17.S4, V18.S4, V19.S4]")
	a.l("VLD1 (R10), [V20.S4, V21.S4, V22.S4, V23.S4]")
	a.l("VLD1 (R11), [V24.S4, V25.S4, V26.S4, V27.S4]")
	a.l("VLD1 (R12), [V28.S4, V29.S4, V30.S4, V31.S4]")
	a.l("MOVD w+8(FP), R1")
	a.l("MOVD rows+32(FP), R4")
	a.l("MOVD R2, R8")
	a.l("PCALIGN $16")
	a.l("loop%s:", lbl)
	a.l("FMOVS 256(R1), F1")
	a.l("FMOVS 512(R1), F2")
	a.l("FMOVS 768(R1), F3")
	a.l("FMOVS.P 4(R1), F0")
	body()
	for r := 0; r < 4; r++ {
		for j := 0; j < 4; j++ {
			a.i(fmlaElem(16+4*r+j, 6+j, r, 0))
		}
	}
	a.l("SUBS $1, R4")
	a.l("BNE loop%s", lbl)
	a.l("VST1 [V16.S4, V17.S4, V18.S4, V19.S4], (R0)")
	a.l("VST1 [V20.S4, V21.S4, V22.S4, V23.S4], (R10)")
	a.l("VST1 [V24.S4, V25.S4, V26.S4, V27.S4], (R11)")
	a.l("VST1 [V28.S4, V29.S4, V30.S4, V31.S4], (R12)")
	a.l("ADD $64, R0")
}

// attnSumF16x4: attnSumF16 for four rows (out rows hd apart, w rows 64
// apart), each value converted once for the four: 16 outputs of the four
// rows per chunk.
func (a *asm) attnSumF16x4() {
	a.comment("attnSumF16x4NEON: attnSumF16NEON for four rows (out rows hd apart, w rows 64\napart), each value converted once for the four.")
	a.text("attnSumF16x4NEON", "func attnSumF16x4NEON(out, w *float32, v *uint16, hd64, rows int)", "$0-40")
	a.l("MOVD out+0(FP), R0")
	a.l("MOVD v+16(FP), R2")
	a.l("MOVD hd64+24(FP), R3")
	a.l("LSL $7, R3, R5")  // bytes per v row
	a.l("LSL $8, R3, R9")  // bytes per out row
	a.l("LSL $6, R5, R13") // a block of rows
	a.l("LSL $2, R3")      // chunks of 16 outputs
	a.l("chunk:")
	a.sum4Chunk("", func() {
		a.l("ADD R13, R8, R14")
		a.prfm(0, "R14")
		a.l("VLD1 (R8), [V4.H8, V5.H8]")
		a.l("ADD R5, R8")
		a.i(fcvtl(6, 4))
		a.i(fcvtl2(7, 4))
		a.i(fcvtl(8, 5))
		a.i(fcvtl2(9, 5))
	})
	a.l("ADD $32, R2")
	a.l("SUBS $1, R3")
	a.l("BNE chunk")
	a.l("RET")
}

// dequant16 sets V(d)..V(d+3) to the 16 int8 values in V(src) times the
// scale in S(sc): widened to int32, converted exactly, one FMUL by element
// each (DequantQ8_0's bits). V(t), V(t+1) are temporaries.
func (a *asm) dequant16(d, src, sc, t int) {
	a.i(sshll8(t, src))
	a.i(sshll28(t+1, src))
	a.i(sshll16(d, t))
	a.i(sshll216(d+1, t))
	a.i(sshll16(d+2, t+1))
	a.i(sshll216(d+3, t+1))
	for k := d; k < d+4; k++ {
		a.i(scvtf4s(k, k))
		a.i(fmulElem(k, k, sc, 0))
	}
}

// sumQ8: out[i] = fma(w[t], x[t][i], out[i]), t = 0..rows-1 in order, x[t]
// value row t (Q8_0 blocks at v[t*vStride:]) dequantized: 64 outputs (two
// blocks) in V16..V31 through all rows.
func (a *asm) sumQ8() {
	a.comment("sumQ8NEON: out[i] = fma(w[t], x[t][i], out[i]) for t = 0..rows-1 in order,\nx[t] the Q8_0 value row v[t*vStride:] dequantized as DequantQ8_0 (hd =\n64*hd64, rows > 0); the next block's rows prefetched.")
	a.text("sumQ8NEON", "func sumQ8NEON(out, w *float32, v *byte, hd64, rows, vStride int, tab *float32)", "$0-56")
	a.l("MOVD out+0(FP), R0")
	a.l("MOVD v+16(FP), R2")
	a.l("MOVD hd64+24(FP), R3")
	a.l("MOVD vStride+40(FP), R5")
	a.l("MOVD tab+48(FP), R20")
	a.l("LSL $6, R5, R13") // a block of rows
	a.l("chunk:")
	a.l("MOVD R0, R7")
	for k := 16; k < 32; k += 4 {
		a.l("VLD1.P 64(R7), [V%d.S4, V%d.S4, V%d.S4, V%d.S4]", k, k+1, k+2, k+3)
	}
	a.l("MOVD w+8(FP), R1")
	a.l("MOVD rows+32(FP), R4")
	a.l("MOVD R2, R8")
	a.l("PCALIGN $16")
	a.l("loop:")
	a.l("FMOVS.P 4(R1), F0")
	a.l("ADD R13, R8, R14")
	a.prfm(0, "R14")
	a.prfm(64, "R14")
	a.l("MOVHU (R8), R15")
	a.l("MOVWU (R20)(R15<<2), R15")
	a.l("FMOVS R15, F1")
	a.l("MOVHU 34(R8), R15")
	a.l("MOVWU (R20)(R15<<2), R15")
	a.l("FMOVS R15, F2")
	a.l("ADD $2, R8, R14")
	a.l("VLD1 (R14), [V3.B16, V4.B16]")
	a.l("ADD $36, R8, R14")
	a.l("VLD1 (R14), [V5.B16, V6.B16]")
	a.l("ADD R5, R8")
	for j := 0; j < 4; j++ {
		a.dequant16(7, 3+j, 1+j/2, 11)
		for k := 0; k < 4; k++ {
			a.i(fmlaElem(16+4*j+k, 7+k, 0, 0))
		}
	}
	a.l("SUBS $1, R4")
	a.l("BNE loop")
	for k := 16; k < 32; k += 4 {
		a.l("VST1.P [V%d.S4, V%d.S4, V%d.S4, V%d.S4], 64(R0)", k, k+1, k+2, k+3)
	}
	a.l("ADD $68, R2")
	a.l("SUBS $1, R3")
	a.l("BNE chunk")
	a.l("RET")
}

// sumQ8x4: sumQ8 for four rows, each value dequantized once for the four:
// 16 outputs (half a block) of the four rows per chunk.
func (a *asm) sumQ8x4() {
	a.comment("sumQ8x4NEON: sumQ8NEON for four rows (out rows hd apart, w rows 64 apart),\neach value dequantized once for the four.")
	a.text("sumQ8x4NEON", "func sumQ8x4NEON(out, w *float32, v *byte, hd64, rows, vStride int, tab *float32)", "$0-56")
	a.l("MOVD out+0(FP), R0")
	a.l("MOVD v+16(FP), R2")
	a.l("MOVD hd64+24(FP), R3")
	a.l("MOVD vStride+40(FP), R5")
	a.l("MOVD tab+48(FP), R20")
	a.l("LSL $8, R3, R9")  // bytes per out row
	a.l("LSL $6, R5, R13") // a block of rows
	a.l("LSL $1, R3")      // blocks of 32 values
	a.l("block:")
	for h := 0; h < 2; h++ {
		a.sum4Chunk(fmt.Sprint(h), func() {
			if h == 0 {
				a.l("ADD R13, R8, R14")
				a.prfm(0, "R14")
				a.prfm(64, "R14")
			}
			a.l("MOVHU (R8), R15")
			a.l("MOVWU (R20)(R15<<2), R15")
			a.l("FMOVS R15, F10")
			a.l("ADD $%d, R8, R14", 2+16*h)
			a.l("VLD1 (R14), [V5.B16]")
			a.l("ADD R5, R8")
			a.dequant16(6, 5, 10, 11)
		})
	}
	a.l("ADD $34, R2")
	a.l("SUBS $1, R3")
	a.l("BNE block")
	a.l("RET")
}
