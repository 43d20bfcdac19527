package main

import "fmt"

// rows1NE is the one-column (decode) path of the ARMv8.0 row-group
// kernels (Cortex-A72: one integer multiply pipe, one load pipe).
//
// Integer sums: the products go to 16-bit lanes by SMULL/SMLAL(2), the
// only work for the multiply pipe, and everything else is arranged to fit
// beside it. Q4_0 and Q5_0 weights are unpacked unsigned (0..15, 0..31)
// and every row takes four products per 16-bit lane (|sum| <= 4·31·128),
// reduced by an ADDP tree on 16-bit lanes as far as the bounds allow (Q4_0
// two levels, 16 products <= 30720; Q5_0 one) and widened by SADDLP; the
// offset o·Σa (o = 8, 16), shared by the eight rows, is taken off the
// 32-bit row sums. Q8_0 weights use the full int8 range, so each SMULL's
// products are widened at once (SADDLP/SADALP) and the tree runs on 32-bit
// lanes.
//
// Float steps as the generic dots: t = (float(sumi)·dx)·dy (Q4_0) or
// float(sumi)·(dx·dy) (Q5_0, Q8_0), sum = sum + t. dx: the eight halves
// combined in general registers, widened by FCVTL (V29 rows 0-3, V30 rows
// 4-7); dy from fp16Table into V28.S[0].
//
// Registers: V0-V7 the rows' sums; V13, V14 the float sums; V15 the nibble
// mask; Q5_0: V16 bytes of 16, V17, V18 the TBL indices, V19 the bit
// masks; V20, V21 the activation block; V22-V27 temporaries. General:
// R8-R15 the rows' blocks, R19 the prefetch pointer, R20 the activation
// block, R5 fp16Table, R16, R17, R21-R26 the rows' scales, R3 the
// column's.
func (a *asm) rows1NE(k block32) {
	a.l("MOVD ·fp16Table(SB), R5")
	a.l("VEOR V13.B16, V13.B16, V13.B16")
	a.l("VEOR V14.B16, V14.B16, V14.B16")
	switch k.name {
	case "Q4_0":
		a.l("VMOVI $15, V15.B16")
	case "Q5_0":
		a.l("VMOVI $15, V15.B16")
		a.l("VMOVI $16, V16.B16")
		a.l("MOVD $q5consts<>(SB), R16")
		a.l("VLD1 (R16), [V17.B16, V18.B16, V19.B16]") // idx lo, idx hi, bit masks
	}
	a.l("MOVD R2, R20")
	// Two blocks a step, addressed by offsets from the rows' pointers
	// (one pointer update per row and step instead of a post-index per
	// load: the A72 dispatches three micro-ops a cycle); an odd count
	// takes one block first.
	a.l("TBZ $0, R4, pairs")
	a.rows1NEBlock(k, 0)
	a.rows1Float(k, 0)
	a.rows1Advance(k, 1)
	a.l("SUBS $1, R4")
	a.l("BEQ store1")
	a.l("pairs:")
	a.l("PCALIGN $16")
	a.l("block1:")
	for j := 0; j < 2; j++ {
		a.rows1NEBlock(k, j)
		a.rows1Float(k, 0)
	}
	a.rows1Advance(k, 2)
	a.l("SUBS $2, R4")
	a.l("BNE block1")
	a.l("store1:")
	a.l("VST1 [V13.S4, V14.S4], (R0)")
	a.l("RET")
}

func (a *asm) rows1NEBlock(k block32, j int) {
	// The A72 has one load pipe and small issue queues: the loads are
	// spread between the rows' multiplies instead of bunched up front.
	step := 8 * k.wsize
	var prf []string
	for off := 0; off < step; off += 64 {
		prf = append(prf, fmt.Sprintf("PRFM %d(R19), PLDL1KEEP", off+step*j))
	}
	sc := []string{"R16", "R17", "R21", "R22", "R23", "R24", "R25", "R26"}
	ao, wo := 34*j, k.wsize*j
	a.l("MOVHU %d(R20), R3", ao)
	a.l("FMOVQ %d(R20), F20", ao+2)
	a.l("FMOVQ %d(R20), F21", ao+18)
	for r := 0; r < 8; r++ {
		p := fmt.Sprintf("R%d", 8+r)
		a.l("MOVHU %d(%s), %s", wo, p, sc[r])
		switch k.name {
		case "Q4_0", "Q5_0":
			lo, hi := 22+2*(r%2), 23+2*(r%2)
			if k.name == "Q4_0" {
				t := 26 + r%2
				a.l("FMOVQ %d(%s), F%d", wo+2, p, t)
				a.l("VAND V15.B16, V%d.B16, V%d.B16", t, lo)
				a.l("VUSHR $4, V%d.B16, V%d.B16", t, hi)
			} else {
				lo, hi = 22, 23
				a.l("FMOVS %d(%s), F26", wo+2, p)
				a.l("FMOVQ %d(%s), F24", wo+6, p)
				a.q5Spread(q5Regs{17, 18, 19, 16, 15}, 24, 26, 22, 23, 25, 26)
			}
			a.i(smull8(r, lo, 20))
			a.i(smlal28(r, lo, 20))
			a.i(smlal8(r, hi, 21))
			a.i(smlal28(r, hi, 21))
		case "Q8_0":
			w0, w1 := 22+2*(r%2), 23+2*(r%2)
			t0, t1 := 26, 27
			a.l("FMOVQ %d(%s), F%d", wo+2, p, w0)
			a.l("FMOVQ %d(%s), F%d", wo+18, p, w1)
			a.i(smull8(t0, w0, 20))
			a.i(smull28(t1, w0, 20))
			a.i(saddlp8(r, t0))
			a.i(sadalp8(r, t1))
			a.i(smull8(t0, w1, 21))
			a.i(smull28(t1, w1, 21))
			a.i(sadalp8(r, t0))
			a.i(sadalp8(r, t1))
		}
		if r%2 == 1 && len(prf) > 0 {
			a.l("%s", prf[0])
			prf = prf[1:]
		}
		if r == 3 || r == 7 {
			q := r - 3
			for i := 1; i < 4; i++ {
				a.l("ORR %s<<%d, %s, %s", sc[q+i], 16*i, sc[q], sc[q])
			}
			a.l("FMOVD %s, F%d", sc[q], 29+q/4)
			a.i(fcvtl(29+q/4, 29+q/4))
		}
	}
	for _, l := range prf {
		a.l("%s", l)
	}
	a.l("FMOVS (R5)(R3<<2), F28")
	switch k.name {
	case "Q4_0":
		a.i(addp8h(22, 0, 1))
		a.i(addp8h(23, 2, 3))
		a.i(addp8h(24, 4, 5))
		a.i(addp8h(25, 6, 7))
		a.i(addp8h(22, 22, 23))
		a.i(addp8h(24, 24, 25))
		a.i(saddlp8(22, 22))
		a.i(saddlp8(24, 24))
	case "Q5_0":
		for i := 0; i < 4; i++ {
			a.i(addp8h(22+i, 2*i, 2*i+1))
			a.i(saddlp8(22+i, 22+i))
		}
		a.l("VADDP V23.S4, V22.S4, V22.S4")
		a.l("VADDP V25.S4, V24.S4, V24.S4")
	case "Q8_0":
		a.l("VADDP V1.S4, V0.S4, V22.S4")
		a.l("VADDP V3.S4, V2.S4, V23.S4")
		a.l("VADDP V5.S4, V4.S4, V24.S4")
		a.l("VADDP V7.S4, V6.S4, V25.S4")
		a.l("VADDP V23.S4, V22.S4, V22.S4")
		a.l("VADDP V25.S4, V24.S4, V24.S4")
	}
	if k.name != "Q8_0" {
		// o·Σa in every lane, off the row sums
		shift := 3
		if k.name == "Q5_0" {
			shift = 4
		}
		a.i(saddlp16b(26, 20))
		a.i(sadalp16b(26, 21))
		a.i(saddlp8(26, 26))
		a.l("VADDP V26.S4, V26.S4, V26.S4")
		a.l("VADDP V26.S4, V26.S4, V26.S4")
		a.l("VSHL $%d, V26.S4, V26.S4", shift)
		a.l("VSUB V26.S4, V22.S4, V22.S4")
		a.l("VSUB V26.S4, V24.S4, V24.S4")
	}
}

// rows1Float adds the block whose integer sums (rows 0-3, 4-7) are in
// V22, V24 to the float sums V13, V14, in the generic dots' order, with
// the rows' dx in V29, V30 and the column's dy in V28.S[0]. fbits > 0
// converts by SCVTF #fbits (then V28 holds dy·2^fbits; see rows1DP).
func (a *asm) rows1Float(k block32, fbits int) {
	if fbits > 0 {
		a.i(scvtf4sFix(22, 22, fbits))
		a.i(scvtf4sFix(24, 24, fbits))
	} else {
		a.i(scvtf4s(22, 22))
		a.i(scvtf4s(24, 24))
	}
	if k.q4 {
		a.i(fmul4s(22, 22, 29))
		a.i(fmul4s(24, 24, 30))
		a.i(fmulElem(22, 22, 28, 0))
		a.i(fmulElem(24, 24, 28, 0))
	} else {
		a.i(fmulElem(25, 29, 28, 0))
		a.i(fmulElem(26, 30, 28, 0))
		a.i(fmul4s(22, 22, 25))
		a.i(fmul4s(24, 24, 26))
	}
	a.i(fadd4s(13, 13, 22))
	a.i(fadd4s(14, 14, 24))
}

// rows1Advance moves the rows' and the column's pointers (and the
// prefetch pointer) on by nblk blocks.
func (a *asm) rows1Advance(k block32, nblk int) {
	for r := 0; r < 8; r++ {
		a.l("ADD $%d, R%d", nblk*k.wsize, 8+r)
	}
	a.l("ADD $%d, R20", nblk*34)
	a.l("ADD $%d, R19", nblk*8*k.wsize)
}
