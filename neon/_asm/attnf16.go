package main

// The half-precision attention kernels of ../attntile_arm64.s (neon's
// AttnTileKernels KTH, ScoresRowsH and SumRowsH, attnf16.go there) for
// cores with FEAT_FP16 arithmetic (Cortex-A76, A78): FMLA on eight half
// lanes, twice the float32 lanes per instruction. Every product is a
// fused multiply-add rounded to half precision into a half accumulator
// that runs over at most attnRunH terms (query dimensions for a score,
// keys for a value sum), then widened (exactly) and added to a float32
// accumulator: the half accumulators never hold a long sum, and each
// lane's sequence is fixed, so the results are the generic reference's
// bits whatever the tile.

// attnRunH is neon.AttnRunH: terms per half-precision run.
const attnRunH = 32

// fmlaH: FMLA Vd.8H, Vn.8H, Vm.H[i] (FEAT_FP16; m < 16).
func fmlaH(d, n, m, i int) string {
	if m > 15 {
		panic("fmlaH: the element's register must be V0..V15")
	}
	enc := uint32(0x4f001000) | uint32(i>>1&1)<<21 | uint32(i&1)<<20 | uint32(m&15)<<16 | uint32(i>>2&1)<<11 | uint32(n&31)<<5 | uint32(d&31)
	return word(enc, "FMLA V%d.8H, V%d.8H, V%d.H[%d]", d, n, m, i)
}

// fcvtHS: FCVT Hd, Sn (single to half precision, rounded to nearest even).
func fcvtHS(d, n int) string { return word(rr(0x1e23c000, d, n), "FCVT H%d, S%d", d, n) }

// widenAddH adds the eight half accumulators V(h)..V(h+7) (64 lanes),
// widened, to the float32 accumulators V16..V31 (lane j of V(h+k) to lane
// j of V(16+2k) or V(17+2k)), with V14, V15 as scratch.
func (a *asm) widenAddH(h int) {
	for k := 0; k < 8; k++ {
		a.i(fcvtl(14, h+k))
		a.i(fcvtl2(15, h+k))
		a.i(fadd4s(16+2*k, 16+2*k, 14))
		a.i(fadd4s(17+2*k, 17+2*k, 15))
	}
}

// attnKTH: kt[d*64+t] = k[t*hd+d] (halves as they are), t < 64, d < 8*hd8,
// by 8x8 squares transposed in registers (TRN1/TRN2 of half, single and
// double lanes).
func (a *asm) attnKTH() {
	a.comment("attnKTHNEON: kt[d*64+t] = k[t*hd+d] (F16 bits moved), t < 64, d < 8*hd8,\nby 8x8 squares transposed in registers.")
	a.text("attnKTHNEON", "func attnKTHNEON(kt *uint16, k *uint16, hd8 int)", "$0-24")
	a.l("MOVD kt+0(FP), R0")
	a.l("MOVD k+8(FP), R1")
	a.l("MOVD hd8+16(FP), R2")
	a.l("LSL $4, R2, R3") // bytes per key row (hd*2)
	a.l("MOVD $%d, R4", attnBlock/8)
	a.l("keys:")
	// R6 the eight keys' column d0, R9 kt[d0*64+t0], R10 the columns left
	a.l("MOVD R1, R6")
	a.l("MOVD R0, R9")
	a.l("MOVD R2, R10")
	a.l("cols:")
	a.l("MOVD R6, R5")
	for j := 0; j < 8; j++ {
		a.l("VLD1.P (R5)(R3), [V%d.H8]", j)
	}
	// half lanes: V(8+p) = trn1/trn2 of keys 2q, 2q+1
	for q := 0; q < 4; q++ {
		a.l("VTRN1 V%d.H8, V%d.H8, V%d.H8", 2*q+1, 2*q, 8+2*q)
		a.l("VTRN2 V%d.H8, V%d.H8, V%d.H8", 2*q+1, 2*q, 9+2*q)
	}
	// single lanes: U(d mod 4) for keys 0-3 in V16..V19, keys 4-7 in
	// V20..V23 (U0: d 0,4; U1: d 1,5; U2: d 2,6; U3: d 3,7)
	for h := 0; h < 2; h++ {
		t := 8 + 4*h // T0..T3 of this half
		u := 16 + 4*h
		a.l("VTRN1 V%d.S4, V%d.S4, V%d.S4", t+2, t, u)     // d 0,4
		a.l("VTRN1 V%d.S4, V%d.S4, V%d.S4", t+3, t+1, u+1) // d 1,5
		a.l("VTRN2 V%d.S4, V%d.S4, V%d.S4", t+2, t, u+2)   // d 2,6
		a.l("VTRN2 V%d.S4, V%d.S4, V%d.S4", t+3, t+1, u+3) // d 3,7
	}
	// double lanes: d i from U(i mod 4) of both halves
	for i := 0; i < 4; i++ {
		a.l("VZIP1 V%d.D2, V%d.D2, V%d.D2", 20+i, 16+i, 24+i) // d i
		a.l("VZIP2 V%d.D2, V%d.D2, V%d.D2", 20+i, 16+i, 28+i) // d i+4
	}
	for d := 0; d < 8; d++ {
		a.l("FMOVQ F%d, %d(R9)", 24+d, d*attnBlock*2)
	}
	a.l("ADD $%d, R9", 8*attnBlock*2) // the next eight kt rows
	a.l("ADD $16, R6")
	a.l("SUBS $1, R10")
	a.l("BNE cols")
	a.l("ADD R3<<3, R1") // the next eight keys
	a.l("ADD $16, R0")
	a.l("SUBS $1, R4")
	a.l("BNE keys")
	a.l("RET")
}

// attnScoresH: sc[t] = the float32 sum over runs of 32 query dimensions of
// the run's half-precision fused multiply-adds q[d]*kt[d*64+t] from 0, t <
// 64, hd a positive multiple of 8 (a last run shorter when hd is not a
// multiple of 32). The 64 float32 sums are V16..V31, the run's half sums
// V6..V13, eight q halves in V0 taken by element, kt rows in V2..V5.
func (a *asm) attnScoresH() {
	a.comment("attnScoresHNEON: sc[t] = sum over runs of 32 d of float32(the run's half\nfused multiply-adds q[d]*kt[d*64+t] from 0), t < 64, hd a positive multiple of 8.")
	a.text("attnScoresHNEON", "func attnScoresHNEON(sc *float32, q, kt *uint16, hd int)", "$0-32")
	a.l("MOVD sc+0(FP), R0")
	a.l("MOVD q+8(FP), R1")
	a.l("MOVD kt+16(FP), R2")
	a.l("MOVD hd+24(FP), R3")
	for k := 16; k < 32; k++ {
		a.zero(k)
	}
	group := func() { // eight d
		a.l("VLD1.P 16(R1), [V0.H8]")
		for i := 0; i < 8; i++ {
			a.l("VLD1.P 64(R2), [V2.H8, V3.H8, V4.H8, V5.H8]")
			for j := 0; j < 4; j++ {
				a.i(fmlaH(6+j, 2+j, 0, i))
			}
			a.l("VLD1.P 64(R2), [V2.H8, V3.H8, V4.H8, V5.H8]")
			for j := 0; j < 4; j++ {
				a.i(fmlaH(10+j, 2+j, 0, i))
			}
		}
		a.l("SUBS $8, R3")
	}
	a.l("PCALIGN $16")
	a.l("run:")
	for k := 6; k < 14; k++ {
		a.zero(k)
	}
	for g := 0; g < attnRunH/8; g++ {
		group()
		if g < attnRunH/8-1 {
			a.l("BEQ last")
		}
	}
	a.l("last:")
	a.widenAddH(6)
	a.l("CBNZ R3, run")
	for k := 16; k < 32; k += 4 {
		a.l("VST1.P [V%d.S4, V%d.S4, V%d.S4, V%d.S4], 64(R0)", k, k+1, k+2, k+3)
	}
	a.l("RET")
}

// attnSumH: out[i] += the float32 sums over runs of 32 rows of the run's
// half-precision fused multiply-adds h(w[t])*v[t*hd+i] from 0, t < rows in
// order, h rounding to half precision (FCVT), hd = 64*hd64: 64 outputs in
// V16..V31 through all rows, the run's half sums in V6..V13, then the next
// 64.
func (a *asm) attnSumH() {
	a.comment("attnSumHNEON: out[i] += sum over runs of 32 rows t of float32(the run's half\nfused multiply-adds half(w[t])*v[t*hd+i] from 0), t < rows in order (hd = 64*hd64,\nrows > 0).")
	a.text("attnSumHNEON", "func attnSumHNEON(out, w *float32, v *uint16, hd64, rows int)", "$0-40")
	a.l("MOVD out+0(FP), R0")
	a.l("MOVD v+16(FP), R2")
	a.l("MOVD hd64+24(FP), R3")
	a.l("LSL $7, R3, R5")  // bytes per v row
	a.l("SUB $64, R5, R6") // from a row's second load to the next row
	a.l("MOVD $%d, R11", attnRunH)
	a.l("chunk:")
	a.l("MOVD R0, R7")
	for k := 16; k < 32; k += 4 {
		a.l("VLD1.P 64(R7), [V%d.S4, V%d.S4, V%d.S4, V%d.S4]", k, k+1, k+2, k+3)
	}
	a.l("MOVD w+8(FP), R1")
	a.l("MOVD rows+32(FP), R4")
	a.l("MOVD R2, R8")
	a.l("run:")
	for k := 6; k < 14; k++ {
		a.zero(k)
	}
	a.l("CMP R11, R4")
	a.l("CSEL LT, R4, R11, R10") // the run's rows: min(16, left)
	a.l("SUB R10, R4")
	a.l("PCALIGN $16")
	a.l("loop:")
	a.l("FMOVS.P 4(R1), F1")
	a.i(fcvtHS(0, 1))
	a.l("VLD1.P 64(R8), [V2.H8, V3.H8, V4.H8, V5.H8]")
	for j := 0; j < 4; j++ {
		a.i(fmlaH(6+j, 2+j, 0, 0))
	}
	a.l("VLD1.P (R8)(R6), [V2.H8, V3.H8, V4.H8, V5.H8]")
	for j := 0; j < 4; j++ {
		a.i(fmlaH(10+j, 2+j, 0, 0))
	}
	a.l("SUBS $1, R10")
	a.l("BNE loop")
	a.widenAddH(6)
	a.l("CBNZ R4, run")
	for k := 16; k < 32; k += 4 {
		a.l("VST1.P [V%d.S4, V%d.S4, V%d.S4, V%d.S4], 64(R0)", k, k+1, k+2, k+3)
	}
	a.l("ADD $128, R2")
	a.l("SUBS $1, R3")
	a.l("BNE chunk")
	a.l("RET")
}
