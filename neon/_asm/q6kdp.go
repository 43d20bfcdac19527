package main

// Q6_K × Q8_K with SDOT (dotQ6_KQ8_KDP).
//
// Unpacking: each 6-bit value v (low four bits in ql, high two in qh) is
// built as the byte 4·(v-32) = (v<<2) XOR 0x80, which SDOT takes as int8:
// the ql nibble goes to bits 2-5 by a shift, the two qh bits to bits 6-7
// by a shift-and-insert (SLI/SRI), and XORing qh once with 0xAA flips
// each pair's high bit, which lands in bit 7 of all four bytes built from
// it. Eleven instructions per 64 values, no offset correction; the sums
// are four times too large, which SCVTF #2 undoes exactly.
//
// Sub-block scales without zeroing an accumulator per sub-block: the 16
// sub-blocks (16 values, one SDOT each) go to four chained accumulators
// K0-K3 (sub-block j to K(j mod 4), in increasing j), and after each SDOT
// the chain's running value is multiplied into R by c_j = sc_j - sc_(j+4)
// (sc_j for j >= 12): the running values telescope to Σ sc_j·dot_j.
//
// Per super-block and column: R (4 int32 lanes; lane l holds Σ_j sc_j·
// (values 4l..4l+3 of sub-block j)·q8, whatever the path) summed by ADDV,
// converted, times d·yd, added to the column's sum: the same float steps
// for one column (decode, streaming) and several (weights unpacked once
// per super-block), so every column is bit-identical to its own n == 1
// result.

// q6Unpack builds the four 16-value vectors b0..b3 (values 16c.., 32+16c..,
// 64+16c.., 96+16c.. of a 128-value half) from ql0, ql1 (the ql bytes
// 16c.., 32+16c..) and qh (16 bytes, destroyed); V30 = 0xAA, V31 = 0xF0,
// t a temporary.
func (a *asm) q6Unpack(ql0, ql1, qh, b0, b1, b2, b3, t int) {
	a.l("VEOR V30.B16, V%d.B16, V%d.B16", qh, qh)
	a.q6UnpackX(ql0, ql1, qh, b0, b1, b2, b3, t)
}

// q6UnpackX is q6Unpack for qh already XORed with 0xAA (the packed
// layout stores it so): V30 is not read.
func (a *asm) q6UnpackX(ql0, ql1, qh, b0, b1, b2, b3, t int) {
	a.l("VSHL $2, V%d.B16, V%d.B16", ql0, b0)
	a.l("VSLI $6, V%d.B16, V%d.B16", qh, b0)
	a.l("VSHL $2, V%d.B16, V%d.B16", ql1, b1)
	a.l("VUSHR $2, V%d.B16, V%d.B16", qh, t)
	a.l("VSLI $6, V%d.B16, V%d.B16", t, b1)
	a.l("VAND V31.B16, V%d.B16, V%d.B16", ql0, t)
	a.l("VSHL $2, V%d.B16, V%d.B16", qh, b2)
	a.l("VSRI $2, V%d.B16, V%d.B16", t, b2)
	a.l("VAND V31.B16, V%d.B16, V%d.B16", ql1, t)
	a.l("VSRI $2, V%d.B16, V%d.B16", t, qh)
	if b3 != qh {
		a.l("VMOV V%d.B16, V%d.B16", qh, b3)
	}
}

// q6Coefs loads the super-block's 16 int8 scales at off(base) and leaves
// c_j (see above) as int32 lanes in V(c0)..V(c0+3); V(t) temporary.
func (a *asm) q6Coefs(off int, base string, c0, t int) {
	a.ldq(off, base, t)
	a.i(sshll8(c0+1, t))
	a.i(sshll28(c0+3, t))
	a.i(sshll16(c0, c0+1))
	a.i(sshll216(c0+1, c0+1))
	a.i(sshll16(c0+2, c0+3))
	a.i(sshll216(c0+3, c0+3))
	for i := 0; i < 3; i++ {
		a.l("VSUB V%d.S4, V%d.S4, V%d.S4", c0+i+1, c0+i, c0+i)
	}
}

// q6Tail adds the super-block's term to S(sum): R in V(r) (sumi·2^fbits
// in lanes), d at 208(R1) through fp16Table (R20), yd at (act); V(t0),
// V(t1) temporaries.
func (a *asm) q6Tail(r, fbits int, act string, sum, t0, t1 int) {
	a.i(addv4s(r, r))
	if fbits > 0 {
		a.i(scvtfSFix(r, r, fbits))
	} else {
		a.i(scvtfS(r, r))
	}
	a.l("MOVHU 208(R1), R8")
	a.l("FMOVS (R20)(R8<<2), F%d", t1)
	a.l("FMOVS (%s), F%d", act, t0)
	a.l("FMULS F%d, F%d, F%d", t0, t1, t1)
	a.l("FMULS F%d, F%d, F%d", t1, r, r)
	a.l("FADDS F%d, F%d, F%d", r, sum, sum)
}

// q6MultiEnd closes the column loop (label colm) and the super-block loop
// (label sbm) of a Q6_K dot's several-column path: the column's term added
// to out[j] (R10), R in V(r) as for q6Tail.
func (a *asm) q6MultiEnd(r, fbits, t0, t1 int) {
	a.l("FMOVS (R10), F27")
	a.q6Tail(r, fbits, "R9", 27, t0, t1)
	a.l("FMOVS F27, (R10)")
	a.l("ADD $4, R10")
	a.l("ADD R3, R9")
	a.l("SUBS $1, R11")
	a.l("BNE colm")
	a.l("ADD $210, R1")
	a.l("ADD $292, R2")
	a.l("SUBS $1, R4")
	a.l("BNE sbm")
	a.l("RET")
}

// q6Prologue opens a Q6_K dot: arguments, fp16Table in R20, the unpack
// constants in V30 (0xAA) and V31 (0xF0) and, for the A72 kernel, the TBL
// indices in V29 (address in R12); several columns branch to multi.
func (a *asm) q6Prologue(name string, perm bool) {
	a.text(name, "func "+name+dotSig, "$0-48")
	a.loadDotArgs()
	a.l("MOVD ·fp16Table(SB), R20")
	if perm {
		a.l("MOVD $q6perm<>(SB), R12")
		a.l("VLD1 (R12), [V29.B16]")
	}
	a.l("VMOVI $0xaa, V30.B16")
	a.l("VMOVI $0xf0, V31.B16")
	a.l("CMP $1, R5")
	a.l("BNE multi")
}

// q6DecodeEnd closes the one-column super-block loop (label sb1) of a
// Q6_K dot and stores the column's sum (S27).
func (a *asm) q6DecodeEnd() {
	a.l("ADD $210, R1")
	a.l("ADD $292, R2")
	a.l("SUBS $1, R4")
	a.l("BNE sb1")
	a.l("FMOVS F27, (R0)")
	a.l("RET")
}

func (a *asm) dotQ6_KDP() {
	a.q6Prologue("dotQ6_KQ8_KDP", false)

	// One column, streaming: per (half, chunk) group three loads of
	// weights, four of activations, four SDOTs and MLAs.
	a.l("VEOR V27.B16, V27.B16, V27.B16") // the column's sum in S27
	a.l("PCALIGN $16")
	a.l("sb1:")
	a.q6Coefs(192, "R1", 16, 0)
	for k := 0; k < 4; k++ {
		a.zero(20 + k)
	}
	first := [2]bool{true, true}
	for h := 0; h < 2; h++ {
		for c := 0; c < 2; c++ {
			g := 2*h + c
			ql0, ql1, qh := 0+6*(g%2), 1+6*(g%2), 2+6*(g%2)
			a.ldq(64*h+16*c, "R1", ql0)
			a.ldq(64*h+32+16*c, "R1", ql1)
			a.ldq(128+32*h+16*c, "R1", qh)
			b := [4]int{3 + 6*(g%2), 4 + 6*(g%2), 5 + 6*(g%2), qh}
			a.q6Unpack(ql0, ql1, qh, b[0], b[1], b[2], b[3], 12+g%2)
			// activations 128h+16c+32i, i < 4, into V12-V15 (after the
			// unpack's temporary is done)
			a.l("ADD $%d, R2, R26", 4+128*h+16*c)
			a.l("FMOVQ (R26), F12")
			a.l("FMOVQ 32(R26), F13")
			a.l("FMOVQ 64(R26), F14")
			a.l("FMOVQ 96(R26), F15")
			for i := 0; i < 4; i++ {
				j := 8*h + c + 2*i
				kc := 20 + j%4
				a.i(sdot(kc, b[i], 12+i))
				r := 24 + c
				if first[c] {
					a.i(mulElem(r, kc, 16+j/4, j%4))
					first[c] = false
				} else {
					a.i(mlaElem(r, kc, 16+j/4, j%4))
				}
			}
		}
	}
	a.l("VADD V25.S4, V24.S4, V24.S4")
	a.q6Tail(24, 2, "R2", 27, 28, 29)
	a.q6DecodeEnd()

	// Several columns: each super-block unpacked once into V0-V15
	// (vector 4g+i = b_i of group g = 2h+c), then per column the same
	// integer and float steps, the sum kept in out[j].
	a.l("multi:")
	a.zeroOut()
	a.l("PCALIGN $16")
	a.l("sbm:")
	for g := 0; g < 4; g++ {
		h, c := g/2, g%2
		a.ldq(64*h+16*c, "R1", 20)
		a.ldq(64*h+32+16*c, "R1", 21)
		a.ldq(128+32*h+16*c, "R1", 4*g+3)
		a.q6Unpack(20, 21, 4*g+3, 4*g, 4*g+1, 4*g+2, 4*g+3, 22)
	}
	a.q6Coefs(192, "R1", 16, 20)
	a.l("MOVD R2, R9")
	a.l("MOVD R0, R10")
	a.l("MOVD R5, R11")
	a.l("PCALIGN $16")
	a.l("colm:")
	for k := 0; k < 4; k++ {
		a.zero(20 + k)
	}
	first2 := true
	for g := 0; g < 4; g++ {
		h, c := g/2, g%2
		a.l("ADD $%d, R9, R26", 4+128*h+16*c)
		a.l("FMOVQ (R26), F25")
		a.l("FMOVQ 32(R26), F26")
		a.l("FMOVQ 64(R26), F27")
		a.l("FMOVQ 96(R26), F28")
		for i := 0; i < 4; i++ {
			j := 8*h + c + 2*i
			kc := 20 + j%4
			a.i(sdot(kc, 4*g+i, 25+i))
			if first2 {
				a.i(mulElem(24, kc, 16+j/4, j%4))
				first2 = false
			} else {
				a.i(mlaElem(24, kc, 16+j/4, j%4))
			}
		}
	}
	a.q6MultiEnd(24, 2, 28, 29)
}
