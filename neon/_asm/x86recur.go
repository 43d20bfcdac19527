package main

// The avx2 set's recurrent-state kernels: the Mamba-2 scan step
// (ssm_amd64.s) and the gated delta rule's row (delta_amd64.s).

// hadd8 leaves in X(r) lane 0 the sum of the 8 lanes of Y(r): the halves
// added, then adjacent pairs twice (X(t) clobbered).
func (a *asm) hadd8(r, t int) {
	a.l("VEXTRACTF128 $1, Y%d, X%d", r, t)
	a.l("VADDPS X%d, X%d, X%d", t, r, r)
	a.l("VHADDPS X%d, X%d, X%d", r, r, r)
	a.l("VHADDPS X%d, X%d, X%d", r, r, r)
}

// xdt broadcasts x[off]·dt (dt in X12) into Y(d), via X(t).
func (a *asm) xdt(off, t, d int) {
	if off == 0 {
		a.l("VMOVSS (R10), X%d", t)
	} else {
		a.l("VMOVSS %d(R10), X%d", off, t)
	}
	a.l("VMULSS X12, X%d, X%d", t, t)
	a.l("VBROADCASTSS X%d, Y%d", t, d)
}

// ssmRow emits one row's v = src·dA + B·(x·dt) over the 8 values at R9
// (src at s, B in b or from memory, x·dt in Y(xd), dA in Y15), each
// product rounded, stored at dst; the value stays in Y(v).
func (a *asm) ssmRow(s, b string, xd int, dst string, v, t int) {
	a.l("VMULPS (%s)(R9*1), Y15, Y%d", s, v)
	a.l("VMULPS %s, Y%d, Y%d", b, xd, t)
	a.l("VADDPS Y%d, Y%d, Y%d", t, v, v)
	a.l("VMOVUPS Y%d, (%s)(R9*1)", v, dst)
}

func (a *asm) ssmStepX86() {
	a.textX86("ssmStepAVX2", "(dst, src, x, B, C, y *float32, rows, n int, dt, dA float32)", "NOSPLIT", "$0-72",
		"One Mamba-2 head's scan step (SSMStep) with outputs, rows even and n a\nmultiple of 8, two rows at a time: per row v = src·dA + B·(x·dt) (each\nproduct rounded: VMULPS, then VADDPS, no FMA), stored, and acc += v·C\nin one 8-lane accumulator (lane = k mod 8); y = ((l0+l4)+(l1+l5)) +\n((l2+l6)+(l3+l7)): the generic order, so the same bits.")
	for _, s := range []string{"MOVQ dst+0(FP), DI", "MOVQ src+8(FP), SI", "MOVQ x+16(FP), R10", "MOVQ B+24(FP), BX",
		"MOVQ C+32(FP), DX", "MOVQ y+40(FP), R11", "MOVQ rows+48(FP), R12", "MOVQ n+56(FP), R13", "MOVQ R13, R14",
		"SHLQ $2, R14 // row stride in bytes", "VMOVSS dt+64(FP), X12", "VBROADCASTSS dA+68(FP), Y15"} {
		a.l("%s", s)
	}
	a.b.WriteString("\n")
	a.label("rows2", false)
	a.xdt(0, 0, 14)
	a.xdt(4, 1, 13)
	a.l("VXORPS Y0, Y0, Y0")
	a.l("VXORPS Y1, Y1, Y1")
	a.l("LEAQ (SI)(R14*1), CX // src row p+1")
	a.l("LEAQ (DI)(R14*1), AX // dst row p+1")
	a.l("MOVQ R13, R8")
	a.l("XORQ R9, R9")
	a.label("k8", true)
	a.l("VMOVUPS (BX)(R9*1), Y2")
	a.l("VMOVUPS (DX)(R9*1), Y3")
	for i, row := range []struct {
		s, d     string
		xd, v, t int
	}{{"SI", "DI", 14, 4, 5}, {"CX", "AX", 13, 6, 7}} {
		a.ssmRow(row.s, "Y2", row.xd, row.d, row.v, row.t)
		a.l("VMULPS Y3, Y%d, Y%d", row.v, row.v)
		a.l("VADDPS Y%d, Y%d, Y%d", row.v, i, i)
	}
	a.l("ADDQ $32, R9")
	a.l("SUBQ $8, R8")
	a.l("JNZ k8")
	a.b.WriteString("\n")
	for i := 0; i < 2; i++ {
		a.hadd8(i, 2+i)
		if i == 0 {
			a.l("VMOVSS X0, (R11)")
		} else {
			a.l("VMOVSS X1, 4(R11)")
		}
	}
	a.b.WriteString("\n")
	a.l("ADDQ $8, R10")
	a.l("ADDQ $8, R11")
	a.l("LEAQ (SI)(R14*2), SI")
	a.l("LEAQ (DI)(R14*2), DI")
	a.l("SUBQ $2, R12")
	a.l("JNZ rows2")
	a.l("VZEROUPPER")
	a.l("RET")
}

func (a *asm) ssmDecayX86() {
	a.textX86("ssmDecayAVX2", "(dst, src, x, B *float32, rows, n int, dt, dA float32)", "NOSPLIT", "$0-56",
		"SSMStep without outputs (a replay): dst = src·dA + B·(x·dt) row by row,\neach product rounded, n a multiple of 8, rows > 0.")
	for _, s := range []string{"MOVQ dst+0(FP), DI", "MOVQ src+8(FP), SI", "MOVQ x+16(FP), R10", "MOVQ B+24(FP), BX",
		"MOVQ rows+32(FP), R12", "MOVQ n+40(FP), R13", "VMOVSS dt+48(FP), X12", "VBROADCASTSS dA+52(FP), Y15"} {
		a.l("%s", s)
	}
	a.b.WriteString("\n")
	a.label("row", false)
	a.xdt(0, 0, 14)
	a.l("MOVQ R13, R8")
	a.l("XORQ R9, R9")
	a.label("d8", true)
	a.ssmRow("SI", "(BX)(R9*1)", 14, "DI", 4, 5)
	a.l("ADDQ $32, R9")
	a.l("SUBQ $8, R8")
	a.l("JNZ d8")
	a.b.WriteString("\n")
	a.l("ADDQ $4, R10")
	a.l("ADDQ R9, SI")
	a.l("ADDQ R9, DI")
	a.l("SUBQ $1, R12")
	a.l("JNZ row")
	a.l("VZEROUPPER")
	a.l("RET")
}

// genSSM writes ssm_amd64.s.
func genSSM(a *asm) {
	a.ssmStepX86()
	a.ssmDecayX86()
}

// deltaPass emits a pass over the row, 16 values (two 8-lane halves,
// accumulators Y0, Y1) per step at R9 (labels l): body(off, reg) per
// half, then the halves' sum reduced into X0.
func (a *asm) deltaPass(l string, body func(off string, r int)) {
	a.l("VXORPS Y0, Y0, Y0")
	a.l("VXORPS Y1, Y1, Y1")
	a.l("MOVQ CX, R8")
	a.l("XORQ R9, R9")
	a.label(l, true)
	body("", 2)
	body("32", 3)
	a.l("ADDQ $64, R9")
	a.l("SUBQ $16, R8")
	a.l("JNZ %s", l)
	a.b.WriteString("\n")
	a.l("VADDPS Y1, Y0, Y0")
	a.hadd8(0, 1)
}

// genDelta writes delta_amd64.s.
func genDelta(a *asm) {
	a.textX86("deltaRowAVX2", "(S, R, q, k *float32, n int, v, beta, decay float32) float32", "NOSPLIT", "$0-60",
		"One row of the gated delta rule, n a multiple of 16: S = decay·R while\nkv = S·k is summed (two 8-lane FMA accumulators), delta = (v-kv)·beta,\nthen S += delta·k (FMA) while S·q is summed the same way. The lanes are\ncombined (acc0+acc1, then the halves, then pairs): one order per row.")
	for _, s := range []string{"MOVQ S+0(FP), DI", "MOVQ R+8(FP), SI", "MOVQ q+16(FP), DX", "MOVQ k+24(FP), BX",
		"MOVQ n+32(FP), CX", "VBROADCASTSS decay+48(FP), Y15"} {
		a.l("%s", s)
	}
	// S = decay·R, kv = S·k.
	a.deltaPass("dr1", func(off string, r int) {
		a.l("VMULPS %s(SI)(R9*1), Y15, Y%d", off, r)
		a.l("VMOVUPS Y%d, %s(DI)(R9*1)", r, off)
		a.l("VFMADD231PS %s(BX)(R9*1), Y%d, Y%d", off, r, r-2)
	})
	a.l("VMOVSS v+40(FP), X2")
	a.l("VSUBSS X0, X2, X2")
	a.l("VMULSS beta+44(FP), X2, X2")
	a.l("VBROADCASTSS X2, Y14")
	// S += delta·k, S·q.
	a.deltaPass("dr2", func(off string, r int) {
		a.l("VMOVUPS %s(DI)(R9*1), Y%d", off, r)
		a.l("VFMADD231PS %s(BX)(R9*1), Y14, Y%d", off, r)
		a.l("VMOVUPS Y%d, %s(DI)(R9*1)", r, off)
		a.l("VFMADD231PS %s(DX)(R9*1), Y%d, Y%d", off, r, r-2)
	})
	a.l("VMOVSS X0, ret+56(FP)")
	a.l("VZEROUPPER")
	a.l("RET")
}

// deltaRow4Pass emits one pass of deltaRow4AVX2 over four rows (row r at
// offset r·n bytes: none, AX, AX*2, R12 from the row pointers), 16 values
// per step (labels l): body(r, m0, m1, t) per row, with m0, m1 the row's
// two memory operands' indexing suffix, t its pair of temporaries (Y8,
// Y9 for even rows, Y10, Y11 for odd ones) and Y(2r), Y(2r+1) its two
// accumulators; ptrs are advanced by 64 bytes per step.
func (a *asm) deltaRow4Pass(l string, ptrs []string, body func(r int, idx string, t int)) {
	for i := 0; i < 8; i++ {
		a.l("VXORPS Y%d, Y%d, Y%d", i, i, i)
	}
	a.l("MOVQ CX, R8")
	a.label(l, true)
	for r, idx := range []string{"", "(AX*1)", "(AX*2)", "(R12*1)"} {
		body(r, idx, 8+2*(r%2))
	}
	for _, p := range ptrs {
		a.l("ADDQ $64, %s", p)
	}
	a.l("SUBQ $16, R8")
	a.l("JNZ %s", l)
}

// genDeltaRows writes deltarows_amd64.s.
func genDeltaRows(a *asm) {
	a.textX86("deltaRow4AVX2", "(S, R, q, k *float32, n int, v *float32, beta, decay float32, o *float32)", "NOSPLIT", "$0-64",
		"Four consecutive rows (row r at S+r·n, R+r·n) of the gated delta rule,\nn a multiple of 16, each row by exactly deltaRowAVX2's operations in its\norder (the same two 8-lane FMA accumulators per row, the same lane\ncombination): o[r] and the rows are deltaRowAVX2's bits. The rows only\nshare the loads of k and q and overlap their dependency chains (one row\nalone waits on its accumulators' FMA latency).")
	for _, s := range []string{"MOVQ S+0(FP), DI", "MOVQ R+8(FP), SI", "MOVQ k+24(FP), BX", "MOVQ n+32(FP), CX",
		"MOVQ CX, AX", "SHLQ $2, AX", "LEAQ (AX)(AX*2), R12", "VBROADCASTSS decay+52(FP), Y15"} {
		a.l("%s", s)
	}
	// S = decay·R, kv_r = S·k.
	a.deltaRow4Pass("d4a", []string{"SI", "DI", "BX"}, func(r int, idx string, t int) {
		a.l("VMULPS (SI)%s, Y15, Y%d", idx, t)
		a.l("VMULPS 32(SI)%s, Y15, Y%d", idx, t+1)
		a.l("VMOVUPS Y%d, (DI)%s", t, idx)
		a.l("VMOVUPS Y%d, 32(DI)%s", t+1, idx)
		a.l("VFMADD231PS (BX), Y%d, Y%d", t, 2*r)
		a.l("VFMADD231PS 32(BX), Y%d, Y%d", t+1, 2*r+1)
	})
	a.comment("delta_r = (v[r] - kv_r)·beta, as deltaRowAVX2 combines its lanes.")
	a.l("MOVQ v+40(FP), R9")
	for r := 0; r < 4; r++ {
		a.l("VADDPS Y%d, Y%d, Y%d", 2*r+1, 2*r, 2*r)
		a.hadd8(2*r, 2*r+1)
		if r == 0 {
			a.l("VMOVSS (R9), X%d", 8+r)
		} else {
			a.l("VMOVSS %d(R9), X%d", 4*r, 8+r)
		}
		a.l("VSUBSS X%d, X%d, X%d", 2*r, 8+r, 8+r)
		a.l("VMULSS beta+48(FP), X%d, X%d", 8+r, 8+r)
		a.l("VBROADCASTSS X%d, Y%d", 8+r, 12+r)
	}
	a.b.WriteString("\n")
	a.l("MOVQ S+0(FP), DI")
	a.l("MOVQ q+16(FP), DX")
	a.l("MOVQ k+24(FP), BX")
	// S += delta_r·k, o_r = S·q.
	a.deltaRow4Pass("d4b", []string{"DI", "DX", "BX"}, func(r int, idx string, t int) {
		a.l("VMOVUPS (DI)%s, Y%d", idx, t)
		a.l("VMOVUPS 32(DI)%s, Y%d", idx, t+1)
		a.l("VFMADD231PS (BX), Y%d, Y%d", 12+r, t)
		a.l("VFMADD231PS 32(BX), Y%d, Y%d", 12+r, t+1)
		a.l("VMOVUPS Y%d, (DI)%s", t, idx)
		a.l("VMOVUPS Y%d, 32(DI)%s", t+1, idx)
		a.l("VFMADD231PS (DX), Y%d, Y%d", t, 2*r)
		a.l("VFMADD231PS 32(DX), Y%d, Y%d", t+1, 2*r+1)
	})
	a.b.WriteString("\n")
	a.l("MOVQ o+56(FP), R9")
	for r := 0; r < 4; r++ {
		a.l("VADDPS Y%d, Y%d, Y%d", 2*r+1, 2*r, 2*r)
		a.hadd8(2*r, 2*r+1)
		if r == 0 {
			a.l("VMOVSS X0, (R9)")
		} else {
			a.l("VMOVSS X%d, %d(R9)", 2*r, 4*r)
		}
	}
	a.l("VZEROUPPER")
	a.l("RET")
}
