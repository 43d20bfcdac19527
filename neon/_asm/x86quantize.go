package main

import "fmt"

// The avx2 set's activation quantization (quantize_amd64.s).

const quantizeDoc = `AVX2 activation quantization. Both kernels compute exactly what the
generic code does (ggml's reference quantizers), bit for bit: the same
float32 divisions and products, roundf as trunc(v + copysign(0.49999997, v))
(exact for |v| < 2^24) and nearest_int as VCVTPS2DQ (round half to even
in the default MXCSR mode the Go runtime keeps).`

// hmax8 leaves in X8 lane 0 the maximum of the 8 lanes of Y8 (X9
// clobbered).
func (a *asm) hmax8() {
	a.l("VEXTRACTF128 $1, Y8, X9")
	a.l("VMAXPS X9, X8, X8")
	a.l("VMOVHLPS X8, X8, X9")
	a.l("VMAXPS X9, X8, X8")
	a.l("VMOVSHDUP X8, X9")
	a.l("VMAXPS X9, X8, X8")
}

// packQ8 packs the int32 lanes of Y0..Y3 to 32 int8 in order (Y13
// packPerm) and stores them at dst.
func (a *asm) packQ8(dst string) {
	a.l("VPACKSSDW Y1, Y0, Y0")
	a.l("VPACKSSDW Y3, Y2, Y2")
	a.l("VPACKSSWB Y2, Y0, Y0")
	a.l("VPERMD Y0, Y13, Y0")
	a.l("VMOVDQU Y0, %s", dst)
}

func (a *asm) quantizeQ8_0() {
	a.textX86("quantizeQ8_0AVX2", "(dst *byte, x *float32, nb int)", "NOSPLIT", "$0-24")
	a.l("MOVQ dst+0(FP), DI")
	a.l("MOVQ x+8(FP), SI")
	a.l("MOVQ nb+16(FP), CX")
	a.l("VMOVDQU absMask<>(SB), Y7")
	a.l("VBROADCASTSS f127<>(SB), Y6")
	a.l("VBROADCASTSS f1<>(SB), Y5")
	a.l("VBROADCASTSS halfDown<>(SB), Y4")
	a.l("VMOVDQU packPerm<>(SB), Y13")
	a.l("VXORPS Y11, Y11, Y11")
	a.l("TESTQ CX, CX")
	a.l("JZ q80done")
	a.label("q80loop", true)
	for k := 0; k < 4; k++ {
		a.l("VMOVUPS %d(SI), %s", 32*k, y(k))
	}
	// amax over the block, then in every lane.
	a.l("VANDPS Y7, Y0, Y8")
	for k := 1; k < 4; k++ {
		a.l("VANDPS Y7, %s, Y9", y(k))
		a.l("VMAXPS Y9, Y8, Y8")
	}
	a.hmax8()
	a.l("VBROADCASTSS X8, Y8")
	// d = amax/127, id = d != 0 ? 1/d : 0.
	a.l("VDIVPS Y6, Y8, Y10")
	a.l("VDIVPS Y10, Y5, Y12")
	a.l("VCMPPS $4, Y11, Y10, Y8")
	a.l("VANDPS Y8, Y12, Y12")
	a.l("VCVTPS2PH $0, X10, X10")
	a.l("VPEXTRW $0, X10, AX")
	a.l("MOVW AX, (DI)")
	for k := 0; k < 4; k++ {
		a.l("VMULPS Y12, %s, %s", y(k), y(k))
	}
	// roundf: half away from zero (Y7 abs mask, Y4 0.49999997), to int32.
	for k := 0; k < 4; k++ {
		v := y(k)
		a.l("VANDNPS %s, Y7, Y9", v)
		a.l("VORPS Y4, Y9, Y9")
		a.l("VADDPS Y9, %s, %s", v, v)
		a.l("VCVTTPS2DQ %s, %s", v, v)
	}
	a.packQ8("2(DI)")
	a.b.WriteString("\n")
	a.l("ADDQ $128, SI")
	a.l("ADDQ $34, DI")
	a.l("DECQ CX")
	a.l("JNZ q80loop")
	a.b.WriteString("\n")
	a.label("q80done", false)
	a.l("VZEROUPPER")
	a.l("RET")
}

func (a *asm) quantizeQ8_K() {
	a.textX86("quantizeQ8_KAVX2", "(dst *byte, x *float32, nb int)", "NOSPLIT", "$0-24")
	a.l("MOVQ dst+0(FP), DI")
	a.l("MOVQ x+8(FP), SI")
	a.l("MOVQ nb+16(FP), CX")
	a.l("VMOVDQU absMask<>(SB), Y7")
	a.l("VPBROADCASTD i127<>(SB), Y6")
	a.l("VMOVDQU packPerm<>(SB), Y13")
	a.l("TESTQ CX, CX")
	a.l("JZ q8kdone")
	a.label("q8kloop", true)
	// amax over the 256 values.
	a.l("VANDPS (SI), Y7, Y8")
	a.l("MOVQ $8, AX")
	a.b.WriteString("\n")
	a.label("q8kmax", false)
	a.l("VANDPS (SI)(AX*4), Y7, Y9")
	a.l("VMAXPS Y9, Y8, Y8")
	a.l("ADDQ $8, AX")
	a.l("CMPQ AX, $256")
	a.l("JLT q8kmax")
	a.b.WriteString("\n")
	a.hmax8()
	a.l("VXORPS X9, X9, X9")
	a.l("VUCOMISS X9, X8")
	a.l("JEQ q8kzero")
	a.l("VBROADCASTSS X8, Y8")
	// max: the first value whose magnitude is amax.
	a.l("XORQ AX, AX")
	a.b.WriteString("\n")
	a.label("q8kfind", false)
	a.l("VANDPS (SI)(AX*4), Y7, Y9")
	a.l("VCMPPS $0, Y8, Y9, Y9")
	a.l("VMOVMSKPS Y9, DX")
	a.l("TESTL DX, DX")
	a.l("JNZ q8kfound")
	a.l("ADDQ $8, AX")
	a.l("CMPQ AX, $256")
	a.l("JLT q8kfind")
	a.l("JMP q8kzero // unreachable unless NaN")
	a.b.WriteString("\n")
	a.label("q8kfound", false)
	a.l("BSFL DX, DX")
	a.l("ADDQ DX, AX")
	a.l("VMOVSS (SI)(AX*4), X9")
	// iscale = -127/max, d = 1/iscale.
	a.l("VMOVSS fm127<>(SB), X10")
	a.l("VDIVSS X9, X10, X10")
	a.l("VMOVSS f1<>(SB), X11")
	a.l("VDIVSS X10, X11, X11")
	a.l("VMOVSS X11, (DI)")
	a.l("VBROADCASTSS X10, Y10")
	// 32 floats at a time into 32 bytes at 4+off/4(DI).
	for off := 0; off < 1024; off += 128 {
		for k := 0; k < 4; k++ {
			a.l("VMULPS %d(SI), Y10, %s", off+32*k, y(k))
		}
		for k := 0; k < 4; k++ {
			a.l("VCVTPS2DQ %s, %s", y(k), y(k))
		}
		for k := 0; k < 4; k++ {
			a.l("VPMINSD Y6, %s, %s", y(k), y(k))
		}
		a.packQ8(fmt.Sprintf("%d(DI)", 4+off/4))
	}
	// bsums: 16 sums of 16 quants as int16; per 4 quant vectors the int32
	// sums of each 4 bytes (lanes 0..3 bytes 0..15, 4..7 bytes 16..31)
	// reduced to the 8 bsums in order.
	a.l("VMOVDQU onesU8<>(SB), Y5")
	a.l("VMOVDQU ones16q<>(SB), Y4")
	for h, out := range []string{"Y14", "Y15"} {
		for k := 0; k < 4; k++ {
			d := y(k)
			a.l("VMOVDQU %d(DI), %s", 4+32*(4*h+k), d)
			a.l("VPMADDUBSW %s, Y5, %s", d, d)
			a.l("VPMADDWD Y4, %s, %s", d, d)
		}
		a.l("VPHADDD Y1, Y0, Y0")
		a.l("VPHADDD Y3, Y2, Y2")
		a.l("VPHADDD Y2, Y0, %s", out)
		a.l("VPERMD %s, Y13, %s", out, out)
	}
	a.l("VPACKSSDW Y15, Y14, Y14")
	a.l("VPERMQ $0xd8, Y14, Y14")
	a.l("VMOVDQU Y14, 260(DI)")
	a.l("JMP q8knext")
	a.b.WriteString("\n")
	a.label("q8kzero", false)
	a.l("VPXOR Y0, Y0, Y0")
	for off := 0; off <= 256; off += 32 {
		a.l("VMOVDQU Y0, %d(DI)", off)
	}
	a.l("VMOVDQU Y0, 260(DI)")
	a.b.WriteString("\n")
	a.label("q8knext", false)
	a.l("ADDQ $1024, SI")
	a.l("ADDQ $292, DI")
	a.l("DECQ CX")
	a.l("JNZ q8kloop")
	a.b.WriteString("\n")
	a.label("q8kdone", false)
	a.l("VZEROUPPER")
	a.l("RET")
}

// genQuantize writes quantize_amd64.s.
func genQuantize(a *asm) {
	a.b.WriteString("\n")
	a.doc(quantizeDoc)
	a.b.WriteString("\n")
	a.splat("absMask", 0x7fffffff7fffffff, 32)
	a.b.WriteString("\n// _mm256_packs order fix: dwords 0,4,1,5,2,6,3,7.\n")
	a.data("packPerm", 0x0000000400000000, 0x0000000500000001, 0x0000000600000002, 0x0000000700000003)
	for _, c := range []struct{ name, v string }{{"f127", "127.0"}, {"fm127", "-127.0"}, {"f1", "1.0"}, {"halfDown", "0x3effffff"}, {"i127", "127"}} {
		a.b.WriteString("\nDATA " + c.name + "<>+0(SB)/4, $" + c.v + "\nGLOBL " + c.name + "<>(SB), RODATA|NOPTR, $4\n")
	}
	a.b.WriteString("\n")
	a.splat("onesU8", 0x0101010101010101, 32)
	a.b.WriteString("\n")
	a.splat("ones16q", 0x0001000100010001, 32)
	a.quantizeQ8_0()
	a.quantizeQ8_K()
}
