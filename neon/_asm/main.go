// Command _asm generates ../dot_arm64.s: geist's arm64 NEON kernels in two
// tiers, "neon" (ARMv8.0 ASIMD, Cortex-A72) and "neon-dotprod" (ARMv8.2
// SDOT, Cortex-A76), and ../attntile_arm64.s, the tiled attention's
// kernels shared by both (attn.go). The instructions the Go assembler
// lacks are emitted as WORD directives with the ARM syntax in a comment
// (see enc.go); the test checks every one of them against llvm-mc when it
// is installed.
//
// With -amd64 DIR it also writes the generated amd64 files (x86.go lists
// them) into DIR.
//
// Run: cd neon/_asm && go generate (or go run . -out ../dot_arm64.s -attn
// ../attntile_arm64.s -amd64 ..; without -out it writes dot_arm64.s to
// stdout). go generate ./neon runs it too.
package main

//go:generate go run . -out ../dot_arm64.s -attn ../attntile_arm64.s -amd64 ..

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

type asm struct{ b strings.Builder }

func (a *asm) l(format string, args ...any) {
	s := fmt.Sprintf(format, args...)
	if strings.HasSuffix(s, ":") {
		a.b.WriteString(s + "\n")
		return
	}
	a.b.WriteString("\t" + s + "\n")
}

func (a *asm) comment(s string) {
	a.b.WriteString("\n// " + strings.ReplaceAll(s, "\n", "\n// ") + "\n")
}

// tier is an instruction-set level.
type tier struct {
	suffix string // function name suffix
	dot    bool   // has SDOT
}

var tiers = []tier{{"NE", false}, {"DP", true}}

// idot4 sets the 4 int32 lanes of acc so that their sum is the dot product
// of the int8 vector pairs (x[i], y[i]). Without SDOT it multiplies into
// 16-bit lanes (tmp), which must hold 2*len(pairs) products: callers
// guarantee |x| <= 32, so |sum| <= 4*32*128 fits in int16.
func (a *asm) idot4(t tier, acc, tmp int, pairs [][2]int) {
	if t.dot {
		a.zero(acc)
		for _, p := range pairs {
			a.i(sdot(acc, p[0], p[1]))
		}
		return
	}
	if len(pairs) > 2 {
		panic("idot4: too many pairs for 16-bit lanes")
	}
	for i, p := range pairs {
		if i == 0 {
			a.i(smull8(tmp, p[0], p[1]))
		} else {
			a.i(smlal8(tmp, p[0], p[1]))
		}
		a.i(smlal28(tmp, p[0], p[1]))
	}
	a.i(saddlp8(acc, tmp))
}

// isum sets scalar S(dst) to the dot product of the int8 pairs (as idot4,
// reduced).
func (a *asm) isum(t tier, dst, tmp int, pairs [][2]int) {
	if t.dot {
		a.idot4(t, dst, tmp, pairs)
		a.i(addv4s(dst, dst))
		return
	}
	for i, p := range pairs {
		if i == 0 {
			a.i(smull8(tmp, p[0], p[1]))
		} else {
			a.i(smlal8(tmp, p[0], p[1]))
		}
		a.i(smlal28(tmp, p[0], p[1]))
	}
	a.i(saddlv8(dst, tmp))
}

// isum8 is isum for full-range int8 pairs (Q8_0 weights): no 16-bit
// accumulation of two products.
func (a *asm) isum8(t tier, dst, tmp int, pairs [][2]int) {
	if t.dot {
		a.isum(t, dst, tmp, pairs)
		return
	}
	for i, p := range pairs {
		a.i(smull8(tmp, p[0], p[1]))
		if i == 0 {
			a.i(saddlp8(dst, tmp))
		} else {
			a.i(sadalp8(dst, tmp))
		}
		a.i(smull28(tmp, p[0], p[1]))
		a.i(sadalp8(dst, tmp))
	}
	a.i(addv4s(dst, dst))
}

// header emits the TEXT line of a kernel with the Go signature above it.
func (a *asm) text(name, sig string, frame string) {
	a.b.WriteString("\n// " + sig + "\n")
	a.b.WriteString("TEXT ·" + name + "(SB), NOSPLIT, " + frame + "\n")
}

// dotArgs loads the arguments of the n-column kernels:
// R0 out, R1 w, R2 a, R3 aStride, R4 nb, R5 n, and zeroes out[0:n].
func (a *asm) dotArgs() {
	a.loadDotArgs()
	a.zeroOut()
}

// loadDotArgs loads the arguments of the n-column kernels: R0 out, R1 w,
// R2 a, R3 aStride, R4 nb, R5 n.
func (a *asm) loadDotArgs() {
	a.l("MOVD out+0(FP), R0")
	a.l("MOVD w+8(FP), R1")
	a.l("MOVD a+16(FP), R2")
	a.l("MOVD aStride+24(FP), R3")
	a.l("MOVD nb+32(FP), R4")
	a.l("MOVD n+40(FP), R5")
}

// zeroOut sets out[0:n] (R0, R5) to zero, with R6, R7 (label zero).
func (a *asm) zeroOut() {
	a.l("MOVD R0, R6")
	a.l("MOVD R5, R7")
	a.l("zero:")
	a.l("MOVW ZR, (R6)")
	a.l("ADD $4, R6")
	a.l("SUBS $1, R7")
	a.l("BNE zero")
}

// f16 loads the half at off(base) into F(d) as a float32 (via R8).
func (a *asm) f16(d int, off int, base string) {
	a.l("MOVHU %d(%s), R8", off, base)
	a.l("FMOVS R8, F%d", d)
	a.l("FCVTHS F%d, F%d", d, d)
}

// f16t loads the half at off(base) into F(d) as a float32 through the
// package's fp16Table (integer loads only: qemu emulates FCVT slowly).
func (a *asm) f16t(d int, off int, base string) {
	a.l("MOVHU %d(%s), R8", off, base)
	a.l("MOVWU (R20)(R8<<2), R8")
	a.l("FMOVS R8, F%d", d)
}

// colLoop opens the per-column loop: R9 the column's activation block, R10
// its output, R11 the remaining columns.
func (a *asm) colLoopBegin() {
	a.l("MOVD R2, R9")
	a.l("MOVD R0, R10")
	a.l("MOVD R5, R11")
	a.l("PCALIGN $16")
	a.l("col:")
}

func (a *asm) colLoopEnd() {
	a.l("ADD $4, R10")
	a.l("ADD R3, R9")
	a.l("SUBS $1, R11")
	a.l("BNE col")
}

const dotSig = "(out *float32, w, a *byte, aStride, nb, n int)"

// The 32-value block kernels (Q4_0, Q5_0, Q8_0 with Q8_0 activations)
// keep ggml's exact integer block sum and the generic float order per
// block, t = (float(sumi)*dx)*dy for Q4_0 and float(sumi)*(dx*dy) for
// Q5_0/Q8_0, sumf = sumf + t block after block, so they are bit-identical
// to the generic kernels. One column (decode) takes four blocks per step:
// four integer sums reduced into one vector, the float steps on four lanes,
// then the four additions in block order. Several columns go in groups of
// four, one column per lane (a short group repeats column 0 in the unused
// lanes), so every column sees the same float operations as alone.
type block32 struct {
	name   string
	wsize  int
	full   bool // weights use the whole int8 range (no 16-bit pair sums)
	q4     bool // Q4_0 float order
	unpack func(a *asm, base string, off, d0, d1 int, tmp []int)
	consts func(a *asm)
}

var blocks32 = []block32{
	{"Q4_0", 18, false, true, unpackQ4_0, constsQ4_0},
	{"Q5_0", 22, false, false, unpackQ5_0, constsQ5_0},
	{"Q8_0", 34, true, false, unpackQ8_0, func(*asm) {}},
}

// The unpack functions read a weight block's quants: with off < 0 from
// base, which points just past the scale, leaving base at the next block
// (post-index); else from off(base), off pointing past the scale, base
// unchanged.

func constsQ4_0(a *asm) {
	a.l("VMOVI $15, V31.B16")
	a.l("VMOVI $8, V30.B16")
}

func unpackQ4_0(a *asm, base string, off, d0, d1 int, tmp []int) {
	t := tmp[0]
	if off < 0 {
		a.l("VLD1.P 16(%s), [V%d.B16]", base, t)
	} else {
		a.l("FMOVQ %d(%s), F%d", off, base, t)
	}
	a.l("VAND V31.B16, V%d.B16, V%d.B16", t, d0)
	a.l("VUSHR $4, V%d.B16, V%d.B16", t, d1)
	a.l("VSUB V30.B16, V%d.B16, V%d.B16", d0, d0)
	a.l("VSUB V30.B16, V%d.B16, V%d.B16", d1, d1)
}

func constsQ5_0(a *asm) {
	a.l("VMOVI $15, V31.B16")
	a.l("VMOVI $16, V30.B16")
	a.l("MOVD $q5consts<>(SB), R8")
	a.l("VLD1 (R8), [V26.B16, V27.B16, V28.B16]") // idx lo, idx hi, bit masks
}

// unpackQ5_0: qh's bits spread over the lanes by a table lookup and a bit
// test per lane, ORed above the nibbles as 16, minus 16.
func unpackQ5_0(a *asm, base string, off, d0, d1 int, tmp []int) {
	t0, t1, t2, t3 := tmp[0], tmp[1], tmp[2], tmp[3]
	if off < 0 {
		a.l("FMOVS.P 4(%s), F%d", base, t1)
		a.l("VLD1.P 16(%s), [V%d.B16]", base, t0)
	} else {
		a.l("FMOVS %d(%s), F%d", off, base, t1)
		a.l("FMOVQ %d(%s), F%d", off+4, base, t0)
	}
	a.q5Spread(q5Regs{26, 27, 28, 30, 31}, t0, t1, d0, d1, t2, t3)
	a.l("VSUB V30.B16, V%d.B16, V%d.B16", d0, d0)
	a.l("VSUB V30.B16, V%d.B16, V%d.B16", d1, d1)
}

// q5Regs names the registers of Q5_0's constants: the TBL indices
// spreading qh's bytes over the lanes (idxLo, idxHi), each lane's bit
// (bits), bytes of 16 and of 15 (nib).
type q5Regs struct{ idxLo, idxHi, bits, sixteen, nib int }

// q5Spread unpacks a Q5_0 block's values unsigned (0..31): the nibbles of
// V(qs) low into V(lo), high into V(hi), with qh's bits (V(qh).S[0])
// spread over the lanes by TBL, tested by CMTST, kept as 16 and ORed in.
// V(t2), V(t3) are temporaries (t3 may be qh).
func (a *asm) q5Spread(r q5Regs, qs, qh, lo, hi, t2, t3 int) {
	a.l("VTBL V%d.B16, [V%d.B16], V%d.B16", r.idxLo, qh, t2)
	a.l("VTBL V%d.B16, [V%d.B16], V%d.B16", r.idxHi, qh, t3)
	a.i(cmtst(t2, t2, r.bits))
	a.i(cmtst(t3, t3, r.bits))
	a.l("VAND V%d.B16, V%d.B16, V%d.B16", r.sixteen, t2, t2)
	a.l("VAND V%d.B16, V%d.B16, V%d.B16", r.sixteen, t3, t3)
	a.l("VAND V%d.B16, V%d.B16, V%d.B16", r.nib, qs, lo)
	a.l("VUSHR $4, V%d.B16, V%d.B16", qs, hi)
	a.l("VORR V%d.B16, V%d.B16, V%d.B16", t2, lo, lo)
	a.l("VORR V%d.B16, V%d.B16, V%d.B16", t3, hi, hi)
}

func unpackQ8_0(a *asm, base string, off, d0, d1 int, tmp []int) {
	if off < 0 {
		a.l("VLD1.P 32(%s), [V%d.B16, V%d.B16]", base, d0, d1)
	} else {
		a.l("FMOVQ %d(%s), F%d", off, base, d0)
		a.l("FMOVQ %d(%s), F%d", off+16, base, d1)
	}
}

// idot4x sets the 4 int32 lanes of acc to partial sums of the dot product
// of (x0,y0) and (x1,y1); full selects the exact path for full-range int8
// weights without SDOT.
func (a *asm) idot4x(t tier, full bool, acc, tmp, x0, y0, x1, y1 int) {
	if t.dot || !full {
		a.idot4(t, acc, tmp, [][2]int{{x0, y0}, {x1, y1}})
		return
	}
	a.i(smull8(tmp, x0, y0))
	a.i(saddlp8(acc, tmp))
	a.i(smull28(tmp, x0, y0))
	a.i(sadalp8(acc, tmp))
	a.i(smull8(tmp, x1, y1))
	a.i(sadalp8(acc, tmp))
	a.i(smull28(tmp, x1, y1))
	a.i(sadalp8(acc, tmp))
}

// blockFloat turns the four integer sums in V(s) into the four terms,
// given dx in V(dx) (lanes) or V(dx).S[0] (byElem) and dy in V(dy).
func (a *asm) blockFloat(k block32, s, dx, dy, tmp int, byElem bool) {
	a.i(scvtf4s(s, s))
	if k.q4 {
		if byElem {
			a.i(fmulElem(s, s, dx, 0))
		} else {
			a.i(fmul4s(s, s, dx))
		}
		a.i(fmul4s(s, s, dy))
		return
	}
	if byElem {
		a.i(fmulElem(tmp, dy, dx, 0))
	} else {
		a.i(fmul4s(tmp, dx, dy))
	}
	a.i(fmul4s(s, s, tmp))
}

// dot32Step multiplies four blocks of the one-column path and leaves
// their integer sums in V(set[0]) (four lanes), the weights' scales in
// V(set[1]) and the activations' in V(set[2]) as floats. Weights go to
// V0-V3 (two per block, two blocks taking turns), activations V8-V15.
func (a *asm) dot32Step(k block32, t tier, set [3]int) {
	wr := []string{"R8", "R9", "R10", "R11"}
	ar := []string{"R12", "R13", "R14", "R15"}
	for b := 0; b < 4; b++ {
		w0, w1, a0, a1 := 2*(b%2), 2*(b%2)+1, 8+2*b, 9+2*b
		if t.dot {
			// post-index: the A76 decodes four instructions a cycle
			a.l("MOVHU.P 2(R1), %s", wr[b])
			k.unpack(a, "R1", -1, w0, w1, []int{21, 29, set[0], set[1]})
			a.l("MOVHU.P 2(R2), %s", ar[b])
			a.l("VLD1.P 32(R2), [V%d.B16, V%d.B16]", a0, a1)
		} else {
			// offsets: the A72 dispatches three micro-ops a cycle, and
			// a post-index is one more
			a.l("MOVHU %d(R1), %s", b*k.wsize, wr[b])
			k.unpack(a, "R1", b*k.wsize+2, w0, w1, []int{21, 29, set[0], set[1]})
			a.l("MOVHU %d(R2), %s", 34*b, ar[b])
			a.l("FMOVQ %d(R2), F%d", 34*b+2, a0)
			a.l("FMOVQ %d(R2), F%d", 34*b+18, a1)
		}
		acc := 16 + b
		switch {
		case t.dot:
			a.i(sdot(acc, w0, a0))
			a.i(sdot(acc, w1, a1))
		case k.full:
			a.i(smull8(21, w0, a0))
			a.i(smull28(29, w0, a0))
			a.i(saddlp8(acc, 21))
			a.i(sadalp8(acc, 29))
			a.i(smull8(21, w1, a1))
			a.i(smull28(29, w1, a1))
			a.i(sadalp8(acc, 21))
			a.i(sadalp8(acc, 29))
		default:
			a.i(smull8(acc, w0, a0))
			a.i(smlal28(acc, w0, a0))
			a.i(smlal8(acc, w1, a1))
			a.i(smlal28(acc, w1, a1))
		}
	}
	if !t.dot {
		a.l("ADD $%d, R1", 4*k.wsize)
		a.l("ADD $%d, R2", 4*34)
	}
	for i := 1; i < 4; i++ {
		a.l("ORR %s<<%d, %s, %s", wr[i], 16*i, wr[0], wr[0])
		a.l("ORR %s<<%d, %s, %s", ar[i], 16*i, ar[0], ar[0])
	}
	d, dx, dy := set[0], set[1], set[2]
	a.l("FMOVD %s, F%d", wr[0], dx)
	a.l("FMOVD %s, F%d", ar[0], dy)
	a.i(fcvtl(dx, dx))
	a.i(fcvtl(dy, dy))
	switch {
	case t.dot:
		a.l("VADDP V17.S4, V16.S4, V%d.S4", d)
		a.l("VADDP V19.S4, V18.S4, V29.S4")
		a.l("VADDP V29.S4, V%d.S4, V29.S4", d)
		a.l("VSUB V20.S4, V29.S4, V%d.S4", d)
		a.l("VMOV V29.B16, V20.B16")
	case k.full:
		a.l("VADDP V17.S4, V16.S4, V%d.S4", d)
		a.l("VADDP V19.S4, V18.S4, V29.S4")
		a.l("VADDP V29.S4, V%d.S4, V%d.S4", d, d)
	case k.q4:
		// signed nibbles: 16 products per 16-bit lane stay below 2^14
		a.i(addp8h(d, 16, 17))
		a.i(addp8h(29, 18, 19))
		a.i(addp8h(d, d, 29))
		a.i(saddlp8(d, d))
	default:
		// Q5_0: widen after eight products per lane
		a.i(addp8h(d, 16, 17))
		a.i(addp8h(29, 18, 19))
		a.i(saddlp8(d, d))
		a.i(saddlp8(29, 29))
		a.l("VADDP V29.S4, V%d.S4, V%d.S4", d, d)
	}
}

// dot32Float adds the four terms of a step (dot32Step's set) to S24 in
// block order.
func (a *asm) dot32Float(k block32, t tier, set [3]int) {
	d, dx, dy := set[0], set[1], set[2]
	if t.dot {
		a.i(scvtf4sFix(d, d, 1))
		a.i(fadd4s(dy, dy, dy))
	} else {
		a.i(scvtf4s(d, d))
	}
	if k.q4 {
		a.i(fmul4s(d, d, dx))
		a.i(fmul4s(d, d, dy))
	} else {
		a.i(fmul4s(21, dx, dy))
		a.i(fmul4s(d, d, 21))
	}
	a.l("FADDS F%d, F24, F24", d)
	for b := 1; b < 4; b++ {
		a.l("VEXT $%d, V%d.B16, V%d.B16, V21.B16", 4*b, d, d)
		a.l("FADDS F21, F24, F24")
	}
}

func (a *asm) dot32(k block32, t tier) {
	name := "dot" + k.name + "Q8_0" + t.suffix
	a.text(name, "func "+name+dotSig, "$0-48")
	a.loadDotArgs()
	k.consts(a)
	// R20 holds fp16Table for the scale conversions.
	a.l("MOVD ·fp16Table(SB), R20")
	a.l("CMP $1, R5")
	a.l("BNE multi")

	// One column: four blocks per step, the running sum in S24. The
	// blocks' integer sums come to four lanes (dotprod: running SDOT
	// accumulators V16-V19, an ADDP tree, the difference with the
	// previous step's cumulative sums in V20; ARMv8.0: 16-bit SMULL/SMLAL
	// sums reduced on 16-bit lanes as far as their bounds allow, Q8_0
	// widened at once), the eight scales are combined in general
	// registers and widened by FCVTL, and the four terms are added in
	// block order. The dotprod tier converts with SCVTF #1 and multiplies
	// by 2·dy (exact, see rows1DP). Software-pipelined: a step's float
	// work runs after the next step's multiplies (register sets A: sums
	// V25, scales V22, V23; B: V6, V4, V5).
	a.l("VEOR V24.B16, V24.B16, V24.B16")
	if t.dot {
		for v := 16; v <= 20; v++ {
			a.l("VEOR V%d.B16, V%d.B16, V%d.B16", v, v, v)
		}
	}
	setA, setB := [3]int{25, 22, 23}, [3]int{6, 4, 5}
	a.l("CMP $4, R4")
	a.l("BLT tail")
	a.dot32Step(k, t, setA)
	a.l("SUB $4, R4")
	a.l("CMP $4, R4")
	a.l("BLT flushA")
	a.l("PCALIGN $16")
	a.l("four:")
	a.dot32Step(k, t, setB)
	a.dot32Float(k, t, setA)
	a.l("SUB $4, R4")
	a.l("CMP $4, R4")
	a.l("BLT flushB")
	a.dot32Step(k, t, setA)
	a.dot32Float(k, t, setB)
	a.l("SUB $4, R4")
	a.l("CMP $4, R4")
	a.l("BGE four")
	a.l("flushA:")
	a.dot32Float(k, t, setA)
	a.l("B tail")
	a.l("flushB:")
	a.dot32Float(k, t, setB)
	a.l("tail:")
	a.l("CBZ R4, done1")
	a.l("one:")
	a.l("MOVHU.P 2(R1), R8")
	k.unpack(a, "R1", -1, 0, 1, []int{8, 4, 5, 7})
	a.l("MOVHU.P 2(R2), R9")
	a.l("VLD1.P 32(R2), [V2.B16, V3.B16]")
	a.idot4x(t, k.full, 25, 6, 0, 2, 1, 3)
	a.i(addv4s(25, 25))
	a.l("MOVWU (R20)(R8<<2), R8")
	a.l("MOVWU (R20)(R9<<2), R9")
	a.l("FMOVS R8, F22")
	a.l("FMOVS R9, F23")
	a.blockFloat(k, 25, 22, 23, 21, false)
	a.l("FADDS F25, F24, F24")
	a.l("SUBS $1, R4")
	a.l("BNE one")
	a.l("done1:")
	a.l("FMOVS F24, (R0)")
	a.l("RET")

	// Several columns: groups of four columns in the lanes of V24. Per
	// column and block only two loads and the integer dot: the four
	// activation scales are loaded into lanes and widened by one FCVTL.
	a.l("multi:")
	a.l("MOVD R1, R6") // weights start
	a.l("MOVD R4, R7") // nb
	a.l("group:")
	// column pointers R12-R15; unused lanes repeat column 0
	a.l("MOVD R2, R12")
	a.l("MOVD R2, R13")
	a.l("MOVD R2, R14")
	a.l("MOVD R2, R15")
	a.l("CMP $2, R5")
	a.l("BLT ptrs")
	a.l("ADD R3, R2, R13")
	a.l("CMP $3, R5")
	a.l("BLT ptrs")
	a.l("ADD R3, R13, R14")
	a.l("CMP $4, R5")
	a.l("BLT ptrs")
	a.l("ADD R3, R14, R15")
	a.l("ptrs:")
	a.l("MOVD R6, R1")
	a.l("MOVD R7, R4")
	a.l("VEOR V24.B16, V24.B16, V24.B16")
	a.l("PCALIGN $16")
	a.l("mblock:")
	a.l("MOVHU.P 2(R1), R8")
	k.unpack(a, "R1", -1, 0, 1, []int{8, 2, 3, 16})
	a.l("MOVWU (R20)(R8<<2), R8")
	a.l("FMOVS R8, F29")
	for c := 0; c < 4; c++ {
		p := fmt.Sprintf("R%d", 12+c)
		a.l("VLD1.P 2(%s), V21.H[%d]", p, c)
		a.l("VLD1.P 32(%s), [V%d.B16, V%d.B16]", p, 4+2*c, 5+2*c)
		a.idot4x(t, k.full, 12+c, 16, 0, 4+2*c, 1, 5+2*c)
	}
	a.l("VADDP V13.S4, V12.S4, V12.S4")
	a.l("VADDP V15.S4, V14.S4, V14.S4")
	a.l("VADDP V14.S4, V12.S4, V22.S4")
	a.i(fcvtl(21, 21))
	a.blockFloat(k, 22, 29, 21, 23, true)
	a.i(fadd4s(24, 24, 22))
	a.l("SUBS $1, R4")
	a.l("BNE mblock")
	// store min(4, remaining) lanes
	a.l("MOVD $4, R8")
	a.l("CMP R8, R5")
	a.l("CSEL LT, R5, R8, R8")
	a.l("SUB R8, R5")
	a.l("store:")
	a.l("FMOVS F24, (R0)")
	a.l("ADD $4, R0")
	a.l("VEXT $4, V24.B16, V24.B16, V24.B16")
	a.l("SUBS $1, R8")
	a.l("BNE store")
	a.l("ADD R3<<2, R2, R2") // next group of columns
	a.l("CBNZ R5, group")
	a.l("RET")
}

// kquantTail combines a Q8_K column's integer sums into its output: F28 is
// the activation scale yd, F25 sumi (int), F27 summins (int, or none), F29
// d and F30 dmin of the weights:
// out = out + float(sumi)*(d*yd) - float(summins)*(dmin*yd).
func (a *asm) kquantTail(mins bool) {
	a.i(scvtfS(25, 25))
	a.l("FMULS F28, F29, F16")
	a.l("FMULS F16, F25, F25")
	a.l("FMOVS (R10), F17")
	a.l("FADDS F25, F17, F17")
	if mins {
		a.i(scvtfS(27, 27))
		a.l("FMULS F28, F30, F16")
		a.l("FMULS F16, F27, F27")
		a.l("FSUBS F27, F17, F17")
	}
	a.l("FMOVS F17, (R10)")
}

// Q4_K × Q8_K: the super-block's 256 weights are unpacked once into V0-V15
// (per 32-byte chunk c: low nibbles V4c, V4c+1, high nibbles V4c+2, V4c+3),
// scales as int32 lanes in V20, V21 and mins as int16 in V22; then every
// column takes exact integer sums (sumi = Σ scale·dot, summins = Σ min·bsum)
// and one float combination per super-block (kquantTail).
func (a *asm) dotQ4_K(t tier) { a.dotKQ4(t, kindQ4_K) }
func (a *asm) dotQ5_K(t tier) { a.dotKQ4(t, kindQ5_K) }

func (a *asm) dotKQ4(t tier, k kq4) {
	name := "dot" + k.name + "Q8_K" + t.suffix
	a.text(name, "func "+name+dotSig, "$0-48")
	a.dotArgs()
	a.l("PCALIGN $16")
	a.l("block:")
	a.l("VMOVI $15, V31.B16")
	a.f16(29, 0, "R1")
	a.f16(30, 2, "R1")
	// 6-bit scales and mins: scales as int32 lanes in V20, V21, mins as
	// int16 lanes in V22
	a.q4kScaleVecs(20, 22)
	// nibbles (and Q5_K's fifth bits)
	if k.qh >= 0 {
		a.ldq2(k.qh, "R1", 24, 25)
		a.l("VMOVI $16, V26.B16")
	}
	a.l("ADD $%d, R1, R12", k.qs)
	for p := 0; p < 4; p++ {
		a.l("VLD1.P 32(R12), [V%d.B16, V%d.B16]", 4*p+2, 4*p+3)
		a.kq4Split(k, p, 4*p+2, 4*p, 24, 26, 27)
	}
	a.colLoopBegin()
	// Per sub-block pair c: the two sub-blocks' products in 16-bit lanes
	// (SMULL/SMLAL(2), four per lane), paired by ADDP into V23+c; then an
	// ADDP tree as far as the 16-bit bounds allow (Q4_K values <= 15: two
	// levels; Q5_K <= 31: one), SADDLP, and one MUL and one MLA by the
	// scales (V20: sub-blocks 0-3, V21: 4-7), instead of a 32-bit MLA (two
	// micro-ops on the A72's multiply pipe) per sub-block.
	a.l("ADD $4, R9, R13")
	for c := 0; c < 4; c++ {
		a.l("VLD1.P 64(R13), [V16.B16, V17.B16, V18.B16, V19.B16]")
		for h, tv := range []int{27, 28} {
			a.i(smull8(tv, 4*c+2*h, 16+2*h))
			a.i(smlal28(tv, 4*c+2*h, 16+2*h))
			a.i(smlal8(tv, 4*c+2*h+1, 17+2*h))
			a.i(smlal28(tv, 4*c+2*h+1, 17+2*h))
		}
		a.i(addp8h(23+c, 27, 28))
	}
	if k.qh < 0 {
		a.i(addp8h(23, 23, 24))
		a.i(addp8h(25, 25, 26))
		a.i(saddlp8(23, 23))
		a.i(saddlp8(25, 25))
	} else {
		for c := 0; c < 4; c++ {
			a.i(saddlp8(23+c, 23+c))
		}
		a.l("VADDP V24.S4, V23.S4, V23.S4")
		a.l("VADDP V26.S4, V25.S4, V25.S4")
	}
	a.i(mul4s(24, 23, 20))
	a.i(mla4s(24, 25, 21))
	a.i(addv4s(25, 24))
	// R13 now points at bsums: pairwise sums are the 8 sub-block sums.
	a.l("VLD1 (R13), [V26.H8, V27.H8]")
	a.l("VADDP V27.H8, V26.H8, V26.H8")
	a.i(smull16(27, 26, 22))
	a.i(smlal216(27, 26, 22))
	a.i(addv4s(27, 27))
	a.l("FMOVS (R9), F28")
	a.kquantTail(true)
	a.colLoopEnd()
	a.l("ADD $%d, R1", k.size)
	a.l("ADD $292, R2")
	a.l("SUBS $1, R4")
	a.l("BNE block")
	a.l("RET")
}

// Q6_K × Q8_K: the 256 weights are unpacked once into V0-V15 (vector j is
// sub-block j of 16 values, minus 32), the 16 int8 scales as int32 lanes in
// V16-V19; every column takes sumi = Σ scale_j·dot_j exactly and adds
// float(sumi)*(d*yd).
func (a *asm) dotQ6_K(t tier) {
	name := "dotQ6_KQ8_K" + t.suffix
	a.text(name, "func "+name+dotSig, "$0-48")
	a.dotArgs()
	a.l("PCALIGN $16")
	a.l("block:")
	a.l("VMOVI $15, V29.B16")
	a.l("VMOVI $48, V30.B16")
	a.l("VMOVI $32, V31.B16")
	for h := 0; h < 2; h++ {
		a.l("ADD $%d, R1, R12", 64*h)
		a.l("ADD $%d, R1, R13", 128+32*h)
		a.l("VLD1 (R12), [V16.B16, V17.B16, V18.B16, V19.B16]")
		a.l("VLD1 (R13), [V20.B16, V21.B16]")
		o := 8 * h
		// low nibbles with qh bits 0-1 and 2-3
		a.l("VSHL $4, V20.B16, V22.B16")
		a.l("VSHL $4, V21.B16, V23.B16")
		a.l("VAND V30.B16, V22.B16, V22.B16")
		a.l("VAND V30.B16, V23.B16, V23.B16")
		a.l("VAND V29.B16, V16.B16, V%d.B16", o+0)
		a.l("VAND V29.B16, V17.B16, V%d.B16", o+1)
		a.l("VORR V22.B16, V%d.B16, V%d.B16", o+0, o+0)
		a.l("VORR V23.B16, V%d.B16, V%d.B16", o+1, o+1)
		a.l("VSHL $2, V20.B16, V22.B16")
		a.l("VSHL $2, V21.B16, V23.B16")
		a.l("VAND V30.B16, V22.B16, V22.B16")
		a.l("VAND V30.B16, V23.B16, V23.B16")
		a.l("VAND V29.B16, V18.B16, V%d.B16", o+2)
		a.l("VAND V29.B16, V19.B16, V%d.B16", o+3)
		a.l("VORR V22.B16, V%d.B16, V%d.B16", o+2, o+2)
		a.l("VORR V23.B16, V%d.B16, V%d.B16", o+3, o+3)
		// high nibbles with qh bits 4-5 and 6-7
		a.l("VAND V30.B16, V20.B16, V22.B16")
		a.l("VAND V30.B16, V21.B16, V23.B16")
		a.l("VUSHR $4, V16.B16, V%d.B16", o+4)
		a.l("VUSHR $4, V17.B16, V%d.B16", o+5)
		a.l("VORR V22.B16, V%d.B16, V%d.B16", o+4, o+4)
		a.l("VORR V23.B16, V%d.B16, V%d.B16", o+5, o+5)
		a.l("VUSHR $2, V20.B16, V22.B16")
		a.l("VUSHR $2, V21.B16, V23.B16")
		a.l("VAND V30.B16, V22.B16, V22.B16")
		a.l("VAND V30.B16, V23.B16, V23.B16")
		a.l("VUSHR $4, V18.B16, V%d.B16", o+6)
		a.l("VUSHR $4, V19.B16, V%d.B16", o+7)
		a.l("VORR V22.B16, V%d.B16, V%d.B16", o+6, o+6)
		a.l("VORR V23.B16, V%d.B16, V%d.B16", o+7, o+7)
		for k := 0; k < 8; k++ {
			a.l("VSUB V31.B16, V%d.B16, V%d.B16", o+k, o+k)
		}
	}
	a.f16(31, 208, "R1") // d, kept in F31 through the column loop
	// scales
	a.ldq(192, "R1", 16)
	a.i(sshll28(18, 16))
	a.i(sshll8(16, 16))
	a.i(sshll216(19, 18))
	a.i(sshll16(18, 18))
	a.i(sshll216(17, 16))
	a.i(sshll16(16, 16))
	a.colLoopBegin()
	a.l("FMOVS (R9), F29")
	a.l("ADD $4, R9, R13")
	a.l("VEOR V28.B16, V28.B16, V28.B16")
	for g := 0; g < 4; g++ {
		a.l("VLD1.P 64(R13), [V20.B16, V21.B16, V22.B16, V23.B16]")
		for k := 0; k < 4; k++ {
			j := 4*g + k
			a.idot4(t, 24+k, 30, [][2]int{{j, 20 + k}})
		}
		for k := 0; k < 4; k++ {
			j := 4*g + k
			a.i(mlaElem(28, 24+k, 16+j/4, j%4))
		}
	}
	a.i(addv4s(28, 28))
	a.i(scvtfS(28, 28))
	a.l("FMULS F31, F29, F29") // d*yd (d kept in F31)
	a.l("FMULS F29, F28, F28")
	a.l("FMOVS (R10), F27")
	a.l("FADDS F28, F27, F27")
	a.l("FMOVS F27, (R10)")
	a.colLoopEnd()
	a.l("ADD $210, R1")
	a.l("ADD $292, R2")
	a.l("SUBS $1, R4")
	a.l("BNE block")
	a.l("RET")
}

func main() {
	out := flag.String("out", "", "file to write dot_arm64.s to (default: stdout)")
	attn := flag.String("attn", "", "file to write attntile_arm64.s to (default: not written)")
	amd64 := flag.String("amd64", "", "directory to write the generated amd64 files to (default: not written)")
	flag.Parse()
	if *out == "" {
		os.Stdout.WriteString(generate())
	} else {
		write(*out, generate())
	}
	if *attn != "" {
		write(*attn, generateAttn())
	}
	if *amd64 != "" {
		for _, f := range x86Files {
			write(filepath.Join(*amd64, f.name), generateX86(f))
		}
	}
}

func write(path, text string) {
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// generate returns the text of dot_arm64.s.
func generate() string {
	a := &asm{}
	a.b.WriteString("// Code generated by neon/_asm; DO NOT EDIT.\n\n//go:build arm64 && !purego\n\n#include \"textflag.h\"\n")
	a.b.WriteString(q5data)
	a.b.WriteString(q6permData)
	a.b.WriteString(zero32Data)
	for _, t := range tiers {
		for _, k := range blocks32 {
			a.dot32(k, t)
		}
		if t.dot {
			a.dotQ4_KDP()
			a.dotQ5_KDP()
		} else {
			a.dotQ4_K(t)
			a.dotQ5_K(t)
		}
		if t.dot {
			a.dotQ6_KDP()
		} else {
			a.dotQ6_KNE()
		}
		for _, k := range blocks32 {
			a.rows32(k, t)
		}
	}
	a.mulPackedDP(false)
	a.mulPackedDP(true)
	a.mulQ4_Kx8DP()
	a.mulQ6_Kx8DP()
	a.vector()
	return a.b.String()
}

// zero32: 32 zero bytes, loaded to clear two integer accumulators
// without a vector-pipe instruction.
const zero32Data = `
DATA zero32<>+0(SB)/8, $0
DATA zero32<>+8(SB)/8, $0
DATA zero32<>+16(SB)/8, $0
DATA zero32<>+24(SB)/8, $0
GLOBL zero32<>(SB), RODATA|NOPTR, $32

// tr4x4: TBL indices transposing a 4x4 matrix of bytes (byte 4i+j to
// byte 4j+i).
DATA tr4x4<>+0(SB)/8, $0x0d0905010c080400
DATA tr4x4<>+8(SB)/8, $0x0f0b07030e0a0602
GLOBL tr4x4<>(SB), RODATA|NOPTR, $16
`

const q5data = `
// q5consts: TBL indices spreading qh bytes 0,1 (then 2,3) over 16 lanes,
// and the bit each lane tests.
DATA q5consts<>+0(SB)/8, $0x0000000000000000
DATA q5consts<>+8(SB)/8, $0x0101010101010101
DATA q5consts<>+16(SB)/8, $0x0202020202020202
DATA q5consts<>+24(SB)/8, $0x0303030303030303
DATA q5consts<>+32(SB)/8, $0x8040201008040201
DATA q5consts<>+40(SB)/8, $0x8040201008040201
GLOBL q5consts<>(SB), RODATA|NOPTR, $48
`

// zero clears V(v) by MOVI, which reads no register (EOR of a register
// with itself waits for its last writer, a false dependency that can
// chain loop iterations).
func (a *asm) zero(v int) { a.l("VMOVI $0, V%d.B16", v) }

// i emits one instruction line as is.
func (a *asm) i(s string) { a.b.WriteString("\t" + s + "\n") }

// ldq loads the 16 bytes at off(base) into V(d). The address goes through
// R26 and LD1, which qemu emulates much faster than an unaligned LDR Q.
func (a *asm) ldq(off int, base string, d int) {
	a.l("ADD $%d, %s, R26", off, base)
	a.l("VLD1 (R26), [V%d.B16]", d)
}

// ldq2 loads the 32 bytes at off(base) into V(d0), V(d0+1).
func (a *asm) ldq2(off int, base string, d0, d1 int) {
	if d1 != d0+1 {
		panic("ldq2: registers not consecutive")
	}
	a.l("ADD $%d, %s, R26", off, base)
	a.l("VLD1 (R26), [V%d.B16, V%d.B16]", d0, d1)
}
