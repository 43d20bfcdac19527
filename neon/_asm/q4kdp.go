package main

// Q4_K × Q8_K (and Q5_K × Q8_K) with SDOT, ggml layout (dotQ4_KQ8_KDP,
// dotQ5_KQ8_KDP; neon-dotprod multiplies packed Q4_K matrices with
// mulQ4_Kx8DP instead, and uses these for rows left over and with
// GEIST_REPACK=off).
//
// Per super-block and column: the nibbles unpacked unsigned (AND, USHR;
// Q5_K's fifth bits inserted by BIT), two SDOTs per 32-value sub-block,
// the sub-block scales applied to integer lanes (R, whose lanes sum to
// sumi), the mins as the activation's pairwise bsums times the mins
// (SMULL, SMLAL2: M, summing to summins); then [sumi, summins] by two
// ADDPs, SCVTF, times [d·yd, -dmin·yd], FADDP, added to the column's sum.
//
// One column (decode, q4kSB1) streams the weights and applies the scales
// as the SDOTs come, through chained accumulators (see q4kSB1), with the
// float steps of a super-block software-pipelined after the next one's
// SDOTs. Several columns unpack each super-block once and reduce each
// column's sub-block sums by an ADDP tree before one MUL and one MLA by
// the scales. R's lanes differ between the two, but only its exact
// integer total is used, and the float steps are the same: every column
// is bit-identical to its own n == 1 result.

// q4kScales turns the super-block at R1 into: scales as int32 lanes in
// V(s0) (sub-blocks 0-3), V(s0+1) (4-7), mins as int16 lanes in V(m) and
// [d, -dmin] as floats in V(dd).S[0:2] (fp16Table in R20). General
// registers R12-R17, R19, R21 are clobbered.
func (a *asm) q4kScales(s0, m, dd int) {
	a.q4kScaleVecs(s0, m)
	a.q4kDmin(dd)
}

// q4kScaleVecs: the scales of the super-block at R1 as int32 lanes in
// V(s0), V(s0+1), the mins as int16 lanes in V(m). General registers
// R12-R17, R19, R21 are clobbered.
func (a *asm) q4kScaleVecs(s0, m int) {
	a.l("MOVWU 4(R1), R12")
	a.l("MOVWU 8(R1), R13")
	a.l("MOVWU 12(R1), R14")
	a.l("ANDW $0x3f3f3f3f, R12, R15") // sc[0:4]
	a.l("ANDW $0x3f3f3f3f, R13, R16") // m[0:4]
	a.l("ANDW $0x0f0f0f0f, R14, R17") // sc[4:8] low bits
	a.l("LSRW $6, R12, R19")
	a.l("ANDW $0x03030303, R19, R19")
	a.l("ORRW R19<<4, R17, R17")
	a.l("LSRW $4, R14, R19")
	a.l("ANDW $0x0f0f0f0f, R19, R19") // m[4:8] low bits
	a.l("LSRW $6, R13, R21")
	a.l("ANDW $0x03030303, R21, R21")
	a.l("ORRW R21<<4, R19, R19")
	a.l("ORR R17<<32, R15, R15")
	a.l("ORR R19<<32, R16, R16")
	a.l("FMOVD R15, F%d", s0)
	a.l("FMOVD R16, F%d", m)
	a.i(ushll8(s0, s0))
	a.i(ushll8(m, m))
	a.i(ushll216(s0+1, s0))
	a.i(ushll16(s0, s0))
}

// q4kDmin: [d, -dmin] of the super-block at R1 as floats in V(dd).S[0:2],
// through fp16Table (R20).
func (a *asm) q4kDmin(dd int) {
	a.l("MOVHU (R1), R12")
	a.l("MOVHU 2(R1), R13")
	a.l("MOVWU (R20)(R12<<2), R12")
	a.l("MOVWU (R20)(R13<<2), R13")
	a.l("EORW $0x80000000, R13, R13")
	a.l("ORR R13<<32, R12, R12")
	a.l("FMOVD R12, F%d", dd)
}

// q4kMins sets V(mv) (int32 lanes) to the mins times the activation's
// sub-block sums: bsums at 260(act), pairwise added; V(t0), V(t0+1)
// temporaries.
func (a *asm) q4kMins(act string, m, mv, t0 int) {
	a.l("ADD $260, %s, R26", act)
	a.l("VLD1 (R26), [V%d.H8, V%d.H8]", t0, t0+1)
	a.i(addp8h(t0, t0, t0+1))
	a.i(smull16(mv, t0, m))
	a.i(smlal216(mv, t0, m))
}

// q4kTail: D0, D1 the super-block's sub-block sums (lanes 0-3, 4-7), S0,
// S1 the scales (or d0 < 0: R, lanes summing to sumi, already in t0), M
// the mins term, DD [d, -dmin] (or with act "" [d·yd, -dmin·yd]); adds the
// super-block's term to S(sum), with yd at (act). t0, t1 temporaries.
func (a *asm) q4kTail(d0, d1, s0, mv, dd int, act string, sum, t0, t1 int) {
	if d0 >= 0 {
		a.i(mul4s(t0, d0, s0))
		a.i(mla4s(t0, d1, s0+1))
	}
	a.l("VADDP V%d.S4, V%d.S4, V%d.S4", mv, t0, t0)
	a.l("VADDP V%d.S4, V%d.S4, V%d.S4", t0, t0, t0)
	a.i(scvtf2s(t0, t0))
	if act != "" {
		a.l("FMOVS (%s), F%d", act, t1)
		a.i(fmul2sElem(t1, dd, t1, 0))
	} else {
		t1 = dd // [d·yd, -dmin·yd] already
	}
	a.i(fmul2s(t0, t0, t1))
	a.i(faddpS(t0, t0))
	a.l("FADDS F%d, F%d, F%d", t0, sum, sum)
}

// kq4 is a k-quant with Q4_K's scales and mins: Q4_K, or Q5_K with a
// fifth bit per value in 32 bytes of qh (bit 2p of qh[l] for value l of
// sub-block 2p, bit 2p+1 for sub-block 2p+1).
type kq4 struct {
	name   string
	size   int // bytes per super-block
	qs, qh int // offsets of the nibbles and (Q5_K) the high bits, qh < 0 for none
}

var (
	kindQ4_K = kq4{"Q4_K", 144, 16, -1}
	kindQ5_K = kq4{"Q5_K", 176, 48, 16}
)

// kq4Split turns the 32 nibble bytes of sub-block pair p in V(q0), V(q0+1)
// into the low values (sub-block 2p) in V(lo), V(lo+1) and the high ones
// (2p+1) in V(q0), V(q0+1). For Q5_K the fifth bits come from V(h0),
// V(h0+1) (qh), shifted into place and inserted under the mask V(m16)
// (bytes 0x10) by BIT; V(t) is a temporary. V31 holds the nibble mask.
func (a *asm) kq4Split(k kq4, p, q0, lo, h0, m16, t int) {
	for i := 0; i < 2; i++ {
		a.l("VAND V31.B16, V%d.B16, V%d.B16", q0+i, lo+i)
		a.l("VUSHR $4, V%d.B16, V%d.B16", q0+i, q0+i)
	}
	if k.qh < 0 {
		return
	}
	for i := 0; i < 2; i++ {
		for half, v := range []int{lo + i, q0 + i} {
			// bit 2p+half of the qh byte to bit 4
			src := h0 + i
			if sh := 4 - 2*p - half; sh > 0 {
				a.l("VSHL $%d, V%d.B16, V%d.B16", sh, h0+i, t)
				src = t
			} else if sh < 0 {
				a.l("VUSHR $%d, V%d.B16, V%d.B16", -sh, h0+i, t)
				src = t
			}
			a.l("VBIT V%d.B16, V%d.B16, V%d.B16", m16, src, v)
		}
	}
}

func (a *asm) dotQ4_KDP() { a.dotKQ4DP(kindQ4_K) }
func (a *asm) dotQ5_KDP() { a.dotKQ4DP(kindQ5_K) }

func (a *asm) dotKQ4DP(k kq4) {
	name := "dot" + k.name + "Q8_K" + "DP"
	a.text(name, "func "+name+dotSig, "$0-48")
	a.loadDotArgs()
	a.l("MOVD ·fp16Table(SB), R20")
	a.l("VMOVI $15, V31.B16")
	a.l("CMP $1, R5")
	a.l("BNE multi")

	// One column, streaming, software-pipelined: a super-block's integer
	// pair [sumi, summins] and [d·yd, -dmin·yd] (V6, V7 or V8, V9, taking
	// turns) get their float steps only after the next super-block's
	// SDOTs, so that its long latency chain does not hold up the next.
	a.zero(30)
	a.q4kSB1(k, 6, -1)
	a.l("SUBS $1, R4")
	a.l("BEQ last6")
	a.l("PCALIGN $16")
	a.l("sb1:")
	a.q4kSB1(k, 8, 6)
	a.l("SUBS $1, R4")
	a.l("BEQ last8")
	a.q4kSB1(k, 6, 8)
	a.l("SUBS $1, R4")
	a.l("BNE sb1")
	a.l("last6:")
	a.q4kFloat(6, 30, 27)
	a.l("B done1")
	a.l("last8:")
	a.q4kFloat(8, 30, 27)
	a.l("done1:")
	a.l("FMOVS F30, (R0)")
	a.l("RET")

	// Several columns: the super-block unpacked once into V0-V15
	// (sub-block pair p: low nibbles V4p, V4p+1, high V4p+2, V4p+3).
	a.l("multi:")
	a.zeroOut()
	a.l("PCALIGN $16")
	a.l("sbm:")
	a.l("VMOVI $15, V31.B16")
	a.q4kScales(16, 18, 19)
	if k.qh >= 0 {
		a.ldq2(k.qh, "R1", 20, 21)
		a.l("VMOVI $16, V22.B16")
	}
	a.l("ADD $%d, R1, R26", k.qs)
	for p := 0; p < 4; p++ {
		a.l("VLD1.P 32(R26), [V%d.B16, V%d.B16]", 4*p+2, 4*p+3)
		a.kq4Split(k, p, 4*p+2, 4*p, 20, 22, 23)
	}
	a.l("MOVD R2, R9")
	a.l("MOVD R0, R10")
	a.l("MOVD R5, R11")
	a.l("PCALIGN $16")
	a.l("colm:")
	// per sub-block pair: two fresh accumulators, four SDOTs, one ADDP
	t := []int{24, 25, 26, 27}
	a.l("ADD $4, R9, R26")
	for p := 0; p < 4; p++ {
		a.l("VLD1.P 64(R26), [V20.B16, V21.B16, V22.B16, V23.B16]")
		a.zero(28)
		a.zero(29)
		a.i(sdot(28, 4*p, 20))
		a.i(sdot(28, 4*p+1, 21))
		a.i(sdot(29, 4*p+2, 22))
		a.i(sdot(29, 4*p+3, 23))
		a.l("VADDP V29.S4, V28.S4, V%d.S4", t[p])
	}
	a.l("VADDP V25.S4, V24.S4, V24.S4")
	a.l("VADDP V27.S4, V26.S4, V26.S4")
	a.q4kMins("R9", 18, 25, 20)
	a.l("FMOVS (R10), F30")
	a.q4kTail(24, 26, 16, 25, 19, "R9", 30, 27, 28)
	a.l("FMOVS F30, (R10)")
	a.l("ADD $4, R10")
	a.l("ADD R3, R9")
	a.l("SUBS $1, R11")
	a.l("BNE colm")
	a.l("ADD $%d, R1", k.size)
	a.l("ADD $292, R2")
	a.l("SUBS $1, R4")
	a.l("BNE sbm")
	a.l("RET")
}

// q4kSB1 is one super-block of the one-column path: it leaves [sumi,
// summins] (int32) in V(out) and [d·yd, -dmin·yd] in V(out+1), and, when
// prev >= 0, adds the previous super-block's term (V(prev), V(prev+1))
// after its SDOTs. The sub-block scales go on as the SDOTs come (no tree
// at the end): sub-block j's two SDOTs go to chained accumulator K(j mod
// 4) (V0-V3, zeroed per super-block), whose running value is multiplied
// into R (V4 even j, V5 odd j) by c_j = sc_j - sc_(j+4) (sc_j for j >= 4):
// the running values telescope to Σ sc_j·dot_j. R's lanes differ from the
// several-column path's, but only its exact integer total is used.
// Registers: V12-V15, V24, V25, V28, V29 activations (Q5_K: V12-V15
// only, V10, V11 qh, V24 bytes of 16, V25 a temporary); V16-V19
// coefficients, mins and [d, -dmin]; V20-V23 weights; V26, V27
// temporaries; V30 the sum; V31 the nibble mask.
func (a *asm) q4kSB1(k kq4, out, prev int) {
	a.q4kScales(16, 18, out+1)
	a.l("VSUB V17.S4, V16.S4, V16.S4")
	a.l("FMOVS (R2), F26")
	a.i(fmul2sElem(out+1, out+1, 26, 0))
	for c := 0; c < 4; c++ {
		a.zero(c)
	}
	if k.qh >= 0 {
		a.ldq2(k.qh, "R1", 10, 11)
		a.l("VMOVI $16, V24.B16")
	}
	a.l("ADD $%d, R1, R26", k.qs)
	a.l("ADD $4, R2, R27")
	for p := 0; p < 4; p++ {
		x := [4]int{12, 13, 14, 15}
		if p%2 == 1 && k.qh < 0 {
			x = [4]int{24, 25, 28, 29}
		}
		a.l("VLD1.P 32(R26), [V20.B16, V21.B16]")
		a.l("VLD1.P 32(R27), [V%d.B16, V%d.B16]", x[0], x[1])
		a.l("VLD1.P 32(R27), [V%d.B16, V%d.B16]", x[2], x[3])
		a.kq4Split(k, p, 20, 22, 10, 24, 25)
		for h := 0; h < 2; h++ {
			j := 2*p + h
			c := j % 4
			w0, w1 := 22, 23
			if h == 1 {
				w0, w1 = 20, 21
			}
			a.i(sdot(c, w0, x[2*h]))
			a.i(sdot(c, w1, x[2*h+1]))
			if p == 0 {
				a.i(mulElem(4+h, c, 16+j/4, j%4))
			} else {
				a.i(mlaElem(4+h, c, 16+j/4, j%4))
			}
		}
	}
	if prev >= 0 {
		a.q4kFloat(prev, 30, 27)
	}
	a.l("VADD V5.S4, V4.S4, V4.S4")
	a.q4kMins("R2", 18, 26, 28)
	a.l("VADDP V26.S4, V4.S4, V%d.S4", out)
	a.l("VADDP V%d.S4, V%d.S4, V%d.S4", out, out, out)
	a.l("ADD $%d, R1", k.size)
	a.l("ADD $292, R2")
}

// q4kFloat adds x·dy (x = [sumi, summins] in V(x), dy = [d·yd, -dmin·yd]
// in V(x+1)) to S(sum); V(t) temporary. These are q4kTail's float steps.
func (a *asm) q4kFloat(x, sum, t int) {
	a.i(scvtf2s(t, x))
	a.i(fmul2s(t, t, x+1))
	a.i(faddpS(t, t))
	a.l("FADDS F%d, F%d, F%d", t, sum, sum)
}
