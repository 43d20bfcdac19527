package main

// The integer value sum over a Q8_0 cache (neon's TransposeV8 and SumV8,
// attnv8.go there): a block of value rows transposed into quads of four
// positions (the operand layout of SDOT), and one query row's weights,
// folded with the values' scales and quantized per group of 32 positions
// and 32 channels, dotted with them. The integer sums are exact, so both
// tiers give the reference's bits: SDOT by element on the dot-product
// tier, SMULL/SMLAL into 16-bit lanes (two products each, exact) widened
// by SADALP on ARMv8.0.

// fcvtnu4s: FCVTNU Vd.4S, Vn.4S (round to nearest, ties to even; negative
// and NaN to 0).
func fcvtnu4s(d, n int) string { return word(rr(0x6e21a800, d, n), "FCVTNU V%d.4S, V%d.4S", d, n) }

// dup4s: DUP Vd.4S, Vn.S[i].
func dup4s(d, n, i int) string {
	return word(0x4e040400|uint32(i&3)<<19|uint32(n&31)<<5|uint32(d&31), "DUP V%d.4S, V%d.S[%d]", d, n, i)
}

// transposeV8: for nq quads of four value rows (positions 4q..4q+3, rows
// vStride bytes apart) and each of the nbv blocks c, the four rows' 32
// quants interleaved by byte (channel i's four bytes together) into
// vt[((g*nbv+c)*8+q%8)*128:], g = q/8, and their scales (fp16Table) into
// dv[(g*nbv+c)*32+4*(q%8)+j].
func (a *asm) transposeV8() {
	a.comment("transposeV8NEON: nq >= 1 quads of four Q8_0 value rows of nbv >= 1 blocks into\nthe quads of SumV8 (four positions of a channel together) and their scales.")
	a.text("transposeV8NEON", "func transposeV8NEON(vt *byte, dv *float32, v *byte, vStride, nq, nbv int, tab *float32)", "$0-56")
	a.l("MOVD vt+0(FP), R0")
	a.l("MOVD dv+8(FP), R1")
	a.l("MOVD v+16(FP), R2")
	a.l("MOVD vStride+24(FP), R3")
	a.l("MOVD nq+32(FP), R4")
	a.l("MOVD nbv+40(FP), R5")
	a.l("MOVD tab+48(FP), R20")
	a.l("MOVD ZR, R6") // q
	a.l("quad:")
	// R7 the quad's offset in vt: (q/8)*nbv*1024 + (q%8)*128; R8 in dv
	// (bytes): (q/8)*nbv*128 + (q%8)*16.
	a.l("LSR $3, R6, R7")
	a.l("MUL R5, R7, R7")
	a.l("AND $7, R6, R8")
	a.l("LSL $10, R7, R9")
	a.l("ADD R8<<7, R9, R9")
	a.l("ADD R0, R9, R9") // vt
	a.l("LSL $7, R7, R10")
	a.l("ADD R8<<4, R10, R10")
	a.l("ADD R1, R10, R10") // dv
	// R11..R14 the four rows
	a.l("LSL $2, R6, R11")
	a.l("MUL R3, R11, R11")
	a.l("ADD R2, R11, R11")
	a.l("ADD R3, R11, R12")
	a.l("ADD R3, R12, R13")
	a.l("ADD R3, R13, R14")
	a.l("MOVD R5, R15")
	a.l("block:")
	for j, r := range []string{"R11", "R12", "R13", "R14"} {
		a.l("MOVHU.P 2(%s), R16", r)
		a.l("MOVWU (R20)(R16<<2), R16")
		a.l("MOVW R16, %d(R10)", 4*j)
		a.l("VLD1.P 32(%s), [V%d.B16, V%d.B16]", r, 2*j, 2*j+1)
	}
	// rows A B C D in V0/V1, V2/V3, V4/V5, V6/V7 (channels 0-15, 16-31)
	for h := 0; h < 2; h++ {
		ab, cd := 8+4*h, 10+4*h
		a.l("VZIP1 V%d.B16, V%d.B16, V%d.B16", 2+h, h, ab) // a0 b0 .. a7 b7
		a.l("VZIP2 V%d.B16, V%d.B16, V%d.B16", 2+h, h, ab+1)
		a.l("VZIP1 V%d.B16, V%d.B16, V%d.B16", 6+h, 4+h, cd)
		a.l("VZIP2 V%d.B16, V%d.B16, V%d.B16", 6+h, 4+h, cd+1)
		for k := 0; k < 2; k++ {
			o := 16 + 8*h + 2*k // channels 16h+8k .. +7 in two vectors
			a.l("VZIP1 V%d.H8, V%d.H8, V%d.H8", cd+k, ab+k, o)
			a.l("VZIP2 V%d.H8, V%d.H8, V%d.H8", cd+k, ab+k, o+1)
		}
	}
	// V16..V19: channels 0-3, 4-7, 8-11, 12-15; V24..V27: 16..31
	a.l("VST1 [V16.B16, V17.B16, V18.B16, V19.B16], (R9)")
	a.l("ADD $64, R9, R16")
	a.l("VST1 [V24.B16, V25.B16, V26.B16, V27.B16], (R16)")
	a.l("ADD $1024, R9")
	a.l("ADD $128, R10")
	a.l("SUBS $1, R15")
	a.l("BNE block")
	a.l("ADD $1, R6")
	a.l("CMP R4, R6")
	a.l("BLT quad")
	a.l("RET")
}

// sumV8: for the groups g0..g0+ng-1 and the nbv channel blocks, the row's
// weights w[32g:32g+32] (zero outside its keys) times the scales dv, their
// largest amax, the products quantized to q = FCVTNU(p*(127/amax)) (at
// most 127), the 32 channels' exact sums of q times the quads' quants,
// and out[32c+i] += float32(d*float32(sum)), d = amax*float32(1/127); a group whose
// amax is at most 0x1p-120 (v8Tiny: 127/amax would overflow) or NaN is
// skipped.
func (a *asm) sumV8(t tier) {
	name := "sumV8" + t.suffix
	a.comment(name + ": out[32c+i] += d*sum_t q[t]*v[t][32c+i] for groups g0..g0+ng-1 and\nblocks c < nbv, q the row's weights times the scales quantized per group.")
	a.text(name, "func "+name+"(out, w *float32, vt *byte, dv *float32, g0, ng, nbv int)", "$0-56")
	a.l("MOVD out+0(FP), R0")
	a.l("MOVD w+8(FP), R1")
	a.l("MOVD vt+16(FP), R2")
	a.l("MOVD dv+24(FP), R3")
	a.l("MOVD g0+32(FP), R4")
	a.l("MOVD ng+40(FP), R5")
	a.l("MOVD nbv+48(FP), R6")
	a.l("MOVW $0x42fe0000, R15") // 127.0
	a.l("MOVW $0x3c010204, R16") // float32(1/127)
	a.l("MOVW $0x03800000, R17") // 0x1p-120, v8Tiny
	// R9 vt and R10 dv at group g0's first block; R1 the group's weights
	a.l("MUL R6, R4, R7")
	a.l("ADD R7<<10, R2, R9")
	a.l("ADD R7<<7, R3, R10")
	a.l("ADD R4<<7, R1, R1")
	a.l("group:")
	a.l("MOVD R0, R11") // out
	a.l("MOVD R6, R12") // blocks left
	a.l("block:")
	a.l("VLD1 (R1), [V0.S4, V1.S4, V2.S4, V3.S4]")
	a.l("ADD $64, R1, R13")
	a.l("VLD1 (R13), [V4.S4, V5.S4, V6.S4, V7.S4]")
	a.l("VLD1 (R10), [V8.S4, V9.S4, V10.S4, V11.S4]")
	a.l("ADD $64, R10, R13")
	a.l("VLD1 (R13), [V12.S4, V13.S4, V14.S4, V15.S4]")
	for k := 0; k < 8; k++ {
		a.i(fmul4s(8+k, k, 8+k)) // p = w*dv
	}
	a.i(fmax4s(16, 8, 9))
	a.i(fmax4s(17, 10, 11))
	a.i(fmax4s(18, 12, 13))
	a.i(fmax4s(19, 14, 15))
	a.i(fmax4s(16, 16, 17))
	a.i(fmax4s(18, 18, 19))
	a.i(fmax4s(16, 16, 18))
	a.i(fmaxv(16, 16))
	a.l("FMOVS R17, F29")
	a.l("FCMPS F29, F16")
	a.l("BLE next") // amax <= 0x1p-120 or NaN: nothing to add (127/amax would overflow)
	a.l("FMOVS R15, F30")
	a.l("FMOVS R16, F26")
	a.l("FDIVS F16, F30, F27") // id = 127/amax
	a.l("FMULS F16, F26, F26") // d = amax*float32(1/127)
	for k := 0; k < 8; k++ {
		a.i(fmulElem(8+k, 8+k, 27, 0))
		a.i(fcvtnu4s(8+k, 8+k))
	}
	// Narrowed by UZP1 (the low halves, then the low bytes): FCVTNU gives
	// at most 127 here (p <= amax and id = 127/amax, each rounded; id is
	// finite, amax being above v8Tiny), so the low bytes are the
	// saturating SQXTN's of earlier versions, with six instructions
	// instead of twelve.
	for k := 0; k < 4; k++ {
		a.i(uzp1h(20+k, 8+2*k, 9+2*k))
	}
	a.i(uzp1b(24, 20, 21)) // q of positions 0..15: quads 0..3
	a.i(uzp1b(25, 22, 23)) // quads 4..7
	a.l("MOVD R9, R13")
	if t.dot {
		// acc V8..V15 (channels 4j..4j+3), quads' quants V16..V23
		for k := 8; k < 16; k++ {
			a.zero(k)
		}
		for q := 0; q < 8; q++ {
			for h := 0; h < 2; h++ {
				r := 16 + 4*h
				a.l("VLD1.P 64(R13), [V%d.B16, V%d.B16, V%d.B16, V%d.B16]", r, r+1, r+2, r+3)
				for j := 0; j < 4; j++ {
					a.i(sdotElem(8+4*h+j, r+j, 24+q/4, q%4))
				}
			}
		}
		a.sumV8Out(8)
	} else {
		// acc V0..V15: V(2j) channels 4j, 4j+1 and V(2j+1) 4j+2, 4j+3,
		// each as two partial sums; quads' quants V16..V23, their
		// weights V27 and V28 broadcast, products V29..V31.
		for k := 0; k < 16; k++ {
			a.zero(k)
		}
		for q := 0; q < 8; q += 2 {
			a.i(dup4s(27, 24+q/4, q%4))
			a.i(dup4s(28, 24+q/4, q%4+1))
			for h := 0; h < 2; h++ {
				a.l("ADD $128, R13, R14")
				a.l("VLD1 (R13), [V16.B16, V17.B16, V18.B16, V19.B16]")
				a.l("VLD1 (R14), [V20.B16, V21.B16, V22.B16, V23.B16]")
				a.l("ADD $64, R13")
				for j := 0; j < 4; j++ {
					acc := 2 * (4*h + j)
					tmp := 29 + j%3
					a.i(smull8(tmp, 16+j, 27))
					a.i(smlal8(tmp, 20+j, 28))
					a.i(sadalp8(acc, tmp))
					a.i(smull28(tmp, 16+j, 27))
					a.i(smlal28(tmp, 20+j, 28))
					a.i(sadalp8(acc+1, tmp))
				}
			}
			a.l("ADD $128, R13")
		}
		for j := 0; j < 8; j++ {
			a.i(addp4s(16+j, 2*j, 2*j+1))
		}
		a.sumV8Out(16)
	}
	a.l("next:")
	a.l("ADD $1024, R9")
	a.l("ADD $128, R10")
	a.l("ADD $128, R11")
	a.l("SUBS $1, R12")
	a.l("BNE block")
	a.l("ADD $128, R1")
	a.l("SUBS $1, R5")
	a.l("BNE group")
	a.l("RET")
}

// sumV8Out adds d (S26) times the eight int32 sums in V(acc)..V(acc+7)
// to the 32 floats at R11: each product rounded, then added.
func (a *asm) sumV8Out(acc int) {
	o := 0
	if acc == 0 {
		o = 8
	}
	for k := 0; k < 8; k++ {
		a.i(scvtf4s(acc+k, acc+k))
		a.i(fmulElem(acc+k, acc+k, 26, 0))
	}
	a.l("VLD1 (R11), [V%d.S4, V%d.S4, V%d.S4, V%d.S4]", o, o+1, o+2, o+3)
	a.l("ADD $64, R11, R14")
	a.l("VLD1 (R14), [V%d.S4, V%d.S4, V%d.S4, V%d.S4]", o+4, o+5, o+6, o+7)
	for k := 0; k < 8; k++ {
		a.i(fadd4s(o+k, o+k, acc+k))
	}
	a.l("VST1 [V%d.S4, V%d.S4, V%d.S4, V%d.S4], (R11)", o, o+1, o+2, o+3)
	a.l("VST1 [V%d.S4, V%d.S4, V%d.S4, V%d.S4], (R14)", o+4, o+5, o+6, o+7)
}
