package main

import "fmt"

// The amd64 integer value sum over a Q8_0 cache (attnv8_amd64.s; neon's
// attnv8.go): the transposition of a block of value rows into quads of
// four positions (avx2, shared by both sets) and one row's quantized
// weights dotted with them, VPMADDUBSW/VPMADDWD on avx2 and VPDPBUSD on
// avx512vnni, ymm registers both.

// transposeV8X86 emits transposeV8AVX2.
func (a *asm) transposeV8X86() {
	a.textX86("transposeV8AVX2", "(vt *byte, dv *float32, v *byte, vStride, nq, nbv int, tab *float32)", "NOSPLIT", "$0-56",
		"For nq >= 1 quads of four value rows (vStride bytes apart) and each of\nthe nbv >= 1 blocks c: the four rows' 32 quants interleaved by byte into\nvt[((q/8*nbv+c)*8+q%8)*128:] and their scales (tab) into\ndv[(q/8*nbv+c)*32+4*(q%8)+j].")
	for _, s := range []string{"MOVQ vt+0(FP), DI", "MOVQ dv+8(FP), SI", "MOVQ vStride+24(FP), DX", "MOVQ nbv+40(FP), R9",
		"MOVQ tab+48(FP), BX", "XORQ CX, CX // q"} {
		a.l("%s", s)
	}
	a.b.WriteString("\n")
	a.label("quad", false)
	a.l("// R10 the quad's vt, R11 its dv: (q/8)*nbv blocks on, plus q%%8 quads")
	for _, s := range []string{"MOVQ CX, AX", "SHRQ $3, AX", "IMULQ R9, AX", "MOVQ CX, R12", "ANDQ $7, R12",
		"MOVQ AX, R10", "SHLQ $10, R10", "MOVQ R12, R13", "SHLQ $7, R13", "ADDQ R13, R10", "ADDQ DI, R10",
		"MOVQ AX, R11", "SHLQ $7, R11", "SHLQ $4, R12", "ADDQ R12, R11", "ADDQ SI, R11"} {
		a.l("%s", s)
	}
	a.l("// R12..R15 the four rows")
	for _, s := range []string{"MOVQ CX, R12", "SHLQ $2, R12", "IMULQ DX, R12", "ADDQ v+16(FP), R12",
		"LEAQ (R12)(DX*1), R13", "LEAQ (R13)(DX*1), R14", "LEAQ (R14)(DX*1), R15", "MOVQ R9, R8"} {
		a.l("%s", s)
	}
	a.b.WriteString("\n")
	a.label("block", false)
	rows := []string{"R12", "R13", "R14", "R15"}
	for j, r := range rows {
		a.l("MOVWLZX (%s), AX", r)
		a.l("MOVL (BX)(AX*4), AX")
		if j == 0 {
			a.l("MOVL AX, (R11)")
		} else {
			a.l("MOVL AX, %d(R11)", 4*j)
		}
	}
	// Each half block of 16 quants (at off past the scale) of the four
	// rows interleaved by byte, then by word: 64 bytes at dst.
	for _, h := range [][2]int{{2, 0}, {18, 64}} {
		off, dst := h[0], h[1]
		for j, r := range rows {
			a.l("VMOVDQU %d(%s), X%d", off, r, j)
		}
		a.l("VPUNPCKLBW X1, X0, X4")
		a.l("VPUNPCKHBW X1, X0, X5")
		a.l("VPUNPCKLBW X3, X2, X6")
		a.l("VPUNPCKHBW X3, X2, X7")
		a.l("VPUNPCKLWD X6, X4, X8")
		a.l("VPUNPCKHWD X6, X4, X9")
		a.l("VPUNPCKLWD X7, X5, X10")
		a.l("VPUNPCKHWD X7, X5, X11")
		for i := 0; i < 4; i++ {
			if dst+16*i == 0 {
				a.l("VMOVDQU X%d, (R10)", 8+i)
			} else {
				a.l("VMOVDQU X%d, %d(R10)", 8+i, dst+16*i)
			}
		}
	}
	for _, s := range []string{"ADDQ $1024, R10", "ADDQ $128, R11", "ADDQ $34, R12", "ADDQ $34, R13", "ADDQ $34, R14",
		"ADDQ $34, R15", "DECQ R8", "JNZ block", "INCQ CX", "CMPQ CX, nq+32(FP)", "JLT quad", "RET"} {
		a.l("%s", s)
	}
}

// sumV8X86 emits sumV8AVX2 or sumV8VNNI.
func (a *asm) sumV8X86(t x86Tier) {
	name := "sumV8" + t.suffix
	doc := "out[32c+i] += d*sum_t q[t]*v[t][32c+i] for the groups g0..g0+ng-1 (ng >=\n1) and blocks c < nbv: VPMADDUBSW pairs (at most 2*127*128, exact in 16\nbits), VPMADDWD by ones to int32."
	if t.vnni {
		doc = "sumV8AVX2 with VPDPBUSD."
	}
	a.textX86(name, "(out, w *float32, vt *byte, dv *float32, g0, ng, nbv int)", "NOSPLIT", "$32-56", doc)
	// DI out, SI the first group's weights, DX vt and R8 dv at its first
	// block, CX ng, R9 nbv; X14 127, X13 float32(1/127).
	for _, s := range []string{"MOVQ out+0(FP), DI", "MOVQ w+8(FP), SI", "MOVQ vt+16(FP), DX", "MOVQ dv+24(FP), R8",
		"MOVQ g0+32(FP), AX", "MOVQ ng+40(FP), CX", "MOVQ nbv+48(FP), R9", "MOVQ AX, R12", "SHLQ $7, R12",
		"ADDQ R12, SI", "IMULQ R9, AX", "MOVQ AX, R12", "SHLQ $10, R12", "ADDQ R12, DX", "SHLQ $7, AX", "ADDQ AX, R8",
		"MOVL $0x42fe0000, AX", "VMOVD AX, X14", "MOVL $0x3c010204, AX", "VMOVD AX, X13"} {
		a.l("%s", s)
	}
	if !t.vnni {
		a.l("VPCMPEQW Y15, Y15, Y15")
		a.l("VPSRLW $15, Y15, Y15 // int16 ones")
	}
	a.b.WriteString("\n")
	a.label("group", false)
	a.l("MOVQ DI, R11")
	a.l("MOVQ R9, R10")
	a.b.WriteString("\n")
	a.label("block", false)
	a.sumV8Quant()
	for i := 8; i < 12; i++ {
		a.l("VPXOR Y%d, Y%d, Y%d", i, i, i)
	}
	// Quad q's weights are the dword at 0(SP) in order 0 2 4 6 1 3 5 7.
	for q := 0; q < 8; q++ {
		o := 4*(q/2) + 16*(q%2)
		if o == 0 {
			a.l("VPBROADCASTD (SP), Y12")
		} else {
			a.l("VPBROADCASTD %d(SP), Y12", o)
		}
		mem := func(i int) string {
			if 128*q+32*i == 0 {
				return "(DX)"
			}
			return fmt.Sprintf("%d(DX)", 128*q+32*i)
		}
		if t.vnni {
			for i := 0; i < 4; i++ {
				a.l("VPDPBUSD %s, Y12, Y%d", mem(i), 8+i)
			}
			continue
		}
		for h := 0; h < 2; h++ {
			a.l("VPMADDUBSW %s, Y12, Y4", mem(2*h))
			a.l("VPMADDUBSW %s, Y12, Y5", mem(2*h+1))
			a.l("VPMADDWD Y15, Y4, Y4")
			a.l("VPMADDWD Y15, Y5, Y5")
			a.l("VPADDD Y4, Y%d, Y%d", 8+2*h, 8+2*h)
			a.l("VPADDD Y5, Y%d, Y%d", 9+2*h, 9+2*h)
		}
	}
	// out += d·sums.
	for i := 8; i < 12; i++ {
		a.l("VCVTDQ2PS Y%d, Y%d", i, i)
	}
	for i := 8; i < 12; i++ {
		a.l("VMULPS Y6, Y%d, Y%d", i, i)
	}
	for i := 8; i < 12; i++ {
		if i == 8 {
			a.l("VADDPS (R11), Y8, Y8")
		} else {
			a.l("VADDPS %d(R11), Y%d, Y%d", 32*(i-8), i, i)
		}
	}
	for i := 8; i < 12; i++ {
		if i == 8 {
			a.l("VMOVUPS Y8, (R11)")
		} else {
			a.l("VMOVUPS Y%d, %d(R11)", i, 32*(i-8))
		}
	}
	a.b.WriteString("\n")
	a.label("next", false)
	for _, s := range []string{"ADDQ $1024, DX", "ADDQ $128, R8", "ADDQ $128, R11", "DECQ R10", "JNZ block",
		"ADDQ $128, SI", "DECQ CX", "JNZ group", "VZEROUPPER", "RET"} {
		a.l("%s", s)
	}
}

// sumV8Quant leaves in 0(SP) the row's quantized weights of the group and
// block at SI (weights) and R8 (scales), in dword order 0 2 4 6 1 3 5 7 of
// the quads, and d = amax*float32(1/127) in Y6; it jumps to next when amax
// is at most 0x1p-120 (v8Tiny) or NaN.
func (a *asm) sumV8Quant() {
	for i := 0; i < 4; i++ {
		if i == 0 {
			a.l("VMOVUPS (SI), Y0")
		} else {
			a.l("VMOVUPS %d(SI), Y%d", 32*i, i)
		}
	}
	for i := 0; i < 4; i++ {
		if i == 0 {
			a.l("VMULPS (R8), Y0, Y0")
		} else {
			a.l("VMULPS %d(R8), Y%d, Y%d", 32*i, i, i)
		}
	}
	for _, s := range []string{"VMAXPS Y1, Y0, Y4", "VMAXPS Y3, Y2, Y5", "VMAXPS Y5, Y4, Y4", "VEXTRACTF128 $1, Y4, X5",
		"VMAXPS X5, X4, X4", "VPERMILPS $0x4e, X4, X5", "VMAXPS X5, X4, X4", "VPERMILPS $0xb1, X4, X5",
		"VMAXPS X5, X4, X4", "MOVL $0x03800000, AX", "VMOVD AX, X5", "VUCOMISS X5, X4", "JBE next", "VMULSS X13, X4, X6",
		"VDIVSS X4, X14, X7", "VBROADCASTSS X6, Y6", "VBROADCASTSS X7, Y7"} {
		a.l("%s", s)
	}
	for i := 0; i < 4; i++ {
		a.l("VMULPS Y7, Y%d, Y%d", i, i)
	}
	for i := 0; i < 4; i++ {
		a.l("VCVTPS2DQ Y%d, Y%d", i, i)
	}
	a.l("VPACKSSDW Y1, Y0, Y0")
	a.l("VPACKSSDW Y3, Y2, Y2")
	a.l("VPACKUSWB Y2, Y0, Y0")
	a.l("VMOVDQU Y0, (SP)")
}

// genAttnV8 writes attnv8_amd64.s.
func genAttnV8(a *asm) {
	a.comment("The integer value sum over a Q8_0 cache (attnv8.go): the transposition\nof a block of value rows into quads of four positions, and one row's\nquantized weights dotted with them (VPMADDUBSW/VPMADDWD on avx2,\nVPDPBUSD on avx512vnni). The weights' quants are in [0, 127], the\nunsigned operand of both; the integer sums are exact, so both give the\nreference's bits.")
	a.transposeV8X86()
	a.sumV8X86(tierAVX2)
	a.sumV8X86(tierVNNI)
}
