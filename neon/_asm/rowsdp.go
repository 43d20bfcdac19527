package main

import "fmt"

// rows1DP is the one-column (decode) path of the dotprod row-group
// kernels: eight weight rows, one activation column, block after block.
//
// Integer sums: per block and row two SDOTs into a running accumulator
// per row (V0-V7) that is never zeroed. An ADDP tree turns the eight
// running sums into cumulative row sums (lanes = rows; V9/V10 and V11/V12
// take turns from block to block), and a block's sums are the difference
// with the previous block's, exact in wrapping int32 arithmetic since
// every block sum fits. The weights are unpacked unsigned (Q4_0 nibbles
// 0..15, Q5_0 values 0..31); the offset o·Σa (o = 8, 16) shared by the
// eight rows comes from a ninth running accumulator (V8, SDOT of ones with
// the activations), summed into one lane by ADDV and taken off every lane
// by an MLS by element against o.
//
// Float steps, bit-identical to the generic dots: SCVTF with one fraction
// bit gives float(sumi)/2 exactly, and multiplying by 2·dy instead of dy
// restores the value exactly (scaling by two commutes with rounding), so
// t = (float(sumi)·dx)·dy (Q4_0) or float(sumi)·(dx·dy) (Q5_0, Q8_0) costs
// a one-micro-op conversion. The column's 2·dy is in V28.S[0]; the eight
// rows' dx in V29 (rows 0-3) and V30 (rows 4-7): from fp16Table by integer
// loads combined in general registers (Q4_0, Q5_0: vector-bound), or the
// halves combined in general registers and widened by FCVTL (Q8_0:
// load-bound).
//
// Registers: V13, V14 the float sums; V15 the nibble mask, V16 o as int32
// lanes, V17 bytes of one; Q5_0: V18 bytes of 16, V19 the bit masks, V27,
// V31 the TBL indices; V20, V21 the activation block; V22-V26
// temporaries. General: R8-R15 the rows' blocks, R19 the prefetch
// pointer, R20 the activation block, R5 fp16Table, R16, R17, R21-R26 the
// rows' scales, R3 the column's.
func (a *asm) rows1DP(k block32) {
	a.l("MOVD ·fp16Table(SB), R5")
	for v := 0; v <= 14; v++ {
		a.l("VEOR V%d.B16, V%d.B16, V%d.B16", v, v, v)
	}
	switch k.name {
	case "Q4_0":
		a.l("VMOVI $15, V15.B16")
		a.l("VMOVI $1, V17.B16")
		a.l("MOVD $8, R16")
		a.l("VDUP R16, V16.S4")
	case "Q5_0":
		a.l("VMOVI $15, V15.B16")
		a.l("VMOVI $1, V17.B16")
		a.l("MOVD $16, R16")
		a.l("VDUP R16, V16.S4")
		a.l("VMOVI $16, V18.B16")
		a.l("MOVD $q5consts<>(SB), R16")
		a.l("VLD1 (R16), [V27.B16, V28.B16, V29.B16]")
		a.l("VMOV V28.B16, V31.B16")
		a.l("VMOV V29.B16, V19.B16")
	}
	a.l("MOVD R2, R20")
	// An odd block count takes one block first; the loop takes two.
	a.l("TBZ $0, R4, pairs")
	a.rows1DPBlock(k, 9, 11, 0)
	if !postIndexDP(k) {
		a.rows1Advance(k, 1)
	}
	a.l("SUBS $1, R4")
	a.l("BEQ store1")
	a.l("pairs:")
	a.l("PCALIGN $16")
	a.l("block1:")
	a.rows1DPBlock(k, 11, 9, 0)
	a.rows1DPBlock(k, 9, 11, 1)
	if !postIndexDP(k) {
		a.rows1Advance(k, 2)
	}
	a.l("SUBS $2, R4")
	a.l("BNE block1")
	a.l("store1:")
	a.l("VST1 [V13.S4, V14.S4], (R0)")
	a.l("RET")
}

// rows1DPBlock emits one block step: prev holds the cumulative row sums
// (two registers, rows 0-3 and 4-7) up to the previous block, cur gets
// them up to this one.
// postIndexDP: Q8_0 (load- and decode-bound) loads by post-index, one
// instruction per row for its 32 quants; Q4_0 and Q5_0 (vector-bound)
// by offsets from pointers moved once per two blocks, which llvm-mca
// schedules better.
func postIndexDP(k block32) bool { return k.name == "Q8_0" }

func (a *asm) rows1DPBlock(k block32, prev, cur, j int) {
	step := 8 * k.wsize
	post := postIndexDP(k)
	for off := 0; off < step; off += 64 {
		if post {
			a.l("PRFM %d(R19), PLDL1KEEP", off)
		} else {
			a.l("PRFM %d(R19), PLDL1KEEP", off+step*j)
		}
	}
	if post {
		a.l("ADD $%d, R19", step)
	}
	ao, wo := 34*j, k.wsize*j
	sc := []string{"R16", "R17", "R21", "R22", "R23", "R24", "R25", "R26"}
	if post {
		a.l("MOVHU.P 2(R20), R3")
		a.l("VLD1.P 32(R20), [V20.B16, V21.B16]")
	} else {
		a.l("MOVHU %d(R20), R3", ao)
		a.l("FMOVQ %d(R20), F20", ao+2)
		a.l("FMOVQ %d(R20), F21", ao+18)
	}
	for r := 0; r < 8; r++ {
		if post {
			a.l("MOVHU.P 2(R%d), %s", 8+r, sc[r])
		} else {
			a.l("MOVHU %d(R%d), %s", wo, 8+r, sc[r])
		}
	}
	a.l("MOVWU (R5)(R3<<2), R3")
	if k.name == "Q8_0" {
		for _, q := range []int{0, 4} {
			for i := 1; i < 4; i++ {
				a.l("ORR %s<<%d, %s, %s", sc[q+i], 16*i, sc[q], sc[q])
			}
		}
		a.l("FMOVD %s, F29", sc[0])
		a.l("FMOVD %s, F30", sc[4])
		a.i(fcvtl(29, 29))
		a.i(fcvtl(30, 30))
	} else {
		for r := 0; r < 8; r++ {
			a.l("MOVWU (R5)(%s<<2), %s", sc[r], sc[r])
		}
		for r := 0; r < 8; r += 2 {
			a.l("ORR %s<<32, %s, %s", sc[r+1], sc[r], sc[r])
		}
		a.l("FMOVD %s, F29", sc[0])
		a.l("VMOV %s, V29.D[1]", sc[2])
		a.l("FMOVD %s, F30", sc[4])
		a.l("VMOV %s, V30.D[1]", sc[6])
	}
	a.l("FMOVS R3, F28")
	a.l("FADDS F28, F28, F28")
	for r := 0; r < 8; r++ {
		p := fmt.Sprintf("R%d", 8+r)
		var lo, hi int
		switch k.name {
		case "Q4_0":
			t := 24 + 2*(r%2)
			lo, hi = 22+3*(r%2), 23+3*(r%2)
			a.l("FMOVQ %d(%s), F%d", wo+2, p, t)
			a.l("VAND V15.B16, V%d.B16, V%d.B16", t, lo)
			a.l("VUSHR $4, V%d.B16, V%d.B16", t, hi)
		case "Q5_0":
			lo, hi = 22, 23
			a.l("FMOVS %d(%s), F26", wo+2, p)
			a.l("FMOVQ %d(%s), F24", wo+6, p)
			a.q5Spread(q5Regs{27, 31, 19, 18, 15}, 24, 26, 22, 23, 25, 26)
		case "Q8_0":
			lo, hi = 22+2*(r%2), 23+2*(r%2)
			a.l("VLD1.P 32(%s), [V%d.B16, V%d.B16]", p, lo, hi)
		}
		a.i(sdot(r, lo, 20))
		a.i(sdot(r, hi, 21))
	}
	corr := k.name != "Q8_0"
	if corr {
		a.i(sdot(8, 17, 20))
		a.i(sdot(8, 17, 21))
	}
	// cumulative row sums, lanes = rows
	a.l("VADDP V1.S4, V0.S4, V22.S4")
	a.l("VADDP V3.S4, V2.S4, V23.S4")
	a.l("VADDP V5.S4, V4.S4, V24.S4")
	a.l("VADDP V7.S4, V6.S4, V25.S4")
	a.l("VADDP V23.S4, V22.S4, V%d.S4", cur)
	a.l("VADDP V25.S4, V24.S4, V%d.S4", cur+1)
	if corr {
		a.i(addv4s(26, 8))
		a.i(mlsElem(cur, 16, 26, 0))
		a.i(mlsElem(cur+1, 16, 26, 0))
	}
	a.l("VSUB V%d.S4, V%d.S4, V22.S4", prev, cur)
	a.l("VSUB V%d.S4, V%d.S4, V24.S4", prev+1, cur+1)
	a.rows1Float(k, 1)
}
