package main

// Q6_K × Q8_K without SDOT (dotQ6_KQ8_KNE, Cortex-A72).
//
// The values are built as in the dotprod kernel (4·(v-32) by shifts and
// inserts) and brought back to v-32 by an arithmetic shift, so that two
// products fit a 16-bit lane: per 16-value sub-block one SMULL and one
// SMLAL2 (the only work for the A72's multiply pipe). The sub-block sums
// are reduced by ADDP on 16-bit lanes (four products, |sum| <= 16384),
// widened by SADDLP and paired by ADDP on 32-bit lanes into four vectors
// whose lanes are sub-blocks in the order 4q, 4q+2, 4q+1, 4q+3; the
// scales, permuted the same way by TBL, multiply them (MUL, MLA), and the
// float steps per super-block and column are those of q6Tail: the same for
// one column (streaming) and several (weights unpacked once).

// q6ScalesNE loads the 16 scales at 192(R1), permutes them (V29 holds the
// TBL indices) and widens them to int32 lanes in V(s0)..V(s0+3); V(t)
// temporary.
func (a *asm) q6ScalesNE(s0, t int) {
	a.ldq(192, "R1", t)
	a.i(tbl1(t, t, 29))
	a.i(sshll8(s0+1, t))
	a.i(sshll28(s0+3, t))
	a.i(sshll16(s0, s0+1))
	a.i(sshll216(s0+1, s0+1))
	a.i(sshll16(s0+2, s0+3))
	a.i(sshll216(s0+3, s0+3))
}

// q6GroupNE multiplies the four signed value vectors b[i] of group g =
// 2h+c by the activations at act+4+128h+16c+32i (loaded into av[i]) and
// leaves the two widened half-reduced vectors in q0, q1; t0, t1, tmp
// temporaries.
func (a *asm) q6GroupNE(g int, act string, b, av [4]int, t0, t1, tmp, q0, q1 int) {
	h, c := g/2, g%2
	a.l("ADD $%d, %s, R26", 4+128*h+16*c, act)
	a.l("FMOVQ (R26), F%d", av[0])
	a.l("FMOVQ 32(R26), F%d", av[1])
	a.l("FMOVQ 64(R26), F%d", av[2])
	a.l("FMOVQ 96(R26), F%d", av[3])
	for p := 0; p < 2; p++ {
		for i, t := range []int{t0, t1} {
			a.i(smull8(t, b[2*p+i], av[2*p+i]))
			a.i(smlal28(t, b[2*p+i], av[2*p+i]))
		}
		q := []int{q0, q1}[p]
		a.i(addp8h(tmp, t0, t1))
		a.i(saddlp8(q, tmp))
	}
}

func (a *asm) dotQ6_KNE() {
	a.q6Prologue("dotQ6_KQ8_KNE", true)

	// One column, streaming.
	a.l("VEOR V27.B16, V27.B16, V27.B16") // the column's sum in S27
	a.l("PCALIGN $16")
	a.l("sb1:")
	a.q6ScalesNE(16, 12)
	q := [4][2]int{{20, 21}, {22, 23}, {24, 25}, {26, 28}}
	for g := 0; g < 4; g++ {
		h, c := g/2, g%2
		o := 6 * (g % 2)
		ql0, ql1, qh := o, o+1, o+2
		a.ldq(64*h+16*c, "R1", ql0)
		a.ldq(64*h+32+16*c, "R1", ql1)
		a.ldq(128+32*h+16*c, "R1", qh)
		b := [4]int{o + 3, o + 4, o + 5, qh}
		a.q6Unpack(ql0, ql1, qh, b[0], b[1], b[2], b[3], 28)
		for _, v := range b {
			a.i(sshr16b(v, v, 2))
		}
		a.q6GroupNE(g, "R2", b, [4]int{12, 13, 14, 15}, ql0, ql1, 28, q[g][0], q[g][1])
		if c == 1 {
			// sub-blocks 8h..8h+3 and 8h+4..8h+7
			x0, x1 := q[g-1][0], q[g-1][1]
			a.l("VADDP V%d.S4, V%d.S4, V%d.S4", q[g][0], x0, x0)
			a.l("VADDP V%d.S4, V%d.S4, V%d.S4", q[g][1], x1, x1)
			// R accumulates in V20 (q[0][0], the first sums' register)
			if h == 0 {
				a.i(mul4s(20, x0, 16))
			} else {
				a.i(mla4s(20, x0, 18))
			}
			a.i(mla4s(20, x1, 17+2*h))
		}
	}
	a.q6Tail(20, 0, "R2", 27, 21, 22)
	a.q6DecodeEnd()

	// Several columns: the super-block's values unpacked once into
	// V0-V15 (vector 4g+i), scales in V16-V19.
	a.l("multi:")
	a.zeroOut()
	a.l("PCALIGN $16")
	a.l("sbm:")
	// the column loop below uses V29-V31: constants again
	a.l("VLD1 (R12), [V29.B16]")
	a.l("VMOVI $0xaa, V30.B16")
	a.l("VMOVI $0xf0, V31.B16")
	a.q6ScalesNE(16, 20)
	for g := 0; g < 4; g++ {
		h, c := g/2, g%2
		a.ldq(64*h+16*c, "R1", 20)
		a.ldq(64*h+32+16*c, "R1", 21)
		a.ldq(128+32*h+16*c, "R1", 4*g+3)
		a.q6Unpack(20, 21, 4*g+3, 4*g, 4*g+1, 4*g+2, 4*g+3, 22)
		for i := 0; i < 4; i++ {
			a.i(sshr16b(4*g+i, 4*g+i, 2))
		}
	}
	a.l("MOVD R2, R9")
	a.l("MOVD R0, R10")
	a.l("MOVD R5, R11")
	a.l("PCALIGN $16")
	a.l("colm:")
	qm := [2][2]int{{27, 28}, {29, 30}}
	for g := 0; g < 4; g++ {
		h, c := g/2, g%2
		b := [4]int{4 * g, 4*g + 1, 4*g + 2, 4*g + 3}
		a.q6GroupNE(g, "R9", b, [4]int{20, 21, 22, 23}, 24, 25, 26, qm[c][0], qm[c][1])
		if c == 1 {
			a.l("VADDP V%d.S4, V%d.S4, V%d.S4", qm[1][0], qm[0][0], qm[0][0])
			a.l("VADDP V%d.S4, V%d.S4, V%d.S4", qm[1][1], qm[0][1], qm[0][1])
			if h == 0 {
				a.i(mul4s(31, qm[0][0], 16))
			} else {
				a.i(mla4s(31, qm[0][0], 18))
			}
			a.i(mla4s(31, qm[0][1], 17+2*h))
		}
	}
	a.q6MultiEnd(31, 0, 24, 25)
}

const q6permData = `
// q6perm: the TBL indices putting Q6_K's 16 scales in the order of the
// A72 kernel's sub-block sums (4q, 4q+2, 4q+1, 4q+3).
DATA q6perm<>+0(SB)/8, $0x0705060403010200
DATA q6perm<>+8(SB)/8, $0x0f0d0e0c0b090a08
GLOBL q6perm<>(SB), RODATA|NOPTR, $16
`
