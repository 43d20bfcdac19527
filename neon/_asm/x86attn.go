package main

import "fmt"

// The amd64 attention kernels (attn_amd64.s, attnq8_amd64.s): the tiled
// attention's transposed keys, scores and value sums in the avx2 and
// avx512vnni sets, over float32, F16 and Q8_0 values. The value sums (seven
// kernels: register width, one or four query rows, the values' type) and
// the transposed scores (three) each come from one function.

const attnDoc = `Tiled attention kernels (AVX2+FMA+F16C, and AVX-512 for the avx512vnni
set). A key block is attnBlock = 64 keys; the tile converts it once to
float32, transposed (kt[d][t]), and every query row of the tile then
scores all 64 keys with broadcast FMAs (no horizontal sums): score t =
(sum over d in order of q[d]*kt[d][t], fused) * scale, lane t alone, so a
score does not depend on the other keys or rows.`

// attnKTX86 emits attnKTAVX2.
func (a *asm) attnKTX86() {
	a.textX86("attnKTAVX2", "(kt *float32, k *uint16, hd8 int)", "NOSPLIT", "$0-24",
		"kt[d*64+t] = k[t*hd+d] (F16 to float32) for t < 64, d < 8*hd8: 8x8\nsquares converted and transposed in registers.")
	a.l("MOVQ kt+0(FP), DI")
	a.l("MOVQ k+8(FP), SI")
	a.l("MOVQ hd8+16(FP), R8")
	a.l("MOVQ R8, R9")
	a.l("SHLQ $4, R9 // bytes per key row (hd*2)")
	a.l("LEAQ (R9)(R9*2), R10 // 3 rows")
	a.l("MOVQ R9, R13")
	a.l("SHLQ $6, R13 // a block of keys (64 rows)")
	a.l("XORQ CX, CX // t0 = 0, 8, ..., 56")
	a.b.WriteString("\n")
	a.label("ktkeys", false)
	// The same 8 keys of the next block, one line at a time: a cache
	// block's pages are 4 KiB, where the hardware stops its streams (a
	// prefetch does not fault past the cache's end).
	a.l("LEAQ (SI)(R13*1), R12")
	a.l("MOVQ R8, R11")
	a.l("SHLQ $1, R11 // 8 rows of 16*hd8 bytes: 2*hd8 lines")
	a.b.WriteString("\n")
	a.label("ktpf", false)
	a.l("PREFETCHT0 (R12)")
	a.l("ADDQ $64, R12")
	a.l("DECQ R11")
	a.l("JNZ ktpf")
	a.l("MOVQ SI, DX // k row t0, column d0")
	a.l("MOVQ DI, BX // kt[d0*64 + t0]")
	a.l("MOVQ R8, AX")
	a.b.WriteString("\n")
	a.label("ktsq", false)
	a.l("LEAQ (DX)(R9*4), R11")
	rows := []string{"(DX)", "(DX)(R9*1)", "(DX)(R9*2)", "(DX)(R10*1)", "(R11)", "(R11)(R9*1)", "(R11)(R9*2)", "(R11)(R10*1)"}
	for r, m := range rows {
		a.l("VCVTPH2PS %s, %s", m, y(r))
	}
	a.transpose8([4]string{"VUNPCKLPS", "VUNPCKHPS", "VSHUFPS $0x44,", "VSHUFPS $0xEE,"}, 0, 8)
	for i := 0; i < 8; i++ {
		imm := "0x20"
		if i >= 4 {
			imm = "0x31"
		}
		a.l("VPERM2F128 $%s, %s, %s, %s", imm, y(4+i%4), y(i%4), y(8+i))
	}
	for i := 0; i < 8; i++ {
		if i == 0 {
			a.l("VMOVUPS Y8, (BX)")
		} else {
			a.l("VMOVUPS %s, %d(BX)", y(8+i), 256*i)
		}
	}
	a.l("ADDQ $16, DX // next 8 columns")
	a.l("ADDQ $2048, BX // next 8 kt rows")
	a.l("DECQ AX")
	a.l("JNZ ktsq")
	a.l("LEAQ (SI)(R9*8), SI // next 8 keys")
	a.l("ADDQ $32, DI")
	a.l("ADDQ $8, CX")
	a.l("CMPQ CX, $64")
	a.l("JLT ktkeys")
	a.l("VZEROUPPER")
	a.l("RET")
}

// transpose8 runs the first two steps of an 8x8 dword transposition
// within 128-bit lanes on Y(r)..Y(r+7), in place, through Y(t)..Y(t+7):
// ops are the dword interleaves (low, high) and the qword ones (or the
// shuffles that act as them), each with its immediate and comma if any.
func (a *asm) transpose8(ops [4]string, r, t int) {
	for i := 0; i < 4; i++ {
		a.l("%s %s, %s, %s", ops[0], y(r+2*i+1), y(r+2*i), y(t+2*i))
		a.l("%s %s, %s, %s", ops[1], y(r+2*i+1), y(r+2*i), y(t+2*i+1))
	}
	for i := 0; i < 4; i++ {
		lo, hi := t+(i/2)*4+i%2, t+2+(i/2)*4+i%2
		a.l("%s %s, %s, %s", ops[2], y(hi), y(lo), y(r+2*i))
		a.l("%s %s, %s, %s", ops[3], y(hi), y(lo), y(r+2*i+1))
	}
}

// memOff returns off(base)idx, or (base)idx for off 0.
func memOff(off int, base, idx string) string {
	if off == 0 {
		return "(" + base + ")" + idx
	}
	return fmt.Sprintf("%d(%s)%s", off, base, idx)
}

// scoresTX86 emits attnScoresT<suffix>: sc[r*64+t] = (fma over d of
// q[r*hd+d]*kt[d*64+t]) * scale for t < 64 and rows r (1 or 4), on
// registers of width w: the 64 lanes of a row in 64*8/w accumulators.
func (a *asm) scoresTX86(name string, w, rows int, doc string) {
	a.textX86(name, "(sc *float32, q *float32, kt *float32, hd int, scale float32)", "NOSPLIT", "$0-36", doc)
	a.l("MOVQ sc+0(FP), DI")
	a.l("MOVQ q+8(FP), SI")
	a.l("MOVQ kt+16(FP), DX")
	a.l("MOVQ hd+24(FP), CX")
	if rows == 4 {
		a.l("MOVQ CX, R8")
		a.l("SHLQ $2, R8 // bytes per q row")
		a.l("LEAQ (R8)(R8*2), R9 // 3 rows")
	}
	n := 2048 / w // accumulators per row
	vb := w / 8   // bytes per register
	for i := 0; i < n*rows; i++ {
		a.l("VXORPS %s, %s, %s", vreg(w, i), vreg(w, i), vreg(w, i))
	}
	p := fmt.Sprintf("st%d%d", w, rows)
	a.label(p+"loop", true)
	qrow := []string{"", "(R8*1)", "(R8*2)", "(R9*1)"}
	if rows == 1 {
		b := vreg(w, 8)
		a.l("VBROADCASTSS (SI), %s", b)
		for i := 0; i < n; i++ {
			a.l("VFMADD231PS %s, %s, %s", memOff(vb*i, "DX", ""), b, vreg(w, i))
		}
	} else {
		for i := 0; i < n; i++ {
			a.l("VMOVUPS %s, %s", memOff(vb*i, "DX", ""), vreg(w, 16+i))
		}
		for r := 0; r < rows; r++ {
			a.l("VBROADCASTSS (SI)%s, %s", qrow[r], vreg(w, 20+r))
		}
		for r := 0; r < rows; r++ {
			for i := 0; i < n; i++ {
				a.l("VFMADD231PS %s, %s, %s", vreg(w, 16+i), vreg(w, 20+r), vreg(w, n*r+i))
			}
		}
	}
	a.l("ADDQ $4, SI")
	a.l("ADDQ $256, DX")
	a.l("DECQ CX")
	a.l("JNZ %sloop", p)
	s := vreg(w, 8)
	if rows == 4 {
		s = vreg(w, 16)
	}
	a.l("VBROADCASTSS scale+32(FP), %s", s)
	for i := 0; i < n*rows; i++ {
		a.l("VMULPS %s, %s, %s", s, vreg(w, i), vreg(w, i))
	}
	for i := 0; i < n*rows; i++ {
		a.l("VMOVUPS %s, %s", vreg(w, i), memOff(vb*i, "DI", ""))
	}
	a.l("VZEROUPPER")
	a.l("RET")
}

// Value types of the value sums.
const (
	valF32 = iota
	valF16
	valQ8
)

// valueSumX86 emits a value sum: out[r*hd+i] = fma(w[r*64+t], x[t][i],
// out[...]) for the rows r (1 or 4), t = 0..rows-1 in order, 64 outputs
// of every row in registers of width w through all value rows, then the
// next 64. The values x are float32 rows, F16 rows converted exactly as
// they are loaded, or Q8_0 rows (vStride apart) dequantized as
// dequantQ8_0AVX2 does (float32(q) times the block's scale through the
// fp16 table, one rounded product): the bits of converting them first.
func (a *asm) valueSumX86(name, sig, frame string, w, rows, val int, doc string) {
	a.textX86(name, sig, "NOSPLIT", frame, doc)
	a.l("MOVQ out+0(FP), DI")
	a.l("MOVQ v+16(FP), DX")
	a.l("MOVQ hd64+24(FP), CX")
	// vrow: the register holding the bytes per value row; R10 the bytes
	// per out row (four rows) and R11 three times that.
	vrow := "R10"
	if val == valQ8 {
		a.l("MOVQ vStride+40(FP), R12")
		a.l("MOVQ tab+48(FP), R13")
		vrow = "R12"
	}
	switch {
	case rows == 4 && val == valF16:
		a.l("MOVQ CX, R10")
		a.l("SHLQ $8, R10 // bytes per out row")
		a.l("MOVQ CX, R12")
		a.l("SHLQ $7, R12 // bytes per v row (F16)")
		a.l("LEAQ (R10)(R10*2), R11 // 3 out rows")
		a.l("MOVQ R12, R13")
		a.l("SHLQ $6, R13 // a block of values (64 rows): the next one is prefetched")
		vrow = "R12"
	case rows == 4:
		a.l("MOVQ CX, R10")
		a.l("SHLQ $8, R10 // bytes per out row (and float32 v row)")
		a.l("LEAQ (R10)(R10*2), R11 // 3 out rows")
	case val == valF32:
		a.l("MOVQ CX, R10")
		a.l("SHLQ $8, R10 // bytes per v row")
	case val == valF16:
		a.l("MOVQ CX, R10")
		a.l("SHLQ $7, R10 // bytes per v row (F16)")
	}
	n := 2048 / w // registers per row's 64 outputs
	vb := w / 8
	outRow := []string{"", "(R10*1)", "(R10*2)", "(R11*1)"}
	acc := func(r, i int) string { return vreg(w, n*r+i) }
	p := fmt.Sprintf("vs%s", name)
	a.b.WriteString("\n")
	a.label(p+"chunk", false)
	for r := 0; r < rows; r++ {
		for i := 0; i < n; i++ {
			a.l("VMOVUPS %s, %s", memOff(vb*i, "DI", outRow[r]), acc(r, i))
		}
	}
	a.l("MOVQ w+8(FP), SI")
	a.l("MOVQ rows+32(FP), BX")
	a.l("MOVQ DX, R9")
	a.l("TESTQ BX, BX")
	a.l("JZ %sstore", p)
	a.label(p+"loop", true)
	// The value row in registers (V16..), or memory operands (float32,
	// one row).
	val16 := func(i int) string { return vreg(w, 16+i) }
	switch val {
	case valF32:
		if rows == 4 {
			for i := 0; i < n; i++ {
				a.l("VMOVUPS %s, %s", memOff(vb*i, "R9", ""), val16(i))
			}
		} else {
			val16 = func(i int) string { return memOff(vb*i, "R9", "") }
		}
	case valF16:
		if rows == 4 {
			a.l("PREFETCHT0 (R9)(R13*1)")
			a.l("PREFETCHT0 64(R9)(R13*1)")
		}
		for i := 0; i < n; i++ {
			a.l("VCVTPH2PS %s, %s", memOff(vb/2*i, "R9", ""), val16(i))
		}
	case valQ8:
		// Two Q8_0 blocks: the scales into Z24, Z25.
		for b := 0; b < 2; b++ {
			a.l("MOVWLZX %s, AX", memOff(34*b, "R9", ""))
			a.l("VBROADCASTSS (R13)(AX*4), %s", z(24+b))
		}
		for i := 0; i < 4; i++ {
			a.l("VPMOVSXBD %d(R9), %s", 2+16*i+2*(i/2), z(16+i))
		}
		for i := 0; i < 4; i++ {
			a.l("VCVTDQ2PS %s, %s", z(16+i), z(16+i))
		}
		for i := 0; i < 4; i++ {
			a.l("VMULPS %s, %s, %s", z(24+i/2), z(16+i), z(16+i))
		}
	}
	// The rows' weights broadcast: V8 for one row (ymm works on AVX2),
	// V20.. for four.
	bc := func(r int) string { return vreg(w, 20+r) }
	if rows == 1 {
		bc = func(int) string { return vreg(w, 8) }
	}
	for r := 0; r < rows; r++ {
		a.l("VBROADCASTSS %s, %s", memOff(256*r, "SI", ""), bc(r))
	}
	for r := 0; r < rows; r++ {
		for i := 0; i < n; i++ {
			a.l("VFMADD231PS %s, %s, %s", val16(i), bc(r), acc(r, i))
		}
	}
	a.l("ADDQ $4, SI")
	a.l("ADDQ %s, R9", vrow)
	a.l("DECQ BX")
	a.l("JNZ %sloop", p)
	a.b.WriteString("\n")
	a.label(p+"store", false)
	for r := 0; r < rows; r++ {
		for i := 0; i < n; i++ {
			a.l("VMOVUPS %s, %s", acc(r, i), memOff(vb*i, "DI", outRow[r]))
		}
	}
	a.l("ADDQ $256, DI")
	a.l("ADDQ $%d, DX // the next 64 values of each row", []int{256, 128, 68}[val])
	a.l("DECQ CX")
	a.l("JNZ %schunk", p)
	a.l("VZEROUPPER")
	a.l("RET")
}

func (a *asm) f16ToF32X86() {
	a.textX86("f16ToF32AVX2", "(dst *float32, src *uint16, n8 int)", "NOSPLIT", "$0-24")
	a.l("MOVQ dst+0(FP), DI")
	a.l("MOVQ src+8(FP), SI")
	a.l("MOVQ n8+16(FP), CX")
	a.b.WriteString("\n")
	a.label("cvloop", false)
	a.l("VCVTPH2PS (SI), Y0")
	a.l("VMOVUPS Y0, (DI)")
	a.l("ADDQ $16, SI")
	a.l("ADDQ $32, DI")
	a.l("DECQ CX")
	a.l("JNZ cvloop")
	a.l("VZEROUPPER")
	a.l("RET")
}

func (a *asm) maxF32X86() {
	a.textX86("maxAVX2", "(x *float32, n8 int) float32", "NOSPLIT", "$0-20", "The largest of 8*n8 values (none NaN).")
	a.l("MOVQ x+0(FP), SI")
	a.l("MOVQ n8+8(FP), CX")
	a.l("VMOVUPS (SI), Y0")
	a.l("VMOVAPS Y0, Y1")
	a.l("ADDQ $32, SI")
	a.l("DECQ CX")
	a.l("JZ mxdone")
	a.b.WriteString("\n")
	a.label("mxloop", false)
	for i := 0; i < 2; i++ {
		a.l("VMAXPS (SI), %s, %s", y(i), y(i))
		a.l("ADDQ $32, SI")
		a.l("DECQ CX")
		if i == 0 {
			a.l("JZ mxdone")
		} else {
			a.l("JNZ mxloop")
		}
	}
	a.b.WriteString("\n")
	a.label("mxdone", false)
	a.l("VMAXPS Y1, Y0, Y0")
	a.l("VEXTRACTF128 $1, Y0, X1")
	a.l("VMAXPS X1, X0, X0")
	a.l("VMOVHLPS X0, X0, X1")
	a.l("VMAXPS X1, X0, X0")
	a.l("VMOVSHDUP X0, X1")
	a.l("VMAXSS X1, X0, X0")
	a.l("VZEROUPPER")
	a.l("MOVSS X0, ret+16(FP)")
	a.l("RET")
}

const sumFSig = "(out *float32, w *float32, v *float32, hd64, rows int)"
const sumHSig = "(out *float32, w *float32, v *uint16, hd64, rows int)"
const sumQSig = "(out *float32, w *float32, v *byte, hd64, rows, vStride int, tab *float32)"

// genAttn writes attn_amd64.s.
func genAttn(a *asm) {
	a.b.WriteString("\n")
	a.doc(attnDoc)
	a.attnKTX86()
	a.scoresTX86("attnScoresTAVX2", 256, 1, "sc[t] = (fma over d = 0..hd-1 of q[d]*kt[d*64+t]) * scale, t < 64.")
	a.valueSumX86("attnSumFMAAVX2", sumFSig, "$0-40", 256, 1, valF32,
		"out[i] = fma(w[t], v[t*hd+i], out[i]) for t = 0..rows-1 in order\n(hd = 64*hd64): 64 outputs in Y0..Y7 through all rows, then the next 64.")
	a.f16ToF32X86()
	a.scoresTX86("attnScoresTAVX512", 512, 1, "attnScoresTAVX2 on 512-bit registers (the same fused multiply-adds per\nlane: the same bits).")
	a.valueSumX86("attnSumFMAAVX512", sumFSig, "$0-40", 512, 1, valF32, "attnSumFMAAVX2 on 512-bit registers.")
	a.maxF32X86()
	a.scoresTX86("attnScoresT4AVX512", 512, 4, "attnScoresTAVX512 for four query rows at once (q[r*hd+d], sc[r*64+t]):\neach kt row is loaded once for the four, each lane's fused\nmultiply-adds are those of one row alone (the same bits), and sixteen\nindependent sums keep both FMA pipes busy.")
	a.valueSumX86("attnSumFMA4AVX512", sumFSig, "$0-40", 512, 4, valF32,
		"attnSumFMAAVX512 for four rows at once (out[r*hd+i], w[r*64+t]) over\nthe same values: each v row is loaded once for the four, each lane's\nfused multiply-adds are those of one row alone (the same bits).")
	a.valueSumX86("attnSumF16x4AVX512", sumHSig, "$0-40", 512, 4, valF16,
		"attnSumFMA4AVX512 over F16 values, each converted (exactly) as it is\nloaded: the bits of converting v to float32 first, without the\nfloat32 copy (a decode tile's four rows read each value block once).")
	a.valueSumX86("attnSumF16AVX512", sumHSig, "$0-40", 512, 1, valF16, "attnSumFMAAVX512 over F16 values converted as they are loaded.")
}

func (a *asm) dequantQ8_0X86() {
	a.textX86("dequantQ8_0AVX2", "(dst *float32, src *byte, nb int)", "NOSPLIT", "$0-24",
		"dst[32*b+j] = d*float32(int8(q[j])) for the nb >= 1 blocks of src: the\nscale d from fp16Table (ggml.FP16ToFP32's bits for every half), the\nquants sign-extended and converted exactly, one rounded product each.")
	a.l("MOVQ dst+0(FP), DI")
	a.l("MOVQ src+8(FP), SI")
	a.l("MOVQ nb+16(FP), CX")
	a.l("MOVQ ·fp16Table(SB), R8")
	a.label("loop", true)
	a.l("MOVWLZX (SI), AX")
	a.l("VBROADCASTSS (R8)(AX*4), Y0")
	for i := 0; i < 4; i++ {
		a.l("VPMOVSXBD %d(SI), %s", 2+8*i, y(1+i))
	}
	for i := 0; i < 4; i++ {
		a.l("VCVTDQ2PS %s, %s", y(1+i), y(1+i))
	}
	for i := 0; i < 4; i++ {
		a.l("VMULPS Y0, %s, %s", y(1+i), y(1+i))
	}
	for i := 0; i < 4; i++ {
		a.l("VMOVUPS %s, %s", y(1+i), memOff(32*i, "DI", ""))
	}
	a.l("ADDQ $34, SI")
	a.l("ADDQ $128, DI")
	a.l("DECQ CX")
	a.l("JNZ loop")
	a.l("VZEROUPPER")
	a.l("RET")
}

// keyIdx is the index part of key i's address in a group of eight (AX
// key 0, R8 kStride, R10 3, R11 5, R12 6, R13 7 times it).
var keyIdx = []string{"", "(R8*1)", "(R8*2)", "(R10*1)", "(R8*4)", "(R11*1)", "(R12*1)", "(R13*1)"}

// keyStrides loads kStride (R8) and its multiples for keyIdx.
func (a *asm) keyStrides() {
	a.l("MOVQ kStride+16(FP), R8")
	a.l("LEAQ (R8)(R8*2), R10")
	a.l("LEAQ (R8)(R8*4), R11")
	a.l("LEAQ (R10)(R10*1), R12")
	a.l("LEAQ (R12)(R8*1), R13")
}

// keyScales stores the float32 scales of the eight keys' blocks at AX to
// 0..28(R14), through the table at BX (t a temporary).
func (a *asm) keyScales(t string) {
	for i := 0; i < 8; i++ {
		a.l("MOVWLZX (AX)%s, %s", keyIdx[i], t)
		a.l("MOVL (BX)(%s*4), %s", t, t)
		a.l("MOVL %s, %d(R14)", t, 4*i)
	}
}

const scoresQ8Sig = "(sc *float32, k *byte, kStride int, q *byte, qStride, nb, ng, nq int, scale float32, %s, tab *float32)"

func (a *asm) scoresQ8AVX2() {
	a.textX86("scoresQ8_0AVX2", fmt.Sprintf(scoresQ8Sig, "dk"), "NOSPLIT", "$0-88",
		"sc[r*64+t] = dot(key t, row r)*scale for t < 8*ng, r < nq (nb >= 1, ng >=\n1, nq >= 1): per group of eight keys their scales are looked up once\n(tab, into dk), then each row's block sums of the eight keys are\nreduced into one vector (key per lane) and take the generic float steps\non the lanes: sumf += float32(sumi)*(dk*dq), block after block from 0.")
	a.l("MOVQ sc+0(FP), DI")
	a.l("MOVQ k+8(FP), SI")
	a.keyStrides()
	a.l("VBROADCASTSS scale+64(FP), Y14")
	a.b.WriteString("\n")
	a.label("group", false)
	// The eight keys' scales, block after block: dk[8*b+i].
	a.l("MOVQ tab+80(FP), BX")
	a.l("MOVQ SI, AX")
	a.l("MOVQ dk+72(FP), R14")
	a.l("MOVQ nb+40(FP), CX")
	a.b.WriteString("\n")
	a.label("scales", false)
	a.keyScales("R9")
	a.l("ADDQ $34, AX")
	a.l("ADDQ $32, R14")
	a.l("DECQ CX")
	a.l("JNZ scales")
	a.b.WriteString("\n")
	a.l("MOVQ q+24(FP), DX")
	a.l("MOVQ nq+56(FP), BX")
	a.l("MOVQ DI, R15")
	a.b.WriteString("\n")
	a.label("row", false)
	a.l("VXORPS Y15, Y15, Y15")
	a.l("MOVQ SI, AX")
	a.l("MOVQ DX, R9")
	a.l("MOVQ dk+72(FP), R14")
	a.l("MOVQ nb+40(FP), CX")
	a.label("block", true)
	a.l("VPMOVSXBW 2(R9), Y0")
	a.l("VPMOVSXBW 18(R9), Y1")
	// Key i's block sum with the query block (int16 in Y0, Y1) in the
	// int32 lanes of Y2+i: sign-extended, multiplied in pairs, exact.
	for i := 0; i < 8; i++ {
		d := y(2 + i)
		a.l("VPMOVSXBW 2(AX)%s, %s", keyIdx[i], d)
		a.l("VPMADDWD Y0, %s, %s", d, d)
		a.l("VPMOVSXBW 18(AX)%s, Y10", keyIdx[i])
		a.l("VPMADDWD Y1, Y10, Y10")
		a.l("VPADDD Y10, %s, %s", d, d)
	}
	a.l("VPHADDD Y3, Y2, Y2")
	a.l("VPHADDD Y5, Y4, Y4")
	a.l("VPHADDD Y7, Y6, Y6")
	a.l("VPHADDD Y9, Y8, Y8")
	a.l("VPHADDD Y4, Y2, Y2")
	a.l("VPHADDD Y8, Y6, Y6")
	a.l("VPERM2I128 $0x20, Y6, Y2, Y3")
	a.l("VPERM2I128 $0x31, Y6, Y2, Y4")
	a.l("VPADDD Y4, Y3, Y3")
	a.l("VCVTDQ2PS Y3, Y3")
	a.l("VPBROADCASTW (R9), X4")
	a.l("VCVTPH2PS X4, Y4")
	a.l("VMULPS (R14), Y4, Y4")
	a.l("VMULPS Y4, Y3, Y3")
	a.l("VADDPS Y3, Y15, Y15")
	a.l("ADDQ $34, AX")
	a.l("ADDQ $34, R9")
	a.l("ADDQ $32, R14")
	a.l("DECQ CX")
	a.l("JNZ block")
	a.b.WriteString("\n")
	a.l("VMULPS Y14, Y15, Y15")
	a.l("VMOVUPS Y15, (R15)")
	a.l("ADDQ qStride+32(FP), DX")
	a.l("ADDQ $256, R15")
	a.l("DECQ BX")
	a.l("JNZ row")
	a.b.WriteString("\n")
	a.l("LEAQ (SI)(R8*8), SI")
	a.l("ADDQ $32, DI")
	a.l("DECQ ng+48(FP)")
	a.l("JNZ group")
	a.l("VZEROUPPER")
	a.l("RET")
}

const scoresQ8VNNIDoc = `The avx512vnni set's ScoresQ8_0 (on 256-bit registers, AVX-512 VL):
VPDPBUSD multiplies unsigned by signed bytes, so each block of eight
keys is transposed in registers into eight vectors of one dword (four
quants) per key, XORed with 0x80 (u = k + 128, unsigned), and a row's
query dwords are broadcast from memory as the signed operand: the lanes
sum u*q = k*q + 128*q, and the chain starts from -128*sum(q) of the
row's block (computed once per call, with the row's scale, into the
scratch). The sums are exact, then the generic float steps on the
lanes: sumf += float32(sumi)*(dk*dq), block after block from 0; sumf
lives in sc between blocks (set to zero first, scaled at the end).`

// rowsOfSc runs body over the nq rows of the group's scores (R15 from
// DI, CX the count; labels l).
func (a *asm) rowsOfSc(l string, body func()) {
	a.l("MOVQ DI, R15")
	a.l("MOVQ nq+56(FP), CX")
	a.b.WriteString("\n")
	a.label(l, false)
	body()
	a.l("ADDQ $256, R15")
	a.l("DECQ CX")
	a.l("JNZ %s", l)
}

func (a *asm) scoresQ8VNNI() {
	a.b.WriteString("\n")
	a.doc(scoresQ8VNNIDoc)
	a.textX86("scoresQ8_0VNNI", fmt.Sprintf(scoresQ8Sig, "scratch"), "NOSPLIT", "$0-88",
		"scratch: 8 floats for a block's key scales, then per row r and block b\nat 64+8*(r*nb+b) the int32 -128*sum(q) and the float32 dq. The argument\nslots of k and kStride hold the blocks left and the scratch's row\nstride once loaded.")
	a.l("MOVL $0x80808080, AX")
	a.l("MOVQ AX, X15")
	a.l("VPBROADCASTD X15, Y15")
	a.l("MOVQ tab+80(FP), BX")
	a.l("MOVQ scratch+72(FP), R14")
	a.l("ADDQ $64, R14")
	// Each row's blocks: -128*sum(q) and dq.
	a.l("MOVQ q+24(FP), DX")
	a.l("MOVQ nq+56(FP), R8")
	a.b.WriteString("\n")
	a.label("rowsums", false)
	a.l("MOVQ DX, R9")
	a.l("MOVQ nb+40(FP), CX")
	a.b.WriteString("\n")
	a.label("rowsum", false)
	for _, s := range []string{"VPXOR Y0, Y0, Y0", "VPDPBUSD 2(R9), Y15, Y0", "VEXTRACTI128 $1, Y0, X1", "VPADDD X1, X0, X0",
		"VPSHUFD $0x4e, X0, X1", "VPADDD X1, X0, X0", "VPSHUFD $0xb1, X0, X1", "VPADDD X1, X0, X0", "VPXOR X1, X1, X1",
		"VPSUBD X0, X1, X0", "VMOVD X0, (R14)", "MOVWLZX (R9), AX", "MOVL (BX)(AX*4), AX", "MOVL AX, 4(R14)",
		"ADDQ $8, R14", "ADDQ $34, R9", "DECQ CX", "JNZ rowsum", "ADDQ qStride+32(FP), DX", "DECQ R8", "JNZ rowsums"} {
		a.l("%s", s)
	}
	a.b.WriteString("\n")
	a.l("MOVQ sc+0(FP), DI")
	a.l("MOVQ k+8(FP), SI")
	a.keyStrides()
	a.l("MOVQ nb+40(FP), AX")
	a.l("SHLQ $3, AX")
	a.l("MOVQ AX, kStride+16(FP)")
	a.l("VPXOR Y14, Y14, Y14")
	a.b.WriteString("\n")
	a.label("group", false)
	// The group's scores start from zero.
	a.rowsOfSc("zero", func() { a.l("VMOVUPS Y14, (R15)") })
	a.b.WriteString("\n")
	a.l("MOVQ SI, AX")
	a.l("MOVQ q+24(FP), DX")
	a.l("MOVQ scratch+72(FP), R9")
	a.l("ADDQ $64, R9")
	a.l("MOVQ nb+40(FP), CX")
	a.l("MOVQ CX, k+8(FP)")
	a.b.WriteString("\n")
	a.label("block", false)
	// The eight keys' scales, through the scratch into Y8.
	a.l("MOVQ tab+80(FP), BX")
	a.l("MOVQ scratch+72(FP), R14")
	a.keyScales("R15")
	a.l("VMOVUPS (R14), Y8")
	// The keys' quants + 128, transposed: Y16+c holds dword c of each key.
	for i := 0; i < 8; i++ {
		a.l("VPXOR 2(AX)%s, Y15, %s", keyIdx[i], y(i))
	}
	a.transpose8([4]string{"VPUNPCKLDQ", "VPUNPCKHDQ", "VPUNPCKLQDQ", "VPUNPCKHQDQ"}, 0, 24)
	for i := 0; i < 4; i++ {
		a.l("VSHUFI64X2 $0, %s, %s, %s", y(4+i), y(i), y(16+i))
		a.l("VSHUFI64X2 $3, %s, %s, %s", y(4+i), y(i), y(20+i))
	}
	// Every row: sc += float32(sumi)*(dk*dq).
	a.l("MOVQ DX, R14")
	a.l("MOVQ R9, BX")
	a.l("MOVQ DI, R15")
	a.l("MOVQ nq+56(FP), CX")
	a.label("row", true)
	a.l("VPBROADCASTD (BX), Y9")
	for c := 0; c < 8; c++ {
		a.l("VPDPBUSD.BCST %d(R14), %s, Y9", 2+4*c, y(16+c))
	}
	a.l("VCVTDQ2PS Y9, Y9")
	a.l("VMULPS.BCST 4(BX), Y8, Y10")
	a.l("VMULPS Y10, Y9, Y9")
	a.l("VADDPS (R15), Y9, Y9")
	a.l("VMOVUPS Y9, (R15)")
	a.l("ADDQ qStride+32(FP), R14")
	a.l("ADDQ kStride+16(FP), BX")
	a.l("ADDQ $256, R15")
	a.l("DECQ CX")
	a.l("JNZ row")
	a.b.WriteString("\n")
	a.l("ADDQ $34, AX")
	a.l("ADDQ $34, DX")
	a.l("ADDQ $8, R9")
	a.l("DECQ k+8(FP)")
	a.l("JNZ block")
	a.b.WriteString("\n")
	// The group's scores times scale.
	a.l("VBROADCASTSS scale+64(FP), Y9")
	a.rowsOfSc("scale", func() {
		a.l("VMULPS (R15), Y9, Y10")
		a.l("VMOVUPS Y10, (R15)")
	})
	a.b.WriteString("\n")
	a.l("LEAQ (SI)(R8*8), SI")
	a.l("ADDQ $32, DI")
	a.l("DECQ ng+48(FP)")
	a.l("JNZ group")
	a.l("VZEROUPPER")
	a.l("RET")
}

// genAttnQ8 writes attnq8_amd64.s.
func genAttnQ8(a *asm) {
	a.dequantQ8_0X86()
	a.scoresQ8AVX2()
	a.scoresQ8VNNI()
	a.valueSumX86("sumQ8x4AVX512", sumQSig, "$0-56", 512, 4, valQ8,
		"out[r*64*hd64+i] = fma(w[r*64+t], x[t][i], out[...]) for r < 4, t =\n0..rows-1 in order, where x[t] is value row t (Q8_0 blocks at\nv+t*vStride) dequantized as dequantQ8_0AVX2 does it (float32(q) times\nthe block's scale, one rounded product): the bits of DequantQ8_0 then\nattnSumFMA4AVX512, without the float32 copy of the values.")
	a.valueSumX86("sumQ8AVX512", sumQSig, "$0-56", 512, 1, valQ8, "sumQ8x4AVX512 for one row.")
}
